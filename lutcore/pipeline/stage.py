"""One pipeline stage: a contiguous range of layers (plus, on stage 0, the
embedding and the readout), ready to run.

Design: a ``Stage`` owns kernel-ready weights for its layers only — float32
(in, out) matrices (``to_kn``) for ``lutcore.ops.matmul`` or, with ``units=``,
``Q8`` blocks quantized once at load (``quantize(w_kn, axis=0)``) for
``lutcore.qmatmul``.  q/k/v are
fused into one (C, Nq + 2 Nkv) matrix and gate/up into one (C, 2I) matrix, so
a token costs one matmul each; quantizing the fused matrix along K per column
gives the very same blocks as quantizing the parts.  Per-sequence state (KV
caches, Mamba conv/SSM states, the position) lives in a ``StageCache``, not in
the stage, so one stage object can serve many sequences.

Per-layer units: ``units`` may also be a mapping {Hugging Face module name / prefix /
glob: spec} (``lutcore.units.assign``; names from ``arch.unit_layer_names``, the head
is "lm_head") or a resolved ``Assignment`` for the whole model (what ``Pipeline``
passes: each stage takes its own layers' entries).  A fused group (q/k/v, gate/up)
whose parts have different units becomes a ``_Split`` of column ranges, each its
own matrix — the same bits as multiplying the parts alone (every output column is
its own block-scaled sum).  ``set_units`` changes units on the quantized weights in
place (a Q8 weight does not depend on the units; a fused group is split by slicing
its columns); switching a layer between float and units needs the float weights,
which a stage does not keep, and is a ValueError.

Bits: layer ``i`` runs the same operations on the same operands whichever
stage holds it — no work is batched across layers or stages, and every
function below depends only on (its layer's weights, x, the cache, the
position).  Hence any split gives the bits of the unsplit model.  No BLAS:
every float product (weights, q.k, p.v, the head) is ``lutcore.ops.matmul``
and every reduction (norm means, softmax sums) an in-order sum per row
(csrc/norm/norm.h, csrc/softmax/softmax.h), and exp/silu/sigmoid are lutcore's kernels — the same bits at any thread
count and on every SIMD path, so in every process and on every machine.  The
chains also make each row independent of the others (a masked score adds an
exact 0), so for the attention families a token decoded with the KV cache has
the bits it has in a full recompute.

Shapes (one sequence; T new tokens, S = positions so far + T):

    embed(ids (T,), start)     -> x (T, C) float32          head only
    run_layers(x (T, C), cache) -> x (T, C) float32 (new array)
    readout(x (T, C))          -> logits (T, V) float32     head only
    attention, per layer:  q (KV, g*T, hd) @ K^T (KV, hd, S) -> (KV, g*T, S)
                           softmax -> @ V (KV, S, hd) -> (T, H*hd)
"""
from __future__ import annotations

import math

import numpy as np

from lutcore import _check, _threads, audit
from lutcore._threads import resolve_threads
from lutcore.ops import decode as _decode, rows as _rows
from lutcore.ops.mathfn import sigmoid as _sigmoid, silu as _silu
from lutcore.ops.matmul import PackedMatrix
from lutcore.ops.matmul import matmul as _fmm
from lutcore.pipeline.arch import ArchSpec, attn_layers, head_tensors, layer_tensors, tensor_layout, unit_layers
from lutcore.pipeline.shard import _as_plan, load_stage_weights, stage_tensor_names, to_kn
from lutcore.ops import accum as _accum
from lutcore.quant import Q8, QLinear, attn_scores, attn_values

__all__ = ["Stage", "StageCache"]

_GELU_K = 2.0 * math.sqrt(2.0 / math.pi)     # 0.5 (1 + tanh(u)) == sigmoid(2u)
_EW_SERIAL = 1 << 16      # elementwise kernels on fewer values run on one thread (bits do not depend on it;
                          # waking an OpenMP team costs more than the work)


class _KV:
    """K and V of one attention layer: (KV, capacity, hd) each, grown by doubling."""
    __slots__ = ("k", "v")

    def __init__(self, kv_heads, head_dim):
        self.k = np.empty((kv_heads, 0, head_dim), np.float32)
        self.v = np.empty((kv_heads, 0, head_dim), np.float32)

    def reserve(self, need, pos):
        """Room for positions 0..need-1 (rows 0..pos-1 kept)."""
        cap = self.k.shape[1]
        if need > cap:
            new = max(need, 2 * cap, 16)
            for name in ("k", "v"):
                old = getattr(self, name)
                buf = np.empty((old.shape[0], new, old.shape[2]), np.float32)
                buf[:, :pos] = old[:, :pos]
                setattr(self, name, buf)

    def append(self, k, v, pos):
        """k, v (T, KV, hd) at positions pos..pos+T-1 -> views of K, V (KV, pos+T, hd)."""
        need = pos + k.shape[0]
        self.reserve(need, pos)
        self.k[:, pos:need] = k.transpose(1, 0, 2)
        self.v[:, pos:need] = v.transpose(1, 0, 2)
        return self.k[:, :need], self.v[:, :need]


