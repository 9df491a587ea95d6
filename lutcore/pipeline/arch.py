"""Architecture detection: a Hugging Face ``config.json`` -> ``ArchSpec``, and the
tensor names each family's checkpoints use.

Design: one frozen ``ArchSpec`` carries every fact the loader, the planner and
the stage math need, so nothing downstream re-reads the config.  Three
families:

    family  model_type             per layer
    ------  ---------------------  ------------------------------------------------
    llama   llama, qwen2, mistral  RMSNorm -> q/k/v (GQA, RoPE) -> o -> residual
                                   RMSNorm -> SwiGLU (gate, up, down) -> residual
    gpt2    gpt2                   LayerNorm+bias -> fused c_attn (Conv1D, in_out)
                                   -> c_proj -> residual; LayerNorm -> c_fc ->
                                   gelu_new -> c_proj -> residual; learned positions
    mamba   mamba                  lutcore.models.MambaLM's Mamba-1 block

``head_tensors(spec)`` / ``layer_tensors(spec, i)`` map a role ("q", "down",
"attn_norm", ...) to the exact name under which Hugging Face's
``save_pretrained`` keys the tensor; ``tensor_shapes`` gives each name's shape
and ``tensor_layout`` says whether a matrix is stored (out, in) — PyTorch's
``nn.Linear`` — or (in, out) — GPT-2's ``Conv1D``.
"""
from __future__ import annotations

import dataclasses
import math

__all__ = ["ArchSpec", "head_tensors", "layer_tensors", "tensor_shapes", "tensor_layout",
           "SUPPORTED_MODEL_TYPES"]

_LLAMA_TYPES = ("llama", "qwen2", "mistral")
SUPPORTED_MODEL_TYPES = _LLAMA_TYPES + ("gpt2", "mamba")
_ACTS = ("silu", "gelu_new", "gelu_pytorch_tanh", "relu")
_ROPE_TYPES = ("default", "linear", "llama3")


@dataclasses.dataclass(frozen=True)
class ArchSpec:
    """Everything the pipeline needs to know about a model (see the module docstring)."""
    model_type: str
    family: str                         # "llama" | "gpt2" | "mamba"
    hidden: int
    layers: int
    vocab: int
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    inter: int = 0                      # MLP width (mamba: d_inner)
    max_pos: int | None = None          # learned positions (gpt2) cap the context; None: no cap
    norm: str = "rms"                   # "rms" | "ln" (LayerNorm with bias)
    norm_eps: float = 1e-5
    rope: bool = False
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None    # {"rope_type": "linear"|"llama3", ...} or None
    tie: bool = False                   # readout reuses the embedding
    qkv_fused: bool = False             # gpt2's c_attn
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    gated: bool = True                  # SwiGLU (gate, up, down) vs fc -> act -> proj
    act: str = "silu"
    attn_scale: bool = True             # divide scores by sqrt(head_dim)
    scale_by_layer: bool = False        # gpt2's scale_attn_by_inverse_layer_idx
    windows: tuple = ()                 # per layer: sliding-window length or None
    mamba: dict | None = None           # the config fields MambaConfig.from_hf reads

    # ------------------------------------------------------------------ build
    @classmethod
    def from_config(cls, cfg: dict) -> "ArchSpec":
        """From a Hugging Face config dict.  Unknown ``model_type`` -> ValueError
        "unsupported architecture: X"; missing required fields -> ValueError naming them."""
        if not isinstance(cfg, dict):
            raise TypeError(f"cfg: expected a dict (config.json), got {type(cfg).__name__}")
        mt = cfg.get("model_type")
        if mt in _LLAMA_TYPES:
            return _llama(cfg, mt)
        if mt == "gpt2":
            return _gpt2(cfg)
        if mt == "mamba":
            return _mamba(cfg)
        raise ValueError(f"unsupported architecture: {mt!r} (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")

    # ------------------------------------------------------------- derived
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def window(self, i: int):
        """Sliding-window length of layer i (None: full causal attention)."""
        return self.windows[i] if self.windows else None

    def mamba_config(self):
        """lutcore's MambaConfig for a mamba spec."""
        if self.family != "mamba":
            raise ValueError(f"mamba_config: spec is family {self.family!r}, not 'mamba'")
        from lutcore.models.mamba import MambaConfig
        return MambaConfig.from_hf(dict(self.mamba, model_type="mamba"))

    def describe(self) -> str:
        """One line for humans (the CLI's ``inspect``)."""
        if self.family == "mamba":
            m = self.mamba_config()
            return (f"{self.model_type} (family mamba): {self.layers} layers, hidden {self.hidden}, "
                    f"d_inner {m.d_inner}, d_state {m.d_state}, vocab {self.vocab}, tied={self.tie}")
        pos = f"rope theta={self.rope_theta:g}" if self.rope else f"learned positions ({self.max_pos})"
        if self.rope and self.rope_scaling:
            pos += f" {self.rope_scaling.get('rope_type')}"
        win = sorted({w for w in self.windows if w})
        return (f"{self.model_type} (family {self.family}): {self.layers} layers, hidden {self.hidden}, "
                f"heads {self.heads}/{self.kv_heads} x {self.head_dim}, "
                f"{'SwiGLU' if self.gated else self.act} {self.inter}, "
                f"{'RMSNorm' if self.norm == 'rms' else 'LayerNorm'}, {pos}, "
                f"vocab {self.vocab}, tied={self.tie}"
                + (", qkv bias" if self.qkv_bias else "") + (f", sliding window {win}" if win else ""))


