"""Mamba-1 (S6) language model with exact forward and backward on the CPU.

Layout follows Hugging Face's ``MambaForCausalLM`` so checkpoints move both
ways: embedding -> n_layer x [RMSNorm -> mixer -> residual] -> RMSNorm -> head.
The mixer (one ``Mamba1Block`` forward):

    xn  = rmsnorm(x)                           (B, L, d)
    x,z = split(in_proj(xn))                   (B, L, E) each, E = expand*d
    xa  = silu(causal_conv1d(x))               (B, L, E)
    dt_r, Bm, Cm = split(x_proj(xa))           (B, L, R), (B, L, N), (B, L, N)
    y   = scan(xa, dt_proj.weight @ dt_r, A, Bm, Cm, D, z, dt_proj.bias)
    out = x_in + out_proj(y)

with ``A = -exp(clamp(A_log, -10, 5))`` (zero gradient outside the clamp).
Every forward keeps what its backward needs (or, with activation
checkpointing, only the block input, recomputing the rest — bit-identical
gradients).  Gradients are accumulated into a name-keyed dict with Hugging
Face's parameter names.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np

from lutcore.models.unitmm import unit_backward_arg
from lutcore import _check, _threads
from lutcore._alloc import reusing
from lutcore.models import _layers as nn
from lutcore.models._base import LanguageModel
from lutcore.ops import scan as _scan
from lutcore.ops.mathfn import silu, silu_backward
from lutcore.ops.matmul import matmul

__all__ = ["MambaConfig", "Mamba1Block", "MambaLM"]

A_LOG_LO, A_LOG_HI = -10.0, 5.0


@dataclasses.dataclass
class MambaConfig:
    d_model: int = 64
    n_layer: int = 2
    vocab_size: int = 256
    d_state: int = 16
    d_conv: int = 4
    expand: int = 2
    dt_rank: int | str = "auto"
    conv_bias: bool = True
    bias: bool = False                   # in_proj / out_proj biases
    rms_eps: float = 1e-5
    tie_embeddings: bool = True
    discretization: str = "zoh"          # "zoh" (the seed's) or "simplified" (mamba-ssm / HF)
    init: str = "mamba"                  # "mamba" (mamba-ssm dt init) or "seed"
    seed: int = 0
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    dt_init_floor: float = 1e-4

    def __post_init__(self):
        for f in ("d_model", "n_layer", "vocab_size", "d_state", "d_conv", "expand"):
            _check.int_arg(getattr(self, f), f, lo=1)
        if self.dt_rank != "auto" and (not isinstance(self.dt_rank, (int, np.integer)) or self.dt_rank <= 0):
            raise ValueError(f"dt_rank: expected 'auto' or a positive int, got {self.dt_rank!r}")
        if self.discretization not in ("zoh", "simplified"):
            raise ValueError(f"discretization: expected 'zoh' or 'simplified', got {self.discretization!r}")
        if self.init not in ("mamba", "seed"):
            raise ValueError(f"init: expected 'mamba' or 'seed', got {self.init!r}")
        if isinstance(self.dt_rank, bool):
            raise ValueError(f"dt_rank: expected 'auto' or a positive int, got {self.dt_rank!r}")
        for f in ("conv_bias", "bias", "tie_embeddings"):
            if not isinstance(getattr(self, f), (bool, np.bool_)):
                raise TypeError(f"{f}: expected True or False, got {getattr(self, f)!r}")
        self.rms_eps = _check.float_arg(self.rms_eps, "rms_eps", lo=0.0, lo_open=True)
        self.dt_min = _check.float_arg(self.dt_min, "dt_min", lo=0.0, lo_open=True)
        self.dt_max = _check.float_arg(self.dt_max, "dt_max", lo=self.dt_min)
        self.dt_init_floor = _check.float_arg(self.dt_init_floor, "dt_init_floor", lo=0.0, lo_open=True)
        self.seed = _check.int_arg(self.seed, "seed", lo=0)

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def rank(self) -> int:
        return math.ceil(self.d_model / 16) if self.dt_rank == "auto" else int(self.dt_rank)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    # ---- Hugging Face config.json
    def to_hf(self) -> dict:
        return {
            "architectures": ["MambaForCausalLM"], "model_type": "mamba",
            "vocab_size": self.vocab_size, "hidden_size": self.d_model, "state_size": self.d_state,
            "num_hidden_layers": self.n_layer, "layer_norm_epsilon": self.rms_eps, "expand": self.expand,
            "conv_kernel": self.d_conv, "intermediate_size": self.d_inner, "time_step_rank": self.rank,
            "use_bias": self.bias, "use_conv_bias": self.conv_bias, "tie_word_embeddings": self.tie_embeddings,
            "hidden_act": "silu", "residual_in_fp32": True, "time_step_min": self.dt_min,
            "time_step_max": self.dt_max, "time_step_floor": self.dt_init_floor,
            "lutcore": {"discretization": self.discretization, "init": self.init, "seed": self.seed},
        }

    @classmethod
    def from_hf(cls, cfg: dict) -> "MambaConfig":
        if not isinstance(cfg, dict):
            raise TypeError(f"config: expected a dict (config.json), got {type(cfg).__name__}")
        if cfg.get("model_type", "mamba") != "mamba":
            raise ValueError(f"unsupported architecture: {cfg.get('model_type')!r} (expected 'mamba')")
        missing = [k for k in ("hidden_size", "num_hidden_layers", "vocab_size") if k not in cfg]
        if missing:
            raise ValueError(f"config.json: missing required field(s) {missing}")

        def num(key, default, f=_check.int_arg, **kw):
            return f(cfg.get(key, default), f"config.json: {key}", **kw)

        def flag(key, default):
            v = cfg.get(key, default)
            if not isinstance(v, bool):
                raise TypeError(f"config.json: {key}: expected true or false, got {v!r}")
            return v

        d = num("hidden_size", None, lo=1)
        expand = num("expand", 2, lo=1)
        inter = num("intermediate_size", expand * d, lo=1)
        if inter % d:
            raise ValueError(f"config.json: intermediate_size {inter} is not a multiple of hidden_size {d}")
        extra = cfg.get("lutcore", {})
        if not isinstance(extra, dict):
            raise TypeError(f"config.json: lutcore: expected an object, got {type(extra).__name__}")
        return cls(d_model=d, n_layer=num("num_hidden_layers", None, lo=1), vocab_size=num("vocab_size", None, lo=1),
                   d_state=num("state_size", 16, lo=1), d_conv=num("conv_kernel", 4, lo=1),
                   expand=inter // d, dt_rank=num("time_step_rank", math.ceil(d / 16), lo=1),
                   conv_bias=flag("use_conv_bias", True), bias=flag("use_bias", False),
                   rms_eps=num("layer_norm_epsilon", 1e-5, _check.float_arg, lo=0.0, lo_open=True),
                   tie_embeddings=flag("tie_word_embeddings", True),
                   discretization=extra.get("discretization", "simplified"),
                   init=extra.get("init", "mamba"), seed=_check.int_arg(extra.get("seed", 0), "config.json: lutcore.seed"))


def _block_shapes(cfg: MambaConfig) -> dict:
    d, E, N, R, K = cfg.d_model, cfg.d_inner, cfg.d_state, cfg.rank, cfg.d_conv
    s = {
        "norm.weight": (d,),
        "mixer.in_proj.weight": (2 * E, d),
        "mixer.conv1d.weight": (E, 1, K),
        "mixer.x_proj.weight": (R + 2 * N, E),
        "mixer.dt_proj.weight": (E, R),
        "mixer.dt_proj.bias": (E,),
        "mixer.A_log": (E, N),
        "mixer.D": (E,),
        "mixer.out_proj.weight": (d, E),
    }
    if cfg.conv_bias:
        s["mixer.conv1d.bias"] = (E,)
    if cfg.bias:
        s["mixer.in_proj.bias"] = (2 * E,)
        s["mixer.out_proj.bias"] = (d,)
    return s


def _init_block(cfg: MambaConfig, rng: np.random.Generator, dtype) -> dict:
    d, E, N, R, K = cfg.d_model, cfg.d_inner, cfg.d_state, cfg.rank, cfg.d_conv

    def lin(o, i):
        k = 1.0 / math.sqrt(i)
        return rng.uniform(-k, k, (o, i))

    p = {
        "norm.weight": np.ones(d),
        "mixer.in_proj.weight": lin(2 * E, d),
        "mixer.conv1d.weight": rng.uniform(-1 / math.sqrt(K), 1 / math.sqrt(K), (E, 1, K)),
        "mixer.x_proj.weight": lin(R + 2 * N, E),
        "mixer.dt_proj.weight": rng.uniform(-R ** -0.5, R ** -0.5, (E, R)),
        "mixer.A_log": np.log(np.tile(np.arange(1, N + 1, dtype=np.float64), (E, 1))),
        "mixer.D": np.ones(E),
        "mixer.out_proj.weight": lin(d, E),
    }
    if cfg.init == "seed":
        p["mixer.dt_proj.bias"] = np.zeros(E)
    else:
        dt = np.exp(rng.uniform(size=E) * (math.log(cfg.dt_max) - math.log(cfg.dt_min)) + math.log(cfg.dt_min))
        dt = np.maximum(dt, cfg.dt_init_floor)
        p["mixer.dt_proj.bias"] = dt + np.log(-np.expm1(-dt))       # inverse softplus
    if cfg.conv_bias:
        p["mixer.conv1d.bias"] = rng.uniform(-1 / math.sqrt(K), 1 / math.sqrt(K), E)
    if cfg.bias:
        p["mixer.in_proj.bias"] = np.zeros(2 * E)
        p["mixer.out_proj.bias"] = np.zeros(d)
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in p.items()}


_PROJ = ("in_proj", "x_proj", "dt_proj", "out_proj")


class Mamba1Block:
    """One residual Mamba-1 layer; parameters are views into the owner's dict.

    ``forward(x)`` -> (y, cache); ``backward(dy, cache, grads)`` accumulates
    into ``grads`` (same keys as ``params``) and returns dx.  ``threads``: None (a block
    of a ``MambaLM`` or a pipeline ``Stage``) runs in the scope its owner's entry point
    opened; a number, for a block used on its own, opens ``scope(threads)`` around each call.
    """

    def __init__(self, cfg: MambaConfig, params: dict, prefix: str = "", units=None, unit_backward=False,
                 threads=None):
        self.cfg, self.params, self.prefix = cfg, params, prefix
        self.threads = threads
        self._mm = {}
        if units is not None:
            from lutcore.models.unitmm import UnitMatmul
            for name in _PROJ:
                self._mm[name] = UnitMatmul(units, unit_backward=unit_backward)

    def p(self, name):
        return self.params[self.prefix + name]

    def _A(self):
        al = self.p("mixer.A_log")
        return -np.exp(np.clip(al, A_LOG_LO, A_LOG_HI))

    def _in_proj(self, xn):
        """in_proj split into its x and z halves: (xi, z), each C-contiguous.

        In float the halves are two matmuls into their own arrays (no copy out
        of a (.., 2E) product); through units, one product then copies."""
        E, W = self.cfg.d_inner, self.p("mixer.in_proj.weight")
        bias = self.params.get(self.prefix + "mixer.in_proj.bias")
        mm = self._mm.get("in_proj")
        if mm is not None:
            proj = nn.linear_fwd(xn, W, bias, mm)
            return np.ascontiguousarray(proj[..., :E]), np.ascontiguousarray(proj[..., E:])
        lead, x2 = xn.shape[:-1], xn.reshape(-1, xn.shape[-1])
        xi, z = matmul(x2, W[:E].T), matmul(x2, W[E:].T)
        if bias is not None:
            xi += bias[:E]
            z += bias[E:]
        return xi.reshape(*lead, E), z.reshape(*lead, E)

    def _in_proj_bwd(self, dxi, dz, xn, grads):
        """Backward of ``_in_proj``: accumulates in_proj's gradients, returns dxn."""
        E, W, pre = self.cfg.d_inner, self.p("mixer.in_proj.weight"), self.prefix
        gw, gbias = grads[pre + "mixer.in_proj.weight"], grads.get(pre + "mixer.in_proj.bias")
        mm = self._mm.get("in_proj")
        if mm is not None:
            return nn.linear_bwd(np.concatenate([dxi, dz], axis=-1), xn, W, gw, gbias, mm)
        x2 = xn.reshape(-1, xn.shape[-1])
        dxi2, dz2 = dxi.reshape(-1, E), dz.reshape(-1, E)
        matmul(dxi2.T, x2, out=gw[:E], accumulate=True)       # the rows of each half: dW = dY^T X
        matmul(dz2.T, x2, out=gw[E:], accumulate=True)
        dxn = matmul(dxi2, W[:E])                             # dX = dXi W_x + dZ W_z
        matmul(dz2, W[E:], out=dxn, accumulate=True)
        if gbias is not None:
            gbias[:E] += dxi2.sum(axis=0)
            gbias[E:] += dz2.sum(axis=0)
        return dxn.reshape(xn.shape)

    @_threads.entry
    @reusing
    def forward(self, x, save=True):
        cfg, P = self.cfg, self.p
        E, N, R = cfg.d_inner, cfg.d_state, cfg.rank
        xn, rstd = nn.rmsnorm_fwd(x, P("norm.weight"), cfg.rms_eps)
        xi, z = self._in_proj(xn)
        cw = P("mixer.conv1d.weight").reshape(E, -1)
        xc = _scan.causal_conv1d(xi, cw, self.params.get(self.prefix + "mixer.conv1d.bias"))
        xa = silu(xc)
        dbc = nn.linear_fwd(xa, P("mixer.x_proj.weight"), self.params.get(self.prefix + "mixer.x_proj.bias"),
                            self._mm.get("x_proj"))
        ts = np.ascontiguousarray(dbc[..., :R])
        Bm = np.ascontiguousarray(dbc[..., R:R + N])
        Cm = np.ascontiguousarray(dbc[..., R + N:])
        delta = nn.linear_fwd(ts, P("mixer.dt_proj.weight"), None, self._mm.get("dt_proj"))
        A = self._A()
        y, _, sctx = _scan.selective_scan_forward(
            xa, delta, A, Bm, Cm, P("mixer.D"), z, P("mixer.dt_proj.bias"), True, cfg.discretization,
            save_for_backward=save)
        out = nn.linear_fwd(y, P("mixer.out_proj.weight"), self.params.get(self.prefix + "mixer.out_proj.bias"),
                            self._mm.get("out_proj"))
        res = x + out
        cache = (x, xn, rstd, xi, xc, xa, ts, sctx, y) if save else None
        return res, cache

    @_threads.entry
    @reusing
    def backward(self, dres, cache, grads):
        cfg, P, pre = self.cfg, self.p, self.prefix
        E = cfg.d_inner
        x, xn, rstd, xi, xc, xa, ts, sctx, y = cache
        g = lambda name: grads[pre + name]                     # noqa: E731
        gb = lambda name: grads.get(pre + name)                # noqa: E731
        dy = nn.linear_bwd(dres, y, P("mixer.out_proj.weight"), g("mixer.out_proj.weight"),
                           gb("mixer.out_proj.bias"), self._mm.get("out_proj"))
        sg = _scan.selective_scan_backward(np.ascontiguousarray(dy), ctx=sctx)
        A = sctx.A
        al = P("mixer.A_log")
        inside = (al > A_LOG_LO) & (al < A_LOG_HI)
        g("mixer.A_log")[...] += np.where(inside, sg["A"] * A, 0)
        g("mixer.D")[...] += sg["D"]
        g("mixer.dt_proj.bias")[...] += sg["delta_bias"]
        dts = nn.linear_bwd(sg["delta"], ts, P("mixer.dt_proj.weight"), g("mixer.dt_proj.weight"), None,
                            self._mm.get("dt_proj"))
        ddbc = np.concatenate([dts, sg["B"], sg["C"]], axis=-1)
        dxa = nn.linear_bwd(ddbc, xa, P("mixer.x_proj.weight"), g("mixer.x_proj.weight"),
                            gb("mixer.x_proj.bias"), self._mm.get("x_proj"))
        dxc = silu_backward(dxa, xc, dy2=sg["u"])   # (dxa + du) silu'(xc)
        cw = P("mixer.conv1d.weight").reshape(E, -1)
        dxi, dcw, dcb = _scan.causal_conv1d_backward(dxc, xi, cw)
        g("mixer.conv1d.weight")[...] += dcw.reshape(E, 1, -1)
        if cfg.conv_bias:
            g("mixer.conv1d.bias")[...] += dcb
        dxn = self._in_proj_bwd(dxi, sg["z"], xn, grads)
        dx = nn.rmsnorm_bwd(dxn, x, P("norm.weight"), rstd, g("norm.weight"))
        return dres + dx

    # ---- recurrent decoding: one token for the whole batch
    @_threads.entry
    def step(self, x, state):
        """x (B, d); state = (conv (B, K-1, E), h (B, E, N)) updated in place; returns (B, d)."""
        cfg, P = self.cfg, self.p
        E, N, R = cfg.d_inner, cfg.d_state, cfg.rank
        conv_state, h = state
        xn, _ = nn.rmsnorm_fwd(x, P("norm.weight"), cfg.rms_eps)
        xi, z = self._in_proj(xn)
        cw = P("mixer.conv1d.weight").reshape(E, -1)
        xc = _scan.causal_conv1d_step(xi, conv_state, cw, self.params.get(self.prefix + "mixer.conv1d.bias"))
        xa = silu(xc)
        dbc = nn.linear_fwd(xa, P("mixer.x_proj.weight"), self.params.get(self.prefix + "mixer.x_proj.bias"),
                            self._mm.get("x_proj"))
        ts, Bm, Cm = dbc[:, :R], dbc[:, R:R + N], dbc[:, R + N:]
        delta = nn.linear_fwd(np.ascontiguousarray(ts), P("mixer.dt_proj.weight"), None, self._mm.get("dt_proj"))
        y, last, _ = _scan.selective_scan_forward(
            xa[:, None], delta[:, None], self._A(), Bm[:, None], Cm[:, None], P("mixer.D"), z[:, None],
            P("mixer.dt_proj.bias"), True, cfg.discretization, initial_state=h, return_last_state=True,
            save_for_backward=False)
        h[...] = last
        out = nn.linear_fwd(y[:, 0], P("mixer.out_proj.weight"), self.params.get(self.prefix + "mixer.out_proj.bias"),
                            self._mm.get("out_proj"))
        return x + out