class StageCache:
    """Per-sequence state of one stage: ``pos`` (positions already processed) and,
    per layer index, a KV cache or a Mamba (conv, ssm) state."""

    def __init__(self, stage: "Stage"):
        self.lo, self.hi = stage.plan.lo, stage.plan.hi
        self.pos = 0
        spec = stage.spec
        self.layers = {}
        for L in stage.layers:
            if spec.family == "mamba":
                m = stage._mcfg
                self.layers[L.index] = (np.zeros((1, m.d_conv - 1, m.d_inner), np.float32),
                                        np.zeros((1, m.d_inner, m.d_state), np.float32))
            else:
                self.layers[L.index] = _KV(spec.kv_heads, spec.head_dim)

    def __repr__(self):
        return f"StageCache(layers {self.lo}..{self.hi - 1}, pos={self.pos})"


class _Layer:
    """One transformer layer, weights kernel-ready (matrices (K, N) float32 or Q8)."""
    __slots__ = ("index", "n1w", "n1b", "wqkv", "bqkv", "wo", "bo", "n2w", "n2b", "wup", "bup",
                 "wdown", "bdown", "scale", "window", "attn_names")


def _is_attention(name: str) -> bool:
    from lutcore.units.assign import is_attention
    return is_attention(name)


def _is_mx(units) -> bool:
    """Whether ``units`` are MX units (a QLinear keeps its MX blocks after a switch to other units)."""
    return getattr(units, "kind", None) == "mx"


def _attention_units(per: dict) -> dict:
    """{attention product: Units or None}, each unit checked for attention (check_attention_units)."""
    from lutcore.quant import check_attention_units
    return {n: None if u is None else check_attention_units(u, n) for n, u in per.items()}


class _MambaLayer:
    __slots__ = ("index", "block")

    def __init__(self, index, block):
        self.index, self.block = index, block


class _QLinear:
    """Mamba1Block's matmul hook with the weight quantized once (x @ w.T through the units)."""

    def __init__(self, w, units, threads, keep_mx=()):
        self.lin = QLinear(to_kn(w, w.shape[0], w.shape[1], "out_in"), units, threads=threads, keep_mx=keep_mx)
        self.q = self.lin.q8

    def forward(self, x2, w):
        return self.lin(np.ascontiguousarray(x2, np.float32))


class _Split:
    """A fused (K, N) weight whose column ranges run through different units (or float):
    ``parts`` [(lo, hi, matrix)], each matrix a QLinear or a PackedMatrix."""
    __slots__ = ("parts", "shape")

    def __init__(self, parts, K):
        self.parts = parts
        self.shape = (K, parts[-1][1])


def _same(us):
    return all((u is None) == (us[0] is None) and (u is None or u.digest == us[0].digest) for u in us)


def _cat(parts, axis):
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


