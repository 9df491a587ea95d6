"""One-token decode of llama-family layers in one native call (csrc/models/decode.h):
a model built from the kernel families, not a kernel family.

Design: ``lutcore.pipeline.stage`` builds a ``Linear`` per weight and a
``DecodeLayer`` per layer (kernel-ready weights, scratch rows shared by the
stage's layers) once, then calls ``run_layers`` once per token: every layer of
the stage runs inside one native call (one thread team).  Every step performs
the same float32 operations, in the same order, as the stage's numpy path
(``Stage._attn_mlp`` with T = 1) and calls the same kernels, so cached decoding
keeps giving the bits of a full recompute.  Python validates; the C side only
takes pointers, releases the GIL and computes.  The per-token arguments (x, the rope
rows, the caches) are typed memoryviews; the buffers a Linear or a DecodeLayer keeps
(built once) are read flat, through `data_of`'s dtype and contiguity checks.
"""
from libc.stdlib cimport malloc, free
from lutcore._native._common cimport *
bind_team()
cnp.import_array()


def kt_floats(int64_t hd):
    """Floats of the scores' transposed-key scratch per KV head (csrc/attn/attn.h LC_ATTN_KT)."""
    return LC_ATTN_KT(hd)


def body_names(int isa):
    """The bodies the decode layer runs for `isa` (show_config)."""
    att = lc_attn_body_name(isa).decode()
    gemv = lc_sgemv_body_name(isa).decode()
    return {"decode layer": f"attention {att}, float GEMV {gemv}, RMSNorm generic (one row: one in-order "
                            f"chain); Q8 linears, softmax, SiLU: the gemm and math-function bodies"}


cdef inline float *_f32(object a, str name) except? NULL:
    return <float *>data_or_null(a, cnp.NPY_FLOAT32, True, name)


cdef float[:, :, ::1] _cache(object a, str name, int64_t i, int64_t KV, int64_t pos, int64_t hd):
    """Layer i's K or V cache: (KV, cap > pos, hd) float32, C-contiguous."""
    cdef float[:, :, ::1] c
    try:
        c = a
    except (TypeError, ValueError):
        c = None
    if c is None or c.shape[0] != KV or c.shape[2] != hd or c.shape[1] <= pos:
        raise ValueError(f"{name}[{i}]: expected a C-contiguous float32 ({KV}, > {pos}, {hd}), "
                         f"got {getattr(a, 'dtype', type(a).__name__)} {tuple(getattr(a, 'shape', ()))}")
    return c


cdef class Linear:
    """y (1, N) = x (1, K) @ W (+ b), W float32 panels or Q8 through the units (csrc/models/decode.h)."""
    cdef lc_dlin d
    cdef object keep

    def __init__(self, int kind, int64_t K, int64_t N, dict arrays, int64_t bk=0, int64_t bkp=0):
        """kind 0 float: panels; 1 exact: bp, sbp, ap, qa, sa; 2 table: qb, sb, T32, twork, qa, sa;
        all: bias (or None).  The caller sizes every buffer."""
        if kind not in (LC_DLIN_FLOAT, LC_DLIN_EXACT, LC_DLIN_TABLE):
            raise ValueError(f"kind: expected 0 (float), 1 (exact) or 2 (table), got {kind}")
        self.keep = dict(arrays)
        g = self.keep.get
        self.d.kind, self.d.K, self.d.N, self.d.bk, self.d.bkp = kind, K, N, bk, bkp
        self.d.nblk = (K + bk - 1) // bk if bk > 0 else 0
        self.d.bias, self.d.panels = _f32(g("bias"), "bias"), _f32(g("panels"), "panels")
        self.d.bp = <const int8_t *>data_or_null(g("bp"), cnp.NPY_INT8, True, "bp")
        self.d.sbp = _f32(g("sbp"), "sbp")
        self.d.ap = <int16_t *>data_or_null(g("ap"), cnp.NPY_INT16, True, "ap")
        self.d.qa, self.d.sa = <int8_t *>data_or_null(g("qa"), cnp.NPY_INT8, True, "qa"), _f32(g("sa"), "sa")
        self.d.qb, self.d.sb = <const int8_t *>data_or_null(g("qb"), cnp.NPY_INT8, True, "qb"), _f32(g("sb"), "sb")
        self.d.T32 = <const int32_t *>data_or_null(g("T32"), cnp.NPY_INT32, True, "T32")
        self.d.twork = <int32_t *>data_or_null(g("twork"), cnp.NPY_INT32, True, "twork")