def _require(cfg, names, mt):
    missing = [n for n in names if cfg.get(n) is None]
    if missing:
        raise ValueError(f"config: missing required field(s) {missing} for model_type {mt!r}")


def _pos_int(cfg, name, value=None):
    v = cfg.get(name) if value is None else value
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"config: {name} must be a positive int, got {v!r}")
    return v


def _pos_float(cfg, name, default):
    """A positive finite number from the config (ints too; not bool)."""
    from lutcore import _check
    return _check.float_arg(cfg.get(name, default), f"config: {name}", lo=0.0, lo_open=True)


def _rope(cfg):
    """(theta, scaling) from either rope_parameters (transformers >= 5) or
    rope_theta + rope_scaling (older configs)."""
    params = cfg.get("rope_parameters")
    scaling = None
    if isinstance(params, dict) and params:
        if "rope_type" not in params and len(params) and all(isinstance(v, dict) for v in params.values()):
            raise ValueError("config: per-layer-type rope_parameters are not supported")
        theta = params.get("rope_theta", cfg.get("rope_theta", 10000.0))
        scaling = dict(params)
    else:
        theta = cfg.get("rope_theta", 10000.0)
        if isinstance(cfg.get("rope_scaling"), dict):
            scaling = dict(cfg["rope_scaling"])
    if scaling is not None:
        rt = scaling.get("rope_type", scaling.get("type", "default"))
        if rt not in _ROPE_TYPES:
            raise ValueError(f"config: rope_type {rt!r} is not supported (supported: {', '.join(_ROPE_TYPES)})")
        if rt == "default":
            scaling = None
        else:
            need = ["factor"] + (["low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]
                                 if rt == "llama3" else [])
            miss = [k for k in need if k not in scaling]
            if miss:
                raise ValueError(f"config: rope_type {rt!r} needs {miss}")
            scaling = {k: (_pos_float(scaling, k, None) if k != "original_max_position_embeddings"
                           else _pos_int(scaling, k)) for k in need}
            scaling["rope_type"] = rt
    return _pos_float({"rope_theta": theta}, "rope_theta", None), scaling


def _llama(cfg, mt):
    _require(cfg, ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                   "vocab_size"], mt)
    C = _pos_int(cfg, "hidden_size")
    H = _pos_int(cfg, "num_attention_heads")
    KV = _pos_int(cfg, "num_key_value_heads", H if cfg.get("num_key_value_heads") is None
                  else cfg["num_key_value_heads"])
    nl = _pos_int(cfg, "num_hidden_layers")
    hd = cfg.get("head_dim")
    if hd is None:
        if C % H:
            raise ValueError(f"config: hidden_size {C} is not a multiple of num_attention_heads {H}")
        hd = C // H
    hd = _pos_int(cfg, "head_dim", hd)
    if hd % 2:
        raise ValueError(f"config: head_dim {hd} must be even for RoPE")
    if H % KV:
        raise ValueError(f"config: num_attention_heads {H} is not a multiple of num_key_value_heads {KV}")
    act = cfg.get("hidden_act", "silu")
    if act not in _ACTS:
        raise ValueError(f"config: hidden_act {act!r} is not supported (supported: {', '.join(_ACTS)})")
    theta, scaling = _rope(cfg)
    attn_bias = bool(cfg.get("attention_bias", False))
    # sliding windows: transformers >= 5 lists layer_types; older configs imply them
    sw = cfg.get("sliding_window")
    lt = cfg.get("layer_types")
    if mt == "qwen2" and not cfg.get("use_sliding_window", False):
        sw = None
    if sw is not None:
        sw = _pos_int(cfg, "sliding_window", sw)
    if isinstance(lt, list) and len(lt) == nl:
        windows = tuple(sw if (t == "sliding_attention" and sw) else None for t in lt)
    elif mt == "qwen2":
        mwl = cfg.get("max_window_layers", nl)
        if isinstance(mwl, bool) or not isinstance(mwl, int) or mwl < 0:
            raise ValueError(f"config: max_window_layers must be a non-negative int, got {mwl!r}")
        windows = tuple(sw if (sw and i >= mwl) else None for i in range(nl))
    elif mt == "mistral":
        windows = tuple(sw for _ in range(nl))
    else:
        windows = tuple(None for _ in range(nl))
    if not any(windows):
        windows = ()
    return ArchSpec(
        model_type=mt, family="llama", hidden=C, layers=nl, vocab=_pos_int(cfg, "vocab_size"),
        heads=H, kv_heads=KV, head_dim=hd, inter=_pos_int(cfg, "intermediate_size"),
        max_pos=None, norm="rms", norm_eps=_pos_float(cfg, "rms_norm_eps", 1e-6), rope=True,
        rope_theta=theta, rope_scaling=scaling, tie=bool(cfg.get("tie_word_embeddings", False)),
        qkv_fused=False, qkv_bias=(mt == "qwen2") or attn_bias, o_bias=attn_bias,
        mlp_bias=bool(cfg.get("mlp_bias", False)), gated=True, act=act, windows=windows)