class MambaLM(LanguageModel):
    """Mamba-1 language model: ``forward(ids)`` -> logits, ``loss_and_grads(ids, targets)``,
    ``parameters()`` with Hugging Face names, ``step``/``generate``,
    ``from_pretrained``/``save_pretrained``.

    ``dtype`` float32 (default) or float64 (the gradient-check reference runs
    the same code in float64).  ``checkpoint_activations=True`` keeps only each
    block's input and recomputes the rest in backward (identical gradients).
    ``units``: None (float), one units spec for every projection and the head, or per
    layer a mapping {layer / prefix / glob: spec} over ``layer_names()`` (Hugging Face
    module names; the layers no key covers multiply in float; ``set_units``,
    ``assignment``: ``lutcore.models._base``).
    """

    _kind = "Mamba"

    def __init__(self, config: MambaConfig | None = None, dtype=np.float32, params: dict | None = None,
                 checkpoint_activations: bool = False, units=None, unit_backward=False, threads=None):
        if config is not None and not isinstance(config, MambaConfig):
            raise TypeError(f"config: expected a MambaConfig (or None for the defaults), got {type(config).__name__}")
        if params is not None and not isinstance(params, dict):
            raise TypeError(f"params: expected a dict {{name: array}}, got {type(params).__name__}")
        self.config = config or MambaConfig()
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"dtype: expected float32 or float64, got {dtype!r}") from None
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype: expected float32 or float64, got {self.dtype}")
        self.checkpoint_activations = _check.bool_arg(checkpoint_activations, "checkpoint_activations")
        self.unit_backward, self.threads = unit_backward_arg(unit_backward), threads
        if params is None:
            params = self._init_params()
        else:
            params = self._check_params(params)
        self._params = params
        self._build()
        self._init_units(units)

    def _unit_layers(self):
        """The matmul layers, by Hugging Face module name: backbone.layers.{i}.mixer.in_proj,
        x_proj, dt_proj, out_proj, and lm_head (the head, tied or not)."""
        return [f"backbone.layers.{i}.mixer.{k}" for i in range(self.config.n_layer)
                for k in _PROJ] + ["lm_head"]

    def _link_units(self):
        for i, blk in enumerate(self.blocks):
            for k in _PROJ:
                mm = self._mms[f"backbone.layers.{i}.mixer.{k}"]
                if mm is None:
                    blk._mm.pop(k, None)
                else:
                    blk._mm[k] = mm
        self._head_mm = self._mms["lm_head"]

    # ---------------------------------------------------------------- params
    def _expected_shapes(self) -> dict:
        cfg = self.config
        s = {"backbone.embeddings.weight": (cfg.vocab_size, cfg.d_model)}
        for i in range(cfg.n_layer):
            for k, v in _block_shapes(cfg).items():
                s[f"backbone.layers.{i}.{k}"] = v
        s["backbone.norm_f.weight"] = (cfg.d_model,)
        if not cfg.tie_embeddings:
            s["lm_head.weight"] = (cfg.vocab_size, cfg.d_model)
        return s

    def _init_params(self) -> dict:
        cfg = self.config
        rng = np.random.default_rng(cfg.seed)
        p = {"backbone.embeddings.weight": rng.normal(0, 0.02, (cfg.vocab_size, cfg.d_model))}
        for i in range(cfg.n_layer):
            for k, v in _init_block(cfg, rng, np.float64).items():
                p[f"backbone.layers.{i}.{k}"] = v
        p["backbone.norm_f.weight"] = np.ones(cfg.d_model)
        if not cfg.tie_embeddings:
            p["lm_head.weight"] = rng.normal(0, 0.02, (cfg.vocab_size, cfg.d_model))
        return {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in p.items()}

    def _check_params(self, params: dict) -> dict:
        want = self._expected_shapes()
        params = dict(params)
        if self.config.tie_embeddings and "lm_head.weight" in params:
            emb = params.get("backbone.embeddings.weight")
            if emb is not None and not np.array_equal(np.asarray(params["lm_head.weight"]), np.asarray(emb)):
                raise ValueError("lm_head.weight differs from backbone.embeddings.weight but the config ties them")
            params.pop("lm_head.weight")
        return self._match_params(params, want)

    def _build(self):
        # the blocks keep no thread count: they run in the model's scope (its entry points)
        self.blocks = [Mamba1Block(self.config, self._params, f"backbone.layers.{i}.", None, self.unit_backward)
                       for i in range(self.config.n_layer)]
        self._head_mm = None

    @property
    def head_weight(self):
        return self._params["backbone.embeddings.weight" if self.config.tie_embeddings else "lm_head.weight"]

    # ---------------------------------------------------------------- compute
    def _forward(self, ids, save):
        cfg = self.config
        h = self._params["backbone.embeddings.weight"][ids]
        caches = []
        for blk in self.blocks:
            if save and self.checkpoint_activations:
                caches.append(h)
                h, _ = blk.forward(h, save=False)
            else:
                h, c = blk.forward(h, save=save)
                caches.append(c)
        hf, rstd = nn.rmsnorm_fwd(h, self._params["backbone.norm_f.weight"], cfg.rms_eps)
        logits = nn.linear_fwd(hf, self.head_weight, None, self._head_mm)
        return logits, (ids, caches, h, hf, rstd)

    @_threads.entry
    @reusing
    def forward(self, ids):
        """ids (batch, L) or (L,) -> logits (batch, L, vocab)."""
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
        logits, (ids, caches, h, hf, rstd) = self._forward(ids, save=True)
        loss, dlogits = nn.cross_entropy(logits, targets)
        hname = "backbone.embeddings.weight" if self.config.tie_embeddings else "lm_head.weight"
        dhf = nn.linear_bwd(dlogits, hf, self.head_weight, grads[hname], None, self._head_mm)
        dh = nn.rmsnorm_bwd(dhf, h, self._params["backbone.norm_f.weight"], rstd, grads["backbone.norm_f.weight"])
        for blk, c in zip(reversed(self.blocks), reversed(caches)):
            if self.checkpoint_activations:
                _, c = blk.forward(c, save=True)
            dh = blk.backward(dh, c, grads)
        nn.embedding_bwd(grads["backbone.embeddings.weight"], ids, dh)
        return loss, grads

    # ---------------------------------------------------------------- decoding
    def _state_shapes(self, batch):
        """One layer's decoding state shapes: conv tail (batch, K-1, E), ssm h (batch, E, N)."""
        cfg = self.config
        return (batch, cfg.d_conv - 1, cfg.d_inner), (batch, cfg.d_inner, cfg.d_state)

    def init_state(self, batch: int = 1):
        cs, hs = self._state_shapes(_check.int_arg(batch, "batch", lo=1))
        return [(np.zeros(cs, self.dtype), np.zeros(hs, self.dtype)) for _ in range(self.config.n_layer)]

    @_threads.entry
    def step(self, token, state=None):
        """One token per sequence -> (logits (batch, vocab), new state).  O(1) per token."""
        tok = np.atleast_1d(np.asarray(token))
        if tok.ndim != 1 or tok.size == 0:
            raise ValueError(f"token: expected one token id per sequence (an int or a non-empty 1-D array), "
                             f"got shape {tok.shape}")
        tok = self._ids(tok[:, None], "token")[:, 0]
        if state is None:
            state = self.init_state(tok.shape[0])
        else:
            state = self._check_state(state, tok.shape[0])
        x = self._params["backbone.embeddings.weight"][tok]
        for blk, st in zip(self.blocks, state):
            x = blk.step(x, st)
        hf, _ = nn.rmsnorm_fwd(x, self._params["backbone.norm_f.weight"], self.config.rms_eps)
        return nn.linear_fwd(hf, self.head_weight, None, self._head_mm), state

    def _check_state(self, state, batch):
        """A copy of a decoding state for ``batch`` sequences, checked against this model."""
        nl, (cs, hs) = self.config.n_layer, self._state_shapes(batch)
        if not isinstance(state, (list, tuple)) or len(state) != nl:
            got = f"{len(state)} entries" if isinstance(state, (list, tuple)) else type(state).__name__
            raise ValueError(f"state: expected a list of {nl} (conv, ssm) pairs (init_state / step), got {got}")
        out = []
        for i, pair in enumerate(state):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"state: layer {i}: expected a (conv, ssm) pair, got {type(pair).__name__}")
            c, h = (np.asarray(x) for x in pair)
            if c.shape != cs or h.shape != hs or c.dtype.kind != "f" or h.dtype.kind != "f":
                raise ValueError(f"state: layer {i}: expected float arrays of shapes {cs} and {hs} "
                                 f"(batch {batch}), got {c.dtype} {c.shape} and {h.dtype} {h.shape}")
            out.append((c.astype(self.dtype, copy=True), h.astype(self.dtype, copy=True)))
        return out

    @staticmethod
    def save_state(state, path) -> None:
        """Write a decoding state (from ``step``) to a safetensors file (written beside it
        and renamed over it: a failed or killed save keeps the previous file)."""
        from safetensors.numpy import save_file
        from lutcore._io import atomic_file
        t = {}
        for i, (c, h) in enumerate(state):
            t[f"layers.{i}.conv"] = np.ascontiguousarray(c)
            t[f"layers.{i}.ssm"] = np.ascontiguousarray(h)
        with atomic_file(path) as tmp:
            save_file(t, tmp)

    def load_state(self, path):
        """Read a decoding state written by ``save_state``; checks it fits this model."""
        from lutcore._io import load_tensors
        t = load_tensors(os.fspath(path))
        nl, (cs, hs) = self.config.n_layer, self._state_shapes(1)
        state = []
        for i in range(nl):
            try:
                c, h = t[f"layers.{i}.conv"], t[f"layers.{i}.ssm"]
            except KeyError:
                raise ValueError(f"{os.fspath(path)}: not a decoding state for a {nl}-layer model") from None
            if c.shape[1:] != cs[1:] or h.shape[1:] != hs[1:] or c.shape[0] != h.shape[0]:
                raise ValueError(f"{os.fspath(path)}: layer {i} state has shapes {c.shape}, {h.shape}; this model "
                                 f"needs (batch,) + {cs[1:]} and (batch,) + {hs[1:]}")
            state.append((c.astype(self.dtype), h.astype(self.dtype)))
        if len(t) != 2 * nl:
            raise ValueError(f"{os.fspath(path)}: holds {len(t) // 2} layers, this model has {nl}")
        return state

    @_threads.entry
    def generate(self, ids, max_new_tokens: int, temperature: float = 0.0, top_k=None, top_p=None, seed=None):
        """Greedy (temperature 0) or sampled continuation; returns prompt + new ids (1-D for a 1-D prompt)."""
        from lutcore.sampling import check_sampling, draw
        arr = np.asarray(ids)
        one = arr.ndim == 1
        ids2 = self._ids(arr)
        if ids2.shape[1] == 0:
            raise ValueError("ids: the prompt must hold at least one token")
        max_new_tokens = _check.int_arg(max_new_tokens, "max_new_tokens", lo=0)
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
        rng = np.random.default_rng(_check.seed_arg(seed))
        state = None
        for t in range(ids2.shape[1]):
            logits, state = self.step(ids2[:, t], state)
        out = [ids2]
        for _ in range(max_new_tokens):
            nxt = np.array([draw(l, temperature, top_k, top_p, rng) for l in logits], np.int64)
            out.append(nxt[:, None])
            logits, state = self.step(nxt, state)
        res = np.concatenate(out, axis=1)
        return res[0] if one else res

    # ---------------------------------------------------------------- I/O
    def transformers_mismatch(self) -> str | None:
        """Why transformers' ``MambaForCausalLM`` would compute a different function from these
        weights, or None when it computes this model's.  It round-trips a model with
        ``discretization="simplified"`` (B̄ = dt·B, as mamba-ssm) and every ``A_log`` inside
        lutcore's clamp [-10, 5]; the default ``"zoh"`` (B̄ = (Ā − 1)/A · B) has no
        transformers equivalent, and transformers does not clamp ``A_log``."""
        why = []
        if self.config.discretization != "simplified":
            why.append(f"discretization={self.config.discretization!r}: transformers computes the 'simplified' "
                       f"discretization (B̄ = dt·B), this model the exact zero-order hold (B̄ = (Ā − 1)/A · B)")
        out = [k for k, v in self._params.items() if k.endswith("mixer.A_log")
               and (v.min() < A_LOG_LO or v.max() > A_LOG_HI)]
        if out:
            why.append(f"{len(out)} A_log tensor(s) (e.g. {out[0]}) have entries outside lutcore's clamp "
                       f"[{A_LOG_LO:g}, {A_LOG_HI:g}], which transformers does not apply")
        return "; ".join(why) or None

    def save_pretrained(self, path) -> None:
        """Write config.json + model.safetensors in Hugging Face's MambaForCausalLM layout
        (crash-safe, see ``lutcore._io.atomic_dir``: a save killed at any instant
        leaves the old or the new model loadable; other files in the directory are
        kept, an earlier save's index and shards go).

        lutcore's ``from_pretrained`` restores the model exactly (config.json's ``"lutcore"``
        entry keeps the discretization).  transformers computes the same function only for
        ``discretization="simplified"``; saving any other model warns with the reason
        (``transformers_mismatch()``) — train with ``MambaConfig(discretization="simplified")``
        for a checkpoint transformers runs as lutcore does."""
        from safetensors.numpy import save_file
        from lutcore._io import atomic_dir, path_arg
        path = path_arg(path)
        why = self.transformers_mismatch()
        if why:
            import warnings
            warnings.warn(f"save_pretrained({path!r}): transformers' MambaForCausalLM will load these "
                          f"weights as a different model — {why}. lutcore's MambaLM.from_pretrained restores this "
                          f"model exactly.", UserWarning, stacklevel=2)
        with atomic_dir(path) as tmp:
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(self.config.to_hf(), f, indent=2)
            save_file({k: np.ascontiguousarray(v) for k, v in self._params.items()},
                      os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})

    @classmethod
    def from_pretrained(cls, path, dtype=np.float32, **kw) -> "MambaLM":
        """Load a Hugging Face Mamba checkpoint directory (model.safetensors or a
        sharded index).  HF checkpoints use the "simplified" discretization."""
        from lutcore._io import read_config, read_safetensors
        cfg = MambaConfig.from_hf(read_config(path))
        tensors = read_safetensors(path, dtype=np.dtype(dtype))
        return cls(cfg, dtype=dtype, params=tensors, **kw)