class Stage:
    """Layers ``plan.lo .. plan.hi-1`` of a model (and the head when ``plan.head``).

    ``weights``: {checkpoint name: array} as ``load_stage_weights`` returns them
    (checked here too: missing or misshaped tensors raise ValueError).
    ``units``: None for float32 matmuls, or a ``Units``/name/directory to run every
    weight matmul as a block-scaled int8 ``qmatmul`` through those units.
    ``keep_mx``: MX units whose blocks of every quantized weight are made from the float weight
    at build as well, so that ``set_units`` to them later gives the bits of a stage built with
    them (a search over a library holding MX units; otherwise their blocks come from the Q8).
    A stage is not thread-safe: one call at a time.
    """

    def __init__(self, spec: ArchSpec, plan, weights: dict, units=None, threads=None, keep_mx=()):
        if not isinstance(spec, ArchSpec):
            raise TypeError(f"spec: expected an ArchSpec, got {type(spec).__name__}")
        self.spec, self.plan = spec, _as_plan(plan)
        self.threads = threads
        from lutcore.quant import _mx_list
        self._keep_mx = _mx_list(keep_mx, "keep_mx")
        per = self._per_layer(spec, self.plan, units)
        self._attn_of = _attention_units({n: per.pop(n) for n in list(per) if _is_attention(n)})
        self._attn_count = None                   # {name: products} while count_products runs
        self._unit_of = per                                            # {module name: Units or None}
        us = list(self._unit_of.values())
        self.units = us[0] if us and us[0] is not None and _same(us) else None   # one units everywhere
        want = stage_tensor_names(spec, self.plan)
        missing = [n for n in want if n not in weights]
        bad = [f"{n}: expected {want[n]}, got {tuple(np.shape(weights[n]))}" for n in want
               if n in weights and tuple(np.shape(weights[n])) != tuple(want[n])]
        if missing or bad:
            raise ValueError(f"weights for {self.plan}: " + "; ".join(
                ([f"missing tensors: {missing}"] if missing else []) + ([f"misshaped tensors: {bad}"] if bad else [])))
        w = {n: np.ascontiguousarray(weights[n], np.float32) for n in want}
        self._ws: dict = {}
        self._cos = self._sin = None
        self._fused = None                 # (its linears, context capacity, [DecodeLayer]) for one-token decode
        self._fused_lin = None             # ((threads, layer ids), [(qkv, o, up, down) native linears])
        if spec.family == "mamba":
            self._mcfg = spec.mamba_config()
        self.layers = [self._build_layer(i, w) for i in range(self.plan.lo, self.plan.hi)]
        if self.plan.head:
            self._build_head(w)
        self._label_units()
        # Llama-family layers (RMSNorm, RoPE, SwiGLU with SiLU) decode one token: all of the
        # stage's layers in one native call (see _decode_fused)
        self._fusable = (self._fusable_family() and
                         not any(isinstance(m, _Split) for L in self.layers for m in (L.wqkv, L.wup)))

    @staticmethod
    def _per_layer(spec, plan, units) -> dict:
        """{module name: Units or None} of this stage's matmuls from a units argument."""
        from lutcore.pipeline.arch import unit_layer_names
        from lutcore.units import assign
        names = unit_layer_names(spec, range(plan.lo, plan.hi), head=plan.head, attention=True)
        if isinstance(units, assign.Assignment):                     # the whole model's, resolved
            return {n: units.get(n) for n in names}
        mapping = assign.as_mapping(units)
        if mapping is not None:
            return dict(assign.assign(mapping, names, fill=True, default=None))
        u = assign.resolve_spec(units)                               # one spec: the weights; attention in float
        return dict(assign.one_spec(u, names))

    @classmethod
    def from_pretrained(cls, path, spec: ArchSpec | None, plan, units=None, threads=None) -> "Stage":
        """Read only this stage's tensors from a checkpoint directory and build the stage."""
        if spec is None:
            from lutcore._io import read_config
            spec = ArchSpec.from_config(read_config(path))
        return cls(spec, plan, load_stage_weights(path, spec, plan), units=units, threads=threads)

    # ------------------------------------------------------------------ build
    def _mat(self, w_kn, units):
        """A (K, N) weight as the stage multiplies it: float32 packed once into the
        GEMM's panel layout (decode multiplies one row at a time), or Q8 quantized once."""
        if units is not None:
            return QLinear(np.ascontiguousarray(w_kn, np.float32), units, threads=self.threads, keep_mx=self._keep_mx)
        return PackedMatrix(np.ascontiguousarray(w_kn, np.float32))

    def _group(self, parts):
        """A fused weight from [(w_kn part, its units)]: one matrix when the parts agree,
        else a _Split of column ranges."""
        us = [u for _, u in parts]
        if _same(us):
            return self._mat(_cat([w for w, _ in parts], 1), us[0])
        out, lo = [], 0
        for w, u in parts:
            out.append((lo, lo + w.shape[1], self._mat(w, u)))
            lo += w.shape[1]
        return _Split(out, parts[0][0].shape[0])

    def _build_layer(self, i, w):
        spec = self.spec
        t = layer_tensors(spec, i)
        if spec.family == "mamba":
            from lutcore.models.mamba import Mamba1Block
            prefix = f"backbone.layers.{i}."
            params = {n: w[n] for n in t.values()}
            blk = Mamba1Block(self._mcfg, params, prefix, units=None)        # runs in the stage's scope
            for name, mod in unit_layers(spec, i).items():
                if self._unit_of[mod] is not None:
                    blk._mm[name] = _QLinear(params[prefix + f"mixer.{name}.weight"], self._unit_of[mod],
                                             self.threads, self._keep_mx)
            return _MambaLayer(i, blk)
        C, I, Q, KVd = spec.hidden, spec.inter, spec.q_dim, spec.kv_dim
        L = _Layer()
        L.index = i
        L.attn_names = attn_layers(spec, i)
        L.window = spec.window(i)
        L.scale = (spec.head_dim ** -0.5 if spec.attn_scale else 1.0) / ((i + 1) if spec.scale_by_layer else 1)
        get = lambda role: w.get(t.get(role)) if role in t else None       # noqa: E731
        un = {r: self._unit_of[m] for r, m in unit_layers(spec, i).items()}
        L.n1w, L.n1b, L.n2w, L.n2b = get("attn_norm"), get("attn_norm_bias"), get("mlp_norm"), get("mlp_norm_bias")
        if spec.qkv_fused:
            L.wqkv = self._mat(to_kn(w[t["qkv"]], Q + 2 * KVd, C, tensor_layout(spec, "qkv")), un["qkv"])
            L.bqkv = get("qkv_bias")
        else:
            L.wqkv = self._group([(to_kn(w[t["q"]], Q, C, "out_in"), un["q"]), (to_kn(w[t["k"]], KVd, C, "out_in"),
                                   un["k"]), (to_kn(w[t["v"]], KVd, C, "out_in"), un["v"])])
            L.bqkv = _cat([w[t["q_bias"]], w[t["k_bias"]], w[t["v_bias"]]], 0) if spec.qkv_bias else None
        L.wo = self._mat(to_kn(w[t["o"]], C, Q, tensor_layout(spec, "o")), un["o"])
        L.bo = get("o_bias")
        if spec.gated:
            L.wup = self._group([(to_kn(w[t["gate"]], I, C, "out_in"), un["gate"]),
                                 (to_kn(w[t["up"]], I, C, "out_in"), un["up"])])
            L.bup = _cat([w[t["gate_bias"]], w[t["up_bias"]]], 0) if spec.mlp_bias else None
        else:
            L.wup = self._mat(to_kn(w[t["fc"]], I, C, tensor_layout(spec, "fc")), un["fc"])
            L.bup = get("fc_bias")
        L.wdown = self._mat(to_kn(w[t["down"]], C, I, tensor_layout(spec, "down")), un["down"])
        L.bdown = get("down_bias")
        return L

    def _build_head(self, w):
        h = head_tensors(self.spec)
        self.embedding = w[h["embed"]]                                   # (V, C)
        self.positions = w.get(h.get("pos")) if "pos" in h else None     # (P, C) gpt2
        self.norm_w = w[h["norm"]]
        self.norm_b = w[h["norm_bias"]] if "norm_bias" in h else None
        head = self.embedding if self.spec.tie else w[h["lm_head"]]      # (V, C): tied -> the embedding itself
        # float: x @ head.T, the transposed view read in place (no copy); units: Q8 (C, V) once
        hu = self._unit_of["lm_head"]
        self._head = head if hu is None else QLinear(
            np.ascontiguousarray(to_kn(head, *head.shape, "out_in"), np.float32), hu, threads=self.threads,
            keep_mx=self._keep_mx)
        self._head_packed = PackedMatrix(head.T) if hu is None else None

    # ------------------------------------------------------------------ helpers
    def _buf(self, tag, rows, cols):
        """Reused (rows, cols) float32 scratch (DESIGN: fresh memory is expensive)."""
        b = self._ws.get(tag)
        if b is None or b.shape[0] < rows or b.shape[1] != cols:
            b = np.empty((max(rows, 1), cols), np.float32)
            self._ws[tag] = b
        return b[:rows]

    def _mm(self, x, w, b, out):
        """out = x @ w (+ b); w (K, N) float32 or Q8, or a _Split of them (each part into its columns)."""
        if isinstance(w, _Split):
            for lo, hi, m in w.parts:
                self._mm(x, m, None, out[:, lo:hi])
        elif isinstance(w, QLinear):
            w(x, out=out)
        else:
            _fmm(x, w, out=out, threads=self.threads)
        if b is not None:
            out += b
        return out

    def _norm(self, x, w, b, out):
        """RMSNorm (b None) or LayerNorm (with bias) over the last axis of x (T, C), eps from
        the spec: one native pass over the rows (csrc/norm/norm.h, the decode layer's steps)."""
        eps, x, nt = float(np.float32(self.spec.norm_eps)), np.ascontiguousarray(x), self._ew(x.size)
        # per layer per token: the room's unchecked calls (out, the scratch and the float32
        # weights are this stage's own, x made contiguous here)
        if b is None:
            _rows._rmsnorm_rows(out, x, w, eps, None, nt)
        else:
            T, C = x.shape
            _rows._layernorm_rows(out, self._buf("xhat", T, C), np.empty(T, np.float32), x, w, b, eps, nt)
        return out

    def _ew(self, n):
        """Threads for an elementwise kernel over n values."""
        return 1 if n < _EW_SERIAL else resolve_threads(self.threads)

    def _act(self, x):
        """The MLP activation, in place on x (contiguous)."""
        a = self.spec.act
        if a == "silu":
            return _silu(x, threads=self._ew(x.size), out=x)
        if a == "relu":
            return np.maximum(x, 0, out=x)
        # gelu_new / gelu_pytorch_tanh: x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))
        u = x * x
        u *= np.float32(0.044715)
        u += 1
        u *= x
        u *= np.float32(_GELU_K)
        _sigmoid(u, threads=self._ew(u.size), out=u)
        x *= u
        return x

    def _inv_freq(self):
        spec = self.spec
        hd = spec.head_dim
        inv = 1.0 / (spec.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        sc = spec.rope_scaling
        if sc is not None and sc["rope_type"] == "linear":
            inv = inv / sc["factor"]
        elif sc is not None and sc["rope_type"] == "llama3":
            f, lo_f, hi_f, old = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"], \
                sc["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            scaled = np.where(wavelen > old / lo_f, inv / f, inv)
            smooth = (old / wavelen - lo_f) / (hi_f - lo_f)
            smoothed = (1 - smooth) * scaled / f + smooth * scaled
            medium = ~(wavelen < old / hi_f) & ~(wavelen > old / lo_f)
            inv = np.where(medium, smoothed, scaled)
        return inv.astype(np.float32)

    def _rope_tables(self, n):
        """cos, sin (>= n, hd/2) float32; entry p depends on p alone (angle = float32(p) * inv_freq)."""
        if self._cos is None or self._cos.shape[0] < n:
            m = max(n, 2 * (0 if self._cos is None else self._cos.shape[0]), 64)
            ang = np.arange(m, dtype=np.float32)[:, None] * self._inv_freq()[None, :]    # float32 products
            self._cos = np.cos(ang.astype(np.float64)).astype(np.float32)
            self._sin = np.sin(ang.astype(np.float64)).astype(np.float32)
        return self._cos, self._sin

    def _rope(self, x, pos):
        """x (T, nh, hd) -> rotated copy (rotate-half convention of Hugging Face), one native pass."""
        cos, sin = self._rope_tables(pos + x.shape[0])
        return _decode.rope(x, cos, sin, pos)

    # ------------------------------------------------------------------ one-token decode, fused
    def _linear(self, w, b, nt):
        K, N = w.shape
        if isinstance(w, PackedMatrix):
            return _decode.float_linear(w.panels, K, N, b)
        path, bufs, block, bkp = w.decode_operands(nt)
        return _decode.q8_linear(path, K, N, bufs, block, bkp, b)

    def _fused_linears(self, nt):
        """Each layer's (qkv, o, up, down) as native linears for nt threads (built once)."""
        key = (nt, tuple(map(id, self.layers)))          # rebuilt if the layer list was edited
        if self._fused_lin is None or self._fused_lin[0] != key:
            self._fused_lin = (key, [tuple(self._linear(w, b, nt) for w, b in
                                           ((L.wqkv, L.bqkv), (L.wo, L.bo), (L.wup, L.bup), (L.wdown, L.bdown)))
                                     for L in self.layers])
        return self._fused_lin[1]

    def _fused_layers(self, nt, need):
        """The DecodeLayers for nt threads with room for `need` positions (the attention
        scratch is rebuilt, at least doubled, when outgrown)."""
        f = self._fused
        lins = self._fused_linears(nt)
        if f is not None and f[0] is lins and f[1] >= need:
            return f[2]
        spec = self.spec
        C, I, H, KV, hd = spec.hidden, spec.inter, spec.heads, spec.kv_heads, spec.head_dim
        cap = max(256, need, 2 * (f[1] if f is not None else 0))
        scratch = _decode.scratch(C, H, KV, hd, I, cap)
        layers = [_decode.layer(*lin, L.n1w, L.n2w, H, KV, hd, I, float(np.float32(spec.norm_eps)),
                                float(L.scale), int(L.window or 0), scratch)
                  for L, lin in zip(self.layers, lins)]
        self._fused = (lins, cap, layers)
        return layers

    def _decode_fused(self, x, cache, pos):
        """One token (x (1, C), updated in place) through every layer: one native call."""
        nt = resolve_threads(self.threads)
        layers = self._fused_layers(nt, pos + 1)
        cos, sin = self._rope_tables(pos + 1)
        kvs = [cache.layers[L.index] for L in self.layers]
        for kv in kvs:
            kv.reserve(pos + 1, pos)
        return _decode._run_layers(layers, x, [kv.k for kv in kvs], [kv.v for kv in kvs], pos, cos[pos], sin[pos],
                                   nt)                           # nt: the count the linears were built for

    # ------------------------------------------------------------------ layers
    def _attn_mlp(self, L: _Layer, x, kv, pos):
        """One transformer layer on the residual stream x (T, C), updated in place."""
        spec = self.spec
        T, C = x.shape
        H, KV, hd = spec.heads, spec.kv_heads, spec.head_dim
        g, Q, KVd = H // KV, spec.q_dim, spec.kv_dim
        h = self._norm(x, L.n1w, L.n1b, self._buf("h", T, C))
        qkv = self._mm(h, L.wqkv, L.bqkv, self._buf("qkv", T, Q + 2 * KVd))            # (T, Q + 2 KVd)
        q = qkv[:, :Q].reshape(T, H, hd)
        k = qkv[:, Q:Q + KVd].reshape(T, KV, hd)
        v = qkv[:, Q + KVd:].reshape(T, KV, hd)
        if spec.rope:
            q, k = self._rope(q, pos), self._rope(k, pos)
        if L.scale != 1.0:
            q *= np.float32(L.scale)                     # a fresh array, or the qkv scratch
        qh = q.reshape(T, KV, g, hd).transpose(1, 2, 0, 3).reshape(KV, g * T, hd)     # rows (g, t)
        if kv is not None:
            Kc, Vc = kv.append(k, v, pos)                                              # (KV, S, hd)
        else:
            Kc, Vc = k.transpose(1, 0, 2), v.transpose(1, 0, 2)
        uqk = self._attn_of.get(L.attn_names["qk"])
        upv = self._attn_of.get(L.attn_names["pv"])
        if self._attn_count is not None:                  # a dry run: the products each would form
            n = KV * g * T * Kc.shape[1] * hd
            self._attn_count[L.attn_names["qk"]] += n
            self._attn_count[L.attn_names["pv"]] += n
        if uqk is None:
            s = _fmm(qh, Kc.transpose(0, 2, 1), threads=self.threads)                # (KV, gT, S)
        else:                                             # q per row, each key per position (lutcore.quant)
            with _accum.labelled(L.attn_names["qk"]):
                s = np.stack([attn_scores(qh[j], Kc[j], uqk, threads=self.threads) for j in range(KV)])
        # causal / window mask, minus the row max, exp, over the in-order row sum: one native pass
        _rows._softmax_causal(s, T, pos, int(L.window or 0), self._ew(s.size))     # s: a new array
        if upv is None:
            o = _fmm(s, Vc, threads=self.threads)                                      # (KV, gT, hd)
        else:                                             # each value row on its own, position-aligned blocks
            with _accum.labelled(L.attn_names["pv"]):
                o = np.stack([attn_values(s[j], np.ascontiguousarray(Vc[j]), upv, threads=self.threads)
                              for j in range(KV)])
        o = o.reshape(KV, g, T, hd).transpose(2, 0, 1, 3).reshape(T, Q)                # (T, H*hd)
        x += self._mm(o, L.wo, L.bo, self._buf("o", T, C))
        h = self._norm(x, L.n2w, L.n2b, self._buf("h", T, C))
        if spec.gated:
            I = spec.inter
            gu = self._mm(h, L.wup, L.bup, self._buf("up", T, 2 * I))                  # (T, 2I): gate | up
            a = self._act(np.ascontiguousarray(gu[:, :I]) if T > 1 else gu[:, :I])
            a *= gu[:, I:]
        else:
            a = self._act(self._mm(h, L.wup, L.bup, self._buf("up", T, spec.inter)))
        x += self._mm(a, L.wdown, L.bdown, self._buf("o", T, C))
        return x

    def _mamba(self, L: _MambaLayer, x, state):
        if state is None:
            return L.block.forward(x[None], save=False)[0][0]
        out = np.empty_like(x)
        for t in range(x.shape[0]):
            out[t] = L.block.step(x[t:t + 1], state)[0]
        return out

    # ------------------------------------------------------------------ per-layer units
    def layer_names(self, attention: bool = False) -> list:
        """The module names of this stage's weight matmuls (and "lm_head" on the head stage);
        with ``attention``, then its layers' attention products (``<attention module>.qk`` / ``.pv``)."""
        return list(self._unit_of) + (list(self._attn_of) if attention else [])

    def assignment(self, attention: bool = False) -> dict:
        """{module name: Units or None (float)} of this stage's matmuls (``attention``: and of its
        attention products)."""
        return {**self._unit_of, **self._attn_of} if attention else dict(self._unit_of)

    def set_units(self, units) -> None:
        """Change the units of this stage's layers in place, re-quantizing nothing: one spec
        for every layer, a mapping {name / prefix / glob: spec} for the layers its keys cover
        (the others keep theirs), or a resolved ``Assignment`` (its entries for this stage's
        layers).  A layer cannot switch between float and units (the stage keeps no float
        weights): a ValueError naming it.  MX units read the weight's MX blocks of their second
        element format: those the layer was built with (from the float weight) when the format
        and block agree, else blocks made now from the Q8's values -- so a layer built with
        integer units (or MX units of another element format) and switched to MX units does not
        have the bits of one built with them (``QLinear.units``)."""
        from lutcore.units import assign
        names = list(self._unit_of)
        every = names + list(self._attn_of)
        if isinstance(units, assign.Assignment):
            new = {n: units[n] for n in every if n in units}
        else:
            mapping = assign.as_mapping(units)
            if mapping is not None:
                new = dict(assign.assign(mapping, every))
            else:
                u = assign.resolve_spec(units)                  # one spec: the weights; attention in float
                new = dict(assign.one_spec(u, every))
        attn = dict(self._attn_of)
        attn.update({n: u for n, u in new.items() if n in attn})
        new = {n: u for n, u in new.items() if n not in attn}
        want = dict(self._unit_of)
        want.update(new)
        flips = [n for n in names if (want[n] is None) != (self._unit_of[n] is None)]
        if flips:
            raise ValueError(f"units: layer{'s' if len(flips) > 1 else ''} {', '.join(flips[:8])}"
                             f"{' ...' if len(flips) > 8 else ''} would switch between float and units; a stage "
                             f"keeps only the weights it multiplies (float32 or quantized), so build the pipeline "
                             f"with units for a layer to switch its units later (from_pretrained(units=...))")
        for L in self.layers:
            mods = unit_layers(self.spec, L.index)
            if isinstance(L, _MambaLayer):
                for k, mod in mods.items():
                    if want[mod] is not None:
                        L.block._mm[k].lin.units = want[mod]
                continue
            if self.spec.qkv_fused:
                L.wqkv = self._reunit(L.wqkv, [want[mods["qkv"]]])
            else:
                L.wqkv = self._reunit(L.wqkv, [want[mods[r]] for r in ("q", "k", "v")])
            L.wo = self._reunit(L.wo, [want[mods["o"]]])
            L.wup = self._reunit(L.wup, [want[mods[r]] for r in (("gate", "up") if self.spec.gated else ("fc",))])
            L.wdown = self._reunit(L.wdown, [want[mods["down"]]])
        if self.plan.head and isinstance(self._head, QLinear):
            self._head.units = want["lm_head"]
        self._unit_of = want
        self._attn_of = _attention_units(attn)
        self._label_units()
        us = list(want.values())
        self.units = us[0] if us and us[0] is not None and _same(us) else None
        self._fused = self._fused_lin = None                    # the native decode linears hold the tables
        self._fusable = (self._fusable_family() and
                         not any(isinstance(m, _Split) for L in self.layers for m in (L.wqkv, L.wup)))

    def _label_units(self) -> None:
        """Each QLinear's label (the overflow log's layer, lutcore.ops.accum): its module name, the
        names of a fused group's parts joined by '+'."""
        names: dict = {}
        for lin, name, _ in self._unit_matrices():
            names.setdefault(id(lin), (lin, []))[1].append(name)
        for lin, ns in names.values():
            lin.label = "+".join(dict.fromkeys(ns))

    def _unit_matrices(self) -> list:
        """[(QLinear, module name, column range or None)] of every matmul through units."""
        out = []

        def parts(m, roles, mods):
            if isinstance(m, _Split):
                for (lo, hi, pm), r in zip(m.parts, roles):
                    if isinstance(pm, QLinear):
                        out.append((pm, mods[r], None))
            elif isinstance(m, QLinear):
                if len(roles) == 1:
                    out.append((m, mods[roles[0]], None))
                else:
                    for wd, r in zip(self._part_widths(m.shape[1], len(roles)), roles):
                        out.append((m, mods[r], wd))
        for L in self.layers:
            mods = unit_layers(self.spec, L.index)
            if isinstance(L, _MambaLayer):
                for k, mm in L.block._mm.items():
                    out.append((mm.lin, mods[k], None))
                continue
            parts(L.wqkv, ("qkv",) if self.spec.qkv_fused else ("q", "k", "v"), mods)
            parts(L.wo, ("o",), mods)
            parts(L.wup, ("gate", "up") if self.spec.gated else ("fc",), mods)
            parts(L.wdown, ("down",), mods)
        if self.plan.head and isinstance(self._head, QLinear):
            out.append((self._head, "lm_head", None))
        return out

    @_threads.entry
    def count_products(self, ids, attention: bool = False) -> dict:
        """{module name: multiplications through its unit} for one pass of this (whole-model)
        stage over token ids (a dry run: each unit matmul's rows x K x N as it is called; a
        fused group's parts count their own columns).  Float layers count 0.  ``attention``:
        attention's products too, each (query, key) pair's head-dim products whether they run
        through units or not (what they would cost through one)."""
        if not (self.plan.lo == 0 and self.plan.head and self.plan.hi == self.spec.layers):
            raise ValueError("count_products: needs a stage holding the whole model (embedding, every layer, "
                             "the head)")
        lins = {id(lin): lin for lin, _, _ in self._unit_matrices()}
        for lin in lins.values():
            lin.count_rows(True)
        self._attn_count = {n: 0 for n in self._attn_of}
        fusable, self._fusable = self._fusable, False          # layer by layer: the attention is counted
        try:
            self.readout(self.run_layers(self.embed(ids)))
            rows = {k: lin.rows_seen for k, lin in lins.items()}
            attn = self._attn_count
        finally:
            for lin in lins.values():
                lin.count_rows(False)
            self._attn_count, self._fusable = None, fusable
        counts = {n: 0 for n in self._unit_of}
        if attention:
            counts.update(attn)
        for lin, name, width in self._unit_matrices():
            K, N = lin.shape
            counts[name] += rows[id(lin)] * K * (N if width is None else width)
        return counts

    def _fusable_family(self):
        """Llama-family layers whose matrices the native one-token decode reads (signed 8 x 8 Q8
        weights or float; units of another format run the layer by layer path)."""
        spec = self.spec
        return (spec.family != "mamba" and spec.rope and spec.gated and spec.act == "silu"
                and not any(u is not None for u in self._attn_of.values())     # the native layer's attention is float
                and all(L.n1b is None and L.n2b is None for L in self.layers)
                and not any(getattr(m, "qf", None) is not None or _is_mx(getattr(m, "units", None))
                            for L in self.layers for m in (L.wqkv, L.wo, L.wup, L.wdown)))

    def _reunit(self, m, us):
        """Matrix ``m`` (one layer, or a fused group of len(us) parts) with units ``us`` per part."""
        if all(u is None for u in us):
            return m                                             # float stays float
        if isinstance(m, QLinear) and _same(us):
            m.units = us[0]
            return m
        parts = m.parts if isinstance(m, _Split) else None
        if parts is None:                                        # split a fused Q8 by its columns
            widths = self._part_widths(m.shape[1], len(us))
            parts, lo = [], 0
            for wd in widths:
                parts.append((lo, lo + wd, m.columns(lo, lo + wd)))
                lo += wd
        for (lo, hi, pm), u in zip(parts, us):
            if u is not None:                                    # a float part stays float
                pm.units = u
        return _Split(list(parts), m.shape[0])

    def _part_widths(self, N, n):
        spec = self.spec
        if n == 3:
            return [spec.q_dim, spec.kv_dim, spec.kv_dim]
        return [N // n] * n

    # ------------------------------------------------------------------ API
    def new_cache(self) -> StageCache:
        """Empty per-sequence state for this stage."""
        return StageCache(self)

    def _need_head(self, what):
        if not self.plan.head:
            raise ValueError(f"{what}: stage {self.plan.index} is not the head (stage 0 embeds and reads out)")

    @_threads.entry
    def embed(self, ids, start: int = 0):
        """Token ids (T,) at positions start..start+T-1 -> hidden states (T, C) float32."""
        self._need_head("embed")
        ids = np.asarray(ids)
        if ids.size == 0 and ids.dtype.kind == "f":      # [] -> float64
            ids = ids.astype(np.int64)
        ids = _check.token_ids(ids, "ids", self.spec.vocab)
        start = int(start)
        if start < 0:
            raise ValueError(f"start: expected a position >= 0, got {start}")
        x = self.embedding[ids]
        if self.positions is not None:
            P = self.positions.shape[0]
            if start + ids.size > P:
                raise ValueError(f"ids: positions up to {start + ids.size - 1} exceed the model's "
                                 f"{P} learned positions")
            x += self.positions[start:start + ids.size]
        return x

    @_threads.entry
    def run_layers(self, x, cache: StageCache | None = None):
        """Apply this stage's layers to hidden states x (T, C) float32.

        ``cache=None``: the T positions are the whole sequence (0..T-1).  With a
        ``StageCache`` (from ``new_cache()``): they follow the ``cache.pos`` already
        seen, and the cache advances by T (prefill, then one token at a time).
        Returns a new (T, C) float32 array.
        """
        x = _check.array(x, "x", np.float32, 2)
        if x.shape[1] != self.spec.hidden:
            raise ValueError(f"x: expected hidden states (T, {self.spec.hidden}), got shape {x.shape}")
        if cache is not None:
            if not isinstance(cache, StageCache):
                raise TypeError(f"cache: expected a StageCache (stage.new_cache()), got {type(cache).__name__}")
            if (cache.lo, cache.hi) != (self.plan.lo, self.plan.hi) or \
                    any(L.index not in cache.layers for L in self.layers):
                raise ValueError(f"cache: made for layers [{cache.lo}, {cache.hi}), not for {self.plan}")
        pos = 0 if cache is None else cache.pos
        if self.spec.max_pos is not None and pos + x.shape[0] > self.spec.max_pos:
            raise ValueError(f"x: positions up to {pos + x.shape[0] - 1} exceed the model's {self.spec.max_pos}")
        x = x.copy()
        # the audit is a Python-level check: with it on, decoding keeps the step-by-step path
        if cache is not None and x.shape[0] == 1 and self.layers and self._fusable and audit._rate == 0:
            self._decode_fused(x, cache, pos)
        else:
            for L in self.layers:
                st = None if cache is None else cache.layers[L.index]
                if self.spec.family == "mamba":
                    x = self._mamba(L, x, st)
                else:
                    self._attn_mlp(L, x, st, pos)
        if cache is not None:
            cache.pos += x.shape[0]
        return x

    @_threads.entry
    def readout(self, x):
        """Final norm and the vocabulary projection: x (T, C) -> logits (T, V) float32."""
        self._need_head("readout")
        x = _check.array(x, "x", np.float32, 2)
        if x.shape[1] != self.spec.hidden:
            raise ValueError(f"x: expected hidden states (T, {self.spec.hidden}), got shape {x.shape}")
        T = x.shape[0]
        h = self._norm(x, self.norm_w, self.norm_b, self._buf("h", T, self.spec.hidden))
        out = np.empty((T, self.spec.vocab), np.float32)
        if isinstance(self._head, QLinear):
            return self._head(np.ascontiguousarray(h, np.float32), out=out)
        return _fmm(h, self._head_packed, out=out, threads=self.threads)

    @staticmethod
    def pick_token(logits, temperature: float = 0.0, top_k=None, top_p=None, seed=None) -> int:
        """Greedy for temperature 0 (ties to the lowest id), else a draw from
        ``np.random.default_rng(seed)`` (see ``lutcore.sampling.pick_token``)."""
        from lutcore.sampling import check_sampling, seeded_draw
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
        if isinstance(seed, (tuple, list)):
            seed = tuple(_check.int_arg(v, "seed", lo=0) for v in seed)
        else:
            seed = _check.seed_arg(seed)
        return seeded_draw(logits, temperature, top_k, top_p, seed)

    def nbytes(self) -> int:
        """Bytes of the weights this stage holds (float32 or Q8)."""
        seen, total = set(), 0

        def add(a):
            nonlocal total
            if a is None or id(a) in seen:
                return
            seen.add(id(a))
            if isinstance(a, QLinear):
                total += a.q8.q.nbytes + a.q8.scale.nbytes
            elif isinstance(a, Q8):
                total += a.q.nbytes + a.scale.nbytes
            elif isinstance(a, PackedMatrix):
                total += a.panels.nbytes
            elif isinstance(a, _Split):
                for *_, m in a.parts:
                    add(m)
                return
            else:
                total += a.nbytes

        for L in self.layers:
            if isinstance(L, _MambaLayer):
                for v in L.block.params.values():
                    add(v)
            else:
                for name in _Layer.__slots__:
                    if name in ("index", "scale", "window", "attn_names"):
                        continue
                    add(getattr(L, name))
        if self.plan.head:
            for a in (self.embedding, self.positions, self.norm_w, self.norm_b, self._head):
                add(a)
        return total

    def __repr__(self):
        us = list(self._unit_of.values())
        mode = "float32" if all(u is None for u in us) else f"units={self.units.name}" if self.units is not None \
            else "per-layer units"
        return f"Stage({self.spec.model_type}, {self.plan}, {mode})"