def _gpt2(cfg):
    _require(cfg, ["n_embd", "n_layer", "n_head", "vocab_size"], "gpt2")
    C = _pos_int(cfg, "n_embd")
    H = _pos_int(cfg, "n_head")
    if C % H:
        raise ValueError(f"config: n_embd {C} is not a multiple of n_head {H}")
    act = cfg.get("activation_function", "gelu_new")
    if act not in _ACTS:
        raise ValueError(f"config: activation_function {act!r} is not supported (supported: {', '.join(_ACTS)})")
    inter = cfg.get("n_inner") or 4 * C
    return ArchSpec(
        model_type="gpt2", family="gpt2", hidden=C, layers=_pos_int(cfg, "n_layer"),
        vocab=_pos_int(cfg, "vocab_size"), heads=H, kv_heads=H, head_dim=C // H,
        inter=_pos_int(cfg, "n_inner", inter), max_pos=_pos_int(cfg, "n_positions", cfg.get("n_positions", 1024)),
        norm="ln", norm_eps=_pos_float(cfg, "layer_norm_epsilon", 1e-5), rope=False,
        tie=bool(cfg.get("tie_word_embeddings", True)), qkv_fused=True, qkv_bias=True, o_bias=True,
        mlp_bias=True, gated=False, act=act, attn_scale=bool(cfg.get("scale_attn_weights", True)),
        scale_by_layer=bool(cfg.get("scale_attn_by_inverse_layer_idx", False)))


_MAMBA_KEYS = ("hidden_size", "num_hidden_layers", "vocab_size", "state_size", "conv_kernel", "expand",
               "intermediate_size", "time_step_rank", "use_bias", "use_conv_bias", "layer_norm_epsilon",
               "tie_word_embeddings", "lutcore")


