"""GPT-style decoder-only transformer with a hand-written exact backward.

Design: the same shape as ``MambaLM`` — a config dataclass, a flat
``{name: array}`` parameter dict owned by the model (the optimizer updates
these arrays in place), ``forward``/``loss``/``loss_and_grads``/``generate``.
Linear layers, layer norms and the cross-entropy come from
``lutcore.models._layers`` (their backwards ACCUMULATE into the grads the
caller zeroed); attention and GELU from their kernel rooms (``lutcore.ops.attn``,
``lutcore.ops.mathfn``).  One forward, sizes ``B, L, C`` (batch, positions, channels), ``H``
heads of ``hd = C / H``:

    h   = wte[ids] + wpe[:L]                                (B, L, C)
    per block i:
      a   = layernorm(h; ln1)                               (B, L, C)
      q,k,v = split(a @ qkv.weight.T + qkv.bias)            (B, H, L, hd) each
      att = softmax(q k^T / sqrt(hd) + causal mask)         (B, H, L, L)
      y   = merge_heads(att v)                              (B, L, C)
      h   = h + y @ proj.weight.T + proj.bias
      m   = layernorm(h; ln2)                               (B, L, C)
      h   = h + gelu_tanh(m @ fc.weight.T + fc.bias) @ mlp.proj.weight.T + mlp.proj.bias
    logits = layernorm(h; ln_f) @ wte.T                     (B, L, V)   (head tied to wte)

Through the units (``units=`` given): every linear layer's matmul and the LM
head run through ``UnitMatmul`` — block-scaled int8 through the multiplier
table forward, straight-through estimator backward (float, or through the
units too with ``unit_backward=True``, through the unit's gradient tables with
``unit_backward="table"``).  The attention products ``q k^T`` and
``att v`` multiply two activations (no weight): they stay in float unless a
key names them (``h.{i}.attn.qk`` / ``.pv``, ``_unit_attention``: through
``lutcore.quant.attn_scores`` / ``attn_values``, backward the float
attention's gradient at their probabilities); biases, norms, softmax and
GELU are float.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from lutcore.models.unitmm import unit_backward_arg
from lutcore import _check, _threads
from lutcore._alloc import reusing
from lutcore.models import _layers as nn
from lutcore.models._base import LanguageModel
from lutcore._threads import resolve_threads
from lutcore.ops.attn import causal_attention, causal_attention_backward
from lutcore.ops.matmul import matmul
from lutcore.ops.mathfn import gelu_tanh, gelu_tanh_backward

__all__ = ["GPTConfig", "GPT"]


@dataclasses.dataclass
class GPTConfig:
    vocab: int = 256
    dim: int = 32
    context: int = 32
    layers: int = 2
    heads: int = 2
    mlp_ratio: int = 4
    seed: int = 0
    ln_eps: float = 1e-5

    def __post_init__(self):
        for f in ("vocab", "dim", "context", "layers", "heads", "mlp_ratio"):
            _check.int_arg(getattr(self, f), f, lo=1)
        if self.dim % self.heads:
            raise ValueError(f"heads: dim {self.dim} is not divisible by heads {self.heads}")
        self.ln_eps = _check.float_arg(self.ln_eps, "ln_eps", lo=0.0, lo_open=True)
        self.seed = _check.int_arg(self.seed, "seed", lo=0)

    @property
    def vocab_size(self) -> int:          # the name the Trainer (and MambaConfig) use
        return self.vocab

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def hidden(self) -> int:
        return self.mlp_ratio * self.dim

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _block_shapes(cfg: GPTConfig) -> dict:
    C, F = cfg.dim, cfg.hidden
    return {
        "ln1.weight": (C,), "ln1.bias": (C,),
        "attn.qkv.weight": (3 * C, C), "attn.qkv.bias": (3 * C,),
        "attn.proj.weight": (C, C), "attn.proj.bias": (C,),
        "ln2.weight": (C,), "ln2.bias": (C,),
        "mlp.fc.weight": (F, C), "mlp.fc.bias": (F,),
        "mlp.proj.weight": (C, F), "mlp.proj.bias": (C,),
    }


# ---------------------------------------------------------------- layer math
# causal softmax attention per (batch, head): lutcore.ops.attn (float32: native softmax rows;
# float64: numpy), under the names this model's code and tests use
attention_fwd = causal_attention
attention_bwd = causal_attention_backward


def _unit_attention(q, k, v, uqk, upv, pre, threads):
    """Causal attention with its products through units (None: float): scores = attn_scores(q, k)
    times 1/sqrt(hd) (float32, after the product), the same causal softmax rows, then
    attn_values(att, v) (``lutcore.quant``); att is returned for the STE backward (the float
    attention's gradient at these probabilities)."""
    from lutcore.ops import accum as _accum, rows as _rows
    from lutcore.quant import attn_scores, attn_values
    B, H, L, hd = q.shape
    scale = np.float32(1.0 / math.sqrt(hd))
    s = np.empty((B, H, L, L), np.float32)
    for b in range(B):
        for h in range(H):
            if uqk is None:
                s[b, h] = matmul(q[b, h], np.ascontiguousarray(k[b, h].T), threads=threads)
            else:
                with _accum.labelled(pre + "attn.qk"):
                    s[b, h] = attn_scores(q[b, h], k[b, h], uqk, threads=threads)
    s *= scale
    _rows._softmax_causal(s.reshape(-1, L, L), L, 0, 0, resolve_threads(threads))
    y = np.empty((B, H, L, hd), np.float32)
    for b in range(B):
        for h in range(H):
            if upv is None:
                y[b, h] = matmul(s[b, h], v[b, h], threads=threads)
            else:
                with _accum.labelled(pre + "attn.pv"):
                    y[b, h] = attn_values(s[b, h], v[b, h], upv, threads=threads)
    return y, s


class GPT(LanguageModel):
    """GPT language model: ``forward(ids)`` -> logits, ``loss_and_grads(ids, targets)``,
    ``parameters()`` by name, ``generate``.

    ``dtype`` float32 (default) or float64 (the gradient-check reference runs
    the same code in float64).  ``units``: a ``lutcore.Units``, a name
    ("exact", "truncated:6", "mitchell", "reduced:4") or a directory — the
    linear layers and the head then run through the units (see the module
    docstring); or per layer, a mapping {layer / prefix / glob: spec} over
    ``layer_names()`` (the layers no key covers multiply in float; ``set_units``,
    ``assignment``: ``lutcore.models._base``); ``unit_backward`` and ``two_pass`` are
    passed to ``UnitMatmul``.  ``threads`` (None: lutcore's default,
    ``lutcore.set_num_threads``) is the team size of every kernel the model calls — its float
    matmuls, norms, softmax and unit matmuls (``lutcore._threads.scope``); bits do not depend on it.
    """

    _kind = "GPT"

    def __init__(self, config: GPTConfig | None = None, units=None, unit_backward=False,
                 dtype=np.float32, params: dict | None = None, threads=None, two_pass: bool = False):
        if config is not None and not isinstance(config, GPTConfig):
            raise TypeError(f"config: expected a GPTConfig (or None for the defaults), got {type(config).__name__}")
        if params is not None and not isinstance(params, dict):
            raise TypeError(f"params: expected a dict {{name: array}}, got {type(params).__name__}")
        self.config = config or GPTConfig()
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"dtype: expected float32 or float64, got {dtype!r}") from None
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype: expected float32 or float64, got {self.dtype}")
        self.unit_backward, self.two_pass, self.threads = (unit_backward_arg(unit_backward),
                                                            _check.bool_arg(two_pass, "two_pass"), threads)
        self._params = self._init_params() if params is None else self._check_params(params)
        self._init_units(units)

    def _unit_layers(self):
        """The matmul layers: h.{i}.attn.qkv, h.{i}.attn.proj, h.{i}.mlp.fc, h.{i}.mlp.proj (the
        parameter names without .weight), and lm_head (the head, tied to wte)."""
        return [f"h.{i}.{k}" for i in range(self.config.layers)
                for k in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")] + ["lm_head"]

    def _attn_layers(self):
        """Attention's own products: h.{i}.attn.qk (q k^T) and h.{i}.attn.pv (p v)."""
        return [f"h.{i}.attn.{k}" for i in range(self.config.layers) for k in ("qk", "pv")]

    def _attn_counts(self, ids) -> dict:
        ids = self._ids(ids)
        B, L = ids.shape
        cfg = self.config
        n = B * cfg.heads * L * L * cfg.head_dim            # every (query, key) pair as the unit forms it
        return {name: n for name in self._attn}

    # ---------------------------------------------------------------- params
    def _expected_shapes(self) -> dict:
        cfg = self.config
        s = {"wte": (cfg.vocab, cfg.dim), "wpe": (cfg.context, cfg.dim)}
        for i in range(cfg.layers):
            for k, v in _block_shapes(cfg).items():
                s[f"h.{i}.{k}"] = v
        s["ln_f.weight"] = (cfg.dim,)
        s["ln_f.bias"] = (cfg.dim,)
        return s

    def _init_params(self) -> dict:
        """GPT-2's init: N(0, 0.02) weights, residual projections scaled by 1/sqrt(2*layers),
        zero biases, unit LayerNorm gains."""
        cfg = self.config
        rng = np.random.default_rng(cfg.seed)
        std_res = 0.02 / math.sqrt(2 * cfg.layers)
        p = {"wte": rng.normal(0, 0.02, (cfg.vocab, cfg.dim)), "wpe": rng.normal(0, 0.02, (cfg.context, cfg.dim))}
        for i in range(cfg.layers):
            for k, shape in _block_shapes(cfg).items():
                if k.endswith(".bias"):
                    v = np.zeros(shape)
                elif k.startswith("ln"):
                    v = np.ones(shape)
                else:
                    v = rng.normal(0, std_res if k.endswith("proj.weight") else 0.02, shape)
                p[f"h.{i}.{k}"] = v
        p["ln_f.weight"] = np.ones(cfg.dim)
        p["ln_f.bias"] = np.zeros(cfg.dim)
        return {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in p.items()}

    def _check_params(self, params: dict) -> dict:
        return self._match_params(dict(params), self._expected_shapes())

    def _tokens(self, ids, name="ids"):
        """Integer (batch, L) ids in [0, vocab) of any length (a 1-D prompt becomes one row)."""
        return self._token_ids(ids, name)

    def _ids(self, ids, name="ids"):
        """As ``_tokens``, and 1 <= L <= context (the position table's length)."""
        ids = self._tokens(ids, name)
        if not 1 <= ids.shape[1] <= self.config.context:
            raise ValueError(f"{name}: sequence length {ids.shape[1]} outside [1, context={self.config.context}]")
        return ids

    def _block_fwd(self, i, x):
        """x (B, L, C) -> (out (B, L, C), cache)."""
        cfg, P = self.config, self._params
        B, L, C = x.shape
        H, hd = cfg.heads, cfg.head_dim
        pre = f"h.{i}."
        mm = lambda name: self._mms[pre + name]             # noqa: E731  this layer's UnitMatmul (None: float)
        a, ln1 = nn.layernorm_fwd(x, P[pre + "ln1.weight"], P[pre + "ln1.bias"], cfg.ln_eps)
        qkv = nn.linear_fwd(a, P[pre + "attn.qkv.weight"], P[pre + "attn.qkv.bias"], mm("attn.qkv"))  # (B, L, 3C)
        # heads split once into contiguous (B, H, L, hd) arrays: every product of the
        # forward and the backward reads them as they lie (a strided view would be
        # copied by each batched matmul that takes it)
        qkv = np.ascontiguousarray(qkv.reshape(B, L, 3, H, hd).transpose(2, 0, 3, 1, 4))    # (3, B, H, L, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        uqk, upv = self._attn.get(pre + "attn.qk"), self._attn.get(pre + "attn.pv")
        if (uqk is not None or upv is not None) and self.dtype == np.float32:
            yh, att = _unit_attention(q, k, v, uqk, upv, pre, self.threads)                # through the units
        else:
            yh, att = attention_fwd(q, k, v)                                                # (B, H, L, hd)
        y = np.ascontiguousarray(yh.transpose(0, 2, 1, 3)).reshape(B, L, C)
        x1 = x + nn.linear_fwd(y, P[pre + "attn.proj.weight"], P[pre + "attn.proj.bias"], mm("attn.proj"))
        m, ln2 = nn.layernorm_fwd(x1, P[pre + "ln2.weight"], P[pre + "ln2.bias"], cfg.ln_eps)
        u = nn.linear_fwd(m, P[pre + "mlp.fc.weight"], P[pre + "mlp.fc.bias"], mm("mlp.fc"))   # (B, L, F)
        g, t = gelu_tanh(u)                     # GELU, tanh form (GPT-2); t kept for backward
        out = x1 + nn.linear_fwd(g, P[pre + "mlp.proj.weight"], P[pre + "mlp.proj.bias"], mm("mlp.proj"))
        return out, (ln1, a, q, k, v, att, y, ln2, m, u, t, g)

    def _block_bwd(self, i, dout, cache, grads):
        """Accumulate block i's parameter gradients into ``grads``; return dx."""
        cfg, P = self.config, self._params
        ln1, a, q, k, v, att, y, ln2, m, u, t, g = cache
        B, L, C = dout.shape
        H, hd = cfg.heads, cfg.head_dim
        pre = f"h.{i}."
        mm = lambda name: self._mms[pre + name]             # noqa: E731
        G = lambda name: grads[pre + name]                    # noqa: E731
        dg = nn.linear_bwd(dout, g, P[pre + "mlp.proj.weight"], G("mlp.proj.weight"), G("mlp.proj.bias"),
                           mm("mlp.proj"))
        du = gelu_tanh_backward(dg, u, t)
        dm = nn.linear_bwd(du, m, P[pre + "mlp.fc.weight"], G("mlp.fc.weight"), G("mlp.fc.bias"), mm("mlp.fc"))
        dx1 = dout + nn.layernorm_bwd(dm, P[pre + "ln2.weight"], ln2, G("ln2.weight"), G("ln2.bias"))
        dy = nn.linear_bwd(dx1, y, P[pre + "attn.proj.weight"], G("attn.proj.weight"), G("attn.proj.bias"),
                           mm("attn.proj"))
        dyh = np.ascontiguousarray(dy.reshape(B, L, H, hd).transpose(0, 2, 1, 3))           # (B, H, L, hd)
        dq, dk, dv = attention_bwd(dyh, q, k, v, att)
        dqkv = np.empty((B, L, 3, H, hd), dq.dtype)                                          # (B, L, 3C)
        for j, d in enumerate((dq, dk, dv)):
            dqkv[:, :, j] = d.transpose(0, 2, 1, 3)
        dqkv = dqkv.reshape(B, L, 3 * C)
        da = nn.linear_bwd(dqkv, a, P[pre + "attn.qkv.weight"], G("attn.qkv.weight"), G("attn.qkv.bias"),
                           mm("attn.qkv"))
        return dx1 + nn.layernorm_bwd(da, P[pre + "ln1.weight"], ln1, G("ln1.weight"), G("ln1.bias"))

    def _forward(self, ids, save):
        cfg, P = self.config, self._params
        L = ids.shape[1]
        h = P["wte"][ids] + P["wpe"][:L]                                                     # (B, L, C)
        caches = []
        for i in range(cfg.layers):
            h, c = self._block_fwd(i, h)
            if save:
                caches.append(c)
        hf, lnf = nn.layernorm_fwd(h, P["ln_f.weight"], P["ln_f.bias"], cfg.ln_eps)
        logits = nn.linear_fwd(hf, P["wte"], None, self._mms["lm_head"])                               # (B, L, V)
        return logits, (caches, hf, lnf)

    @_threads.entry
    @reusing
    def forward(self, ids):
        """ids (batch, L) or (L,), L <= context -> logits (batch, L, vocab)."""
        return self._forward(self._ids(ids), save=False)[0]

    __call__ = forward

    def loss(self, ids, targets) -> float:
        ids, targets = self._pair(ids, targets)
        return nn.cross_entropy(self.forward(ids), targets)[0]

    @_threads.entry
    @reusing
    def loss_and_grads(self, ids, targets, grads: dict | None = None):
        """Mean cross-entropy over all positions and {name: gradient}.

        Gradients are ADDED into ``grads`` when given (accumulation), else a
        fresh zeroed dict is returned."""
        ids, targets = self._pair(ids, targets)
        grads = self._grads(grads)
        cfg, P = self.config, self._params
        logits, (caches, hf, lnf) = self._forward(ids, save=True)
        loss, dlogits = nn.cross_entropy(logits, targets)
        dhf = nn.linear_bwd(dlogits, hf, P["wte"], grads["wte"], None, self._mms["lm_head"])          # tied head
        dh = nn.layernorm_bwd(dhf, P["ln_f.weight"], lnf, grads["ln_f.weight"], grads["ln_f.bias"])
        for i in reversed(range(cfg.layers)):
            dh = self._block_bwd(i, dh, caches[i], grads)
        L = ids.shape[1]
        grads["wpe"][:L] += dh.sum(axis=0)
        nn.embedding_bwd(grads["wte"], ids, dh)
        return loss, grads

    # ---------------------------------------------------------------- decoding
    @_threads.entry
    def generate(self, ids, max_new_tokens: int, temperature: float = 0.0, top_k=None, top_p=None, seed=None):
        """Greedy (temperature 0) or sampled continuation; returns prompt + new ids (1-D for a 1-D prompt).

        Each new token re-runs the forward over the last ``context`` tokens (no KV cache)."""
        from lutcore.sampling import check_sampling, draw
        one = np.ndim(ids) == 1
        seq = self._tokens(ids)
        if seq.shape[1] == 0:
            raise ValueError("ids: the prompt must hold at least one token")
        max_new_tokens = _check.int_arg(max_new_tokens, "max_new_tokens", lo=0)
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
        ctx = self.config.context
        rng = np.random.default_rng(_check.seed_arg(seed))
        for _ in range(max_new_tokens):
            logits = self.forward(seq[:, -ctx:])[:, -1]                                      # (B, V)
            nxt = np.array([draw(l, temperature, top_k, top_p, rng) for l in logits], np.int64)
            seq = np.concatenate([seq, nxt[:, None]], axis=1)
        return seq[0] if one else seq