cdef class DecodeLayer:
    """One llama-family layer (RMSNorm, RoPE, GQA attention, SwiGLU with SiLU) for one token."""
    cdef lc_dlayer d
    cdef lc_dctx c
    cdef object keep
    cdef readonly bint teamable

    def __init__(self, Linear qkv, Linear o, Linear up, Linear down, const float[::1] n1w not None,
                 const float[::1] n2w not None, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t inter,
                 double eps, double scale, int64_t window, dict scratch):
        """scratch: h (C), qkv (Q + 2 KVd), rq (Q + KVd), att (Q), o (C), up (2 I), scores (H * smax),
        kt (KV * kt_floats(hd): each KV head's transposed key block, csrc/attn/attn.h); smax: the
        longest context.  Layers of a stage share one scratch."""
        self.keep = (qkv, o, up, down, n1w, n2w, dict(scratch))
        self.d.qkv, self.d.o, self.d.up, self.d.down = qkv.d, o.d, up.d, down.d
        self.d.n1w, self.d.n2w = &n1w[0] if n1w.shape[0] else NULL, &n2w[0] if n2w.shape[0] else NULL
        self.d.scale, self.d.window = <float>scale, window
        self.c.C, self.c.H, self.c.KV, self.c.hd, self.c.inter = n1w.shape[0], heads, kv_heads, head_dim, inter
        self.c.eps = <float>eps
        self.c.h, self.c.qkvb, self.c.rq = _f32(scratch["h"], "h"), _f32(scratch["qkv"], "qkv"), _f32(scratch["rq"], "rq")
        self.c.att, self.c.ob, self.c.upb = _f32(scratch["att"], "att"), _f32(scratch["o"], "o"), _f32(scratch["up"], "up")
        self.c.sc, self.c.kt = _f32(scratch["scores"], "scores"), _f32(scratch["kt"], "kt")
        self.c.smax = scratch["scores"].shape[0] // heads
        self.teamable = all(L.d.kind != LC_DLIN_TABLE for L in (qkv, o, up, down))

    @property
    def capacity(self):
        return self.c.smax


def run_layers(list layers, float[:, ::1] x not None, list Ks, list Vs, int64_t pos, const float[::1] cos not None,
               const float[::1] sin not None, int isa, int nthreads):
    """One token through DecodeLayers sharing one scratch: x (1, C) float32, updated in
    place; Ks[i], Vs[i] layer i's caches (KV, cap, hd) float32 with cap > pos (row pos is
    written); cos, sin: the rope rows of position pos (hd/2,).  Returns 0, or -1 on a
    non-finite activation in the units path."""
    cdef int64_t nl = len(layers), i
    if len(Ks) != nl or len(Vs) != nl:
        raise ValueError(f"Ks, Vs: expected {nl} caches each, got {len(Ks)} and {len(Vs)}")
    if nl == 0:
        return 0
    cdef DecodeLayer first = layers[0], D
    cdef lc_dctx c = first.c
    cdef int64_t KV = c.KV, hd = c.hd
    if x.shape[0] != 1 or x.shape[1] != c.C:
        raise ValueError(f"x: expected a C-contiguous float32 (1, {c.C}), got ({x.shape[0]}, {x.shape[1]})")
    if cos.shape[0] < hd // 2 or sin.shape[0] < hd // 2:
        raise ValueError(f"cos, sin: expected C-contiguous float32 ({hd // 2},), got ({cos.shape[0]},) and "
                         f"({sin.shape[0]},)")
    if pos < 0 or pos + 1 > c.smax:
        raise ValueError(f"pos: expected 0 <= pos < {c.smax} (the attention scratch), got {pos}")
    cdef lc_dlayer *Ls = <lc_dlayer *>malloc(nl * sizeof(lc_dlayer))
    if Ls == NULL:
        raise MemoryError()
    cdef bint team = True
    cdef int rc
    cdef float[:, :, ::1] kc, vc
    try:
        for i in range(nl):
            D = layers[i]
            if D.c.h != c.h or D.c.sc != c.sc or D.c.C != c.C:
                raise ValueError(f"layers[{i}]: expected layers sharing one scratch and shape")
            kc, vc = _cache(Ks[i], "Ks", i, KV, pos, hd), _cache(Vs[i], "Vs", i, KV, pos, hd)
            if kc.shape[1] != vc.shape[1]:
                raise ValueError(f"Ks[{i}], Vs[{i}]: expected equal capacities, got {kc.shape[1]} and {vc.shape[1]}")
            Ls[i] = D.d
            Ls[i].Kc, Ls[i].Vc, Ls[i].cap = &kc[0, 0, 0], &vc[0, 0, 0], kc.shape[1]
            team = team and D.teamable
        with nogil:
            rc = lc_dec_layers(Ls, nl, &c, &x[0, 0], pos, &cos[0], &sin[0], isa, nthreads, team)
    finally:
        free(Ls)
    if rc == -2:
        raise MemoryError("run_layers: the team's private rows could not be allocated")
    return rc


def rope_rows(float[:, :, ::1] out, const float[:, :, :] x, const float[:, ::1] cos, const float[:, ::1] sin,
              int64_t pos):
    """out (T, nh, hd) = x rotated (rotate-half) at positions pos.. (x's heads contiguous)."""
    cdef int64_t T = x.shape[0], nh = x.shape[1], hd = x.shape[2], half = hd // 2, t, h
    if out.shape[0] != T or out.shape[1] != nh or out.shape[2] != hd:
        raise ValueError(f"out: expected ({T}, {nh}, {hd}), got ({out.shape[0]}, {out.shape[1]}, {out.shape[2]})")
    if hd % 2 or (hd and x.strides[2] != sizeof(float)):
        raise ValueError(f"x: expected heads of an even size laid out contiguously, got hd {hd}, "
                         f"strides ({x.strides[0]}, {x.strides[1]}, {x.strides[2]})")
    if cos.shape[0] < pos + T or sin.shape[0] < pos + T or cos.shape[1] != half or sin.shape[1] != half:
        raise ValueError(f"cos, sin: expected at least ({pos + T}, {half}) tables")
    if hd == 0:
        return
    with nogil:
        for t in range(T):
            for h in range(nh):
                lc_dec_rope_head(&out[t, h, 0], &x[t, h, 0], &cos[pos + t, 0], &sin[pos + t, 0], half)