def _mamba(cfg):
    _require(cfg, ["hidden_size", "num_hidden_layers", "vocab_size"], "mamba")
    sub = {k: cfg[k] for k in _MAMBA_KEYS if k in cfg}
    from lutcore.models.mamba import MambaConfig
    m = MambaConfig.from_hf(dict(sub, model_type="mamba"))        # validates
    return ArchSpec(model_type="mamba", family="mamba", hidden=m.d_model, layers=m.n_layer, vocab=m.vocab_size,
                    inter=m.d_inner, norm="rms", norm_eps=m.rms_eps, tie=m.tie_embeddings, gated=False,
                    mamba=sub)


# ---------------------------------------------------------------------- names
def head_tensors(spec: ArchSpec) -> dict:
    """Roles of the head (stage 0): "embed", "pos" (gpt2), "norm", "norm_bias" (gpt2),
    "lm_head" (untied only) -> checkpoint tensor names."""
    if spec.family == "llama":
        h = {"embed": "model.embed_tokens.weight", "norm": "model.norm.weight"}
    elif spec.family == "gpt2":
        h = {"embed": "transformer.wte.weight", "pos": "transformer.wpe.weight",
             "norm": "transformer.ln_f.weight", "norm_bias": "transformer.ln_f.bias"}
    else:
        h = {"embed": "backbone.embeddings.weight", "norm": "backbone.norm_f.weight"}
    if not spec.tie:
        h["lm_head"] = "lm_head.weight"
    return h


def layer_tensors(spec: ArchSpec, i: int) -> dict:
    """Roles of layer ``i`` -> checkpoint tensor names (exactly as Hugging Face keys them)."""
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < spec.layers:
        raise ValueError(f"i: expected a layer index in [0, {spec.layers}), got {i!r}")
    if spec.family == "llama":
        p = f"model.layers.{i}."
        t = {"attn_norm": p + "input_layernorm.weight",
             "q": p + "self_attn.q_proj.weight", "k": p + "self_attn.k_proj.weight",
             "v": p + "self_attn.v_proj.weight", "o": p + "self_attn.o_proj.weight",
             "mlp_norm": p + "post_attention_layernorm.weight",
             "gate": p + "mlp.gate_proj.weight", "up": p + "mlp.up_proj.weight",
             "down": p + "mlp.down_proj.weight"}
        if spec.qkv_bias:
            t.update(q_bias=p + "self_attn.q_proj.bias", k_bias=p + "self_attn.k_proj.bias",
                     v_bias=p + "self_attn.v_proj.bias")
        if spec.o_bias:
            t["o_bias"] = p + "self_attn.o_proj.bias"
        if spec.mlp_bias:
            t.update(gate_bias=p + "mlp.gate_proj.bias", up_bias=p + "mlp.up_proj.bias",
                     down_bias=p + "mlp.down_proj.bias")
        return t
    if spec.family == "gpt2":
        p = f"transformer.h.{i}."
        return {"attn_norm": p + "ln_1.weight", "attn_norm_bias": p + "ln_1.bias",
                "qkv": p + "attn.c_attn.weight", "qkv_bias": p + "attn.c_attn.bias",
                "o": p + "attn.c_proj.weight", "o_bias": p + "attn.c_proj.bias",
                "mlp_norm": p + "ln_2.weight", "mlp_norm_bias": p + "ln_2.bias",
                "fc": p + "mlp.c_fc.weight", "fc_bias": p + "mlp.c_fc.bias",
                "down": p + "mlp.c_proj.weight", "down_bias": p + "mlp.c_proj.bias"}
    from lutcore.models.mamba import _block_shapes
    p = f"backbone.layers.{i}."
    return {k: p + k for k in _block_shapes(spec.mamba_config())}


def unit_layers(spec: ArchSpec, i: int) -> dict:
    """Roles of layer ``i``'s weight matmuls -> their Hugging Face module names (the parameter
    names without ``.weight``): the names per-layer units are keyed by."""
    t = layer_tensors(spec, i)
    if spec.family == "llama":
        roles = ("q", "k", "v", "o", "gate", "up", "down")
    elif spec.family == "gpt2":
        roles = ("qkv", "o", "fc", "down")
    else:
        return {k: f"backbone.layers.{i}.mixer.{k}" for k in ("in_proj", "x_proj", "dt_proj", "out_proj")}
    return {r: t[r][:-len(".weight")] for r in roles}


def attn_layers(spec: ArchSpec, i: int) -> dict:
    """Layer ``i``'s attention products -> their names: {"qk": "<attention module>.qk", "pv":
    "<attention module>.pv"} (the module Hugging Face names: model.layers.i.self_attn,
    transformer.h.i.attn); none for a family without attention (mamba)."""
    if spec.family not in ("llama", "gpt2"):
        return {}
    t = layer_tensors(spec, i)
    mod = t["q" if spec.family == "llama" else "qkv"].rsplit(".", 2)[0]
    return {"qk": f"{mod}.qk", "pv": f"{mod}.pv"}


def unit_layer_names(spec: ArchSpec, layers=None, head: bool = True, attention: bool = False) -> list:
    """The module names of the weight matmuls of the given layers (default: all) and, when
    ``head``, of the head ("lm_head", tied or not, as Hugging Face names it), in forward order;
    with ``attention``, then the layers' attention products (``attn_layers``)."""
    layers = range(spec.layers) if layers is None else layers
    out = [n for i in layers for n in unit_layers(spec, i).values()] + (["lm_head"] if head else [])
    if attention:
        out += [n for i in layers for n in attn_layers(spec, i).values()]
    return out


def tensor_layout(spec: ArchSpec, role: str) -> str:
    """"in_out" for GPT-2's Conv1D matrices, "out_in" for every nn.Linear."""
    return "in_out" if spec.family == "gpt2" and role in ("qkv", "o", "fc", "down") else "out_in"


def tensor_shapes(spec: ArchSpec, layers=None, head: bool = True) -> dict:
    """{name: shape} for the head (when ``head``) and the given layer indices
    (default: all), in checkpoint order and layout."""
    layers = range(spec.layers) if layers is None else layers
    C, V = spec.hidden, spec.vocab
    out = {}
    if head:
        hn = head_tensors(spec)
        out[hn["embed"]] = (V, C)
        if "pos" in hn:
            out[hn["pos"]] = (spec.max_pos, C)
        out[hn["norm"]] = (C,)
        if "norm_bias" in hn:
            out[hn["norm_bias"]] = (C,)
        if "lm_head" in hn:
            out[hn["lm_head"]] = (V, C)
    if spec.family == "mamba":
        from lutcore.models.mamba import _block_shapes
        bs = _block_shapes(spec.mamba_config())
        for i in layers:
            for k, name in layer_tensors(spec, i).items():
                out[name] = tuple(bs[k])
        return out
    I, Q, KVd = spec.inter, spec.q_dim, spec.kv_dim
    for i in layers:
        t = layer_tensors(spec, i)
        if spec.family == "llama":
            shp = {"attn_norm": (C,), "q": (Q, C), "k": (KVd, C), "v": (KVd, C), "o": (C, Q),
                   "mlp_norm": (C,), "gate": (I, C), "up": (I, C), "down": (C, I),
                   "q_bias": (Q,), "k_bias": (KVd,), "v_bias": (KVd,), "o_bias": (C,),
                   "gate_bias": (I,), "up_bias": (I,), "down_bias": (C,)}
        else:
            shp = {"attn_norm": (C,), "attn_norm_bias": (C,), "qkv": (C, 3 * C), "qkv_bias": (3 * C,),
                   "o": (C, C), "o_bias": (C,), "mlp_norm": (C,), "mlp_norm_bias": (C,),
                   "fc": (C, I), "fc_bias": (I,), "down": (I, C), "down_bias": (C,)}
        for role, name in t.items():
            out[name] = shp[role]
    return out


def _nbytes(shapes: dict, itemsize: int = 4) -> int:
    return int(sum(math.prod(s) for s in shapes.values())) * itemsize
