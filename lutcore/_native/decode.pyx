# cython: language_level=3
"""One-token decode of llama-family layers in one native call (csrc/models/decode.h).

Design: ``lutcore.pipeline.stage`` builds a ``Linear`` per weight and a
``DecodeLayer`` per layer (kernel-ready weights, scratch rows shared by the
stage's layers) once, then calls ``run_layers`` once per token: every layer of
the stage runs inside one native call (one thread team).  Every step performs
the same float32 operations, in the same order, as the stage's numpy path
(``Stage._attn_mlp`` with T = 1) and calls the same kernels, so cached decoding
keeps giving the bits of a full recompute.  Python validates; the C side only
takes pointers, releases the GIL and computes.
"""
from cython.parallel cimport prange
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t
from libc.stdlib cimport malloc, free
import numpy as np
cimport numpy as cnp
cnp.import_array()

cdef extern from "gemm/gemm.h" nogil:
    int LC_MR

cdef extern from "lutcore/attn.h" nogil:
    int64_t LC_ATTN_KT(int64_t hd)
    const char *lc_attn_body_name(int isa)
    void lc_attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                        int64_t S, int64_t hd, float *kt, int isa)
    void lc_attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                        int64_t S, int64_t hd, int isa)

cdef extern from "lutcore/softmax.h" nogil:
    void lc_softmax_row(float *s, int64_t S, int64_t qpos, int64_t window, int isa)
    void lc_softmax_bwd_row(float *ds, const float *att, int64_t S, int64_t qpos, float scale)

cdef extern from "lutcore/norm.h" nogil:
    void lc_rmsnorm_rows(float *y, float *rstd, const float *x, const float *w, int64_t R, int64_t C, float eps,
                         int isa, int nthreads)
    void lc_rmsnorm_rows_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                             const float *rstd, int64_t R, int64_t C, float *work, int isa, int nthreads)
    void lc_layernorm_rows(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,
                           int64_t R, int64_t C, float eps, int isa, int nthreads)
    void lc_layernorm_rows_bwd(float *dx, float *dw, float *db, const float *dy, const float *xhat,
                               const float *w, const float *rstd, int64_t R, int64_t C, float *work, int isa,
                               int nthreads)
    const char *lc_norm_body_name(int isa)
    int LC_NORM_ROWS

cdef extern from "lutcore/sgemm.h" nogil:
    const char *lc_sgemv_body_name(int isa)

cdef extern from "models/decode.h" nogil:
    int LC_DLIN_FLOAT, LC_DLIN_EXACT, LC_DLIN_TABLE
    ctypedef struct lc_dlin:
        int kind
        int64_t K, N, nblk, bk, bkp
        const float *panels
        const int8_t *bp
        const float *sbp
        int16_t *ap
        int8_t *qa
        float *sa
        const int8_t *qb
        const float *sb
        const int32_t *T32
        int32_t *twork
        const float *bias
    ctypedef struct lc_dlayer:
        lc_dlin qkv, o, up, down
        const float *n1w
        const float *n2w
        float *Kc
        float *Vc
        int64_t cap, window
        float scale
    ctypedef struct lc_dctx:
        int64_t C, H, KV, hd, inter, smax
        float eps
        float *h
        float *qkvb
        float *rq
        float *att
        float *ob
        float *upb
        float *sc
        float *kt
    void lc_dec_rope_head(float *dst, const float *src, const float *cs, const float *sn, int64_t half)
    int lc_dec_layers(const lc_dlayer *Ls, int64_t nl, lc_dctx *c, float *x, int64_t pos, const float *cs,
                      const float *sn, int isa, int nt, int team)

MR = LC_MR


def kt_floats(int64_t hd):
    """Floats of the scores' transposed-key scratch per KV head (lutcore/attn.h LC_ATTN_KT)."""
    return LC_ATTN_KT(hd)


def body_names(int isa):
    """The bodies this module's kernels run for `isa` (show_config)."""
    att = lc_attn_body_name(isa).decode()
    gemv = lc_sgemv_body_name(isa).decode()
    return {"norms (RMSNorm, LayerNorm)": lc_norm_body_name(isa).decode(),
            "attention (decode)": att,
            "sgemv (decode, ops.matmul M = 1)": gemv,
            "decode layer": f"attention {att}, float GEMV {gemv}, RMSNorm generic (one row: one in-order "
                            f"chain); Q8 linears, softmax, SiLU: the gemm and math-function bodies"}


cdef inline float* _f(object a):
    return <float *>cnp.PyArray_DATA(<cnp.ndarray>a) if a is not None else NULL


cdef inline void* _p(object a):
    return cnp.PyArray_DATA(<cnp.ndarray>a) if a is not None else NULL


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
        self.d.bias = _f(g("bias"))
        self.d.panels = _f(g("panels"))
        self.d.bp, self.d.sbp, self.d.ap = <const int8_t *>_p(g("bp")), _f(g("sbp")), <int16_t *>_p(g("ap"))
        self.d.qa, self.d.sa = <int8_t *>_p(g("qa")), _f(g("sa"))
        self.d.qb, self.d.sb = <const int8_t *>_p(g("qb")), _f(g("sb"))
        self.d.T32, self.d.twork = <const int32_t *>_p(g("T32")), <int32_t *>_p(g("twork"))


cdef class DecodeLayer:
    """One llama-family layer (RMSNorm, RoPE, GQA attention, SwiGLU with SiLU) for one token."""
    cdef lc_dlayer d
    cdef lc_dctx c
    cdef object keep
    cdef readonly bint teamable

    def __init__(self, Linear qkv, Linear o, Linear up, Linear down, n1w, n2w, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, int64_t inter, double eps, double scale, int64_t window, dict scratch):
        """scratch: h (C), qkv (Q + 2 KVd), rq (Q + KVd), att (Q), o (C), up (2 I), scores (H * smax),
        kt (KV * kt_floats(hd): each KV head's transposed key block, lutcore/attn.h); smax: the
        longest context.  Layers of a stage share one scratch."""
        self.keep = (qkv, o, up, down, n1w, n2w, dict(scratch))
        self.d.qkv, self.d.o, self.d.up, self.d.down = qkv.d, o.d, up.d, down.d
        self.d.n1w, self.d.n2w = _f(n1w), _f(n2w)
        self.d.scale, self.d.window = <float>scale, window
        self.c.C, self.c.H, self.c.KV, self.c.hd, self.c.inter = n1w.shape[0], heads, kv_heads, head_dim, inter
        self.c.eps = <float>eps
        self.c.h, self.c.qkvb, self.c.rq = _f(scratch["h"]), _f(scratch["qkv"]), _f(scratch["rq"])
        self.c.att, self.c.ob, self.c.upb = _f(scratch["att"]), _f(scratch["o"]), _f(scratch["up"])
        self.c.sc, self.c.kt = _f(scratch["scores"]), _f(scratch["kt"])
        self.c.smax = scratch["scores"].shape[0] // heads
        self.teamable = all(L.d.kind != LC_DLIN_TABLE for L in (qkv, o, up, down))

    @property
    def capacity(self):
        return self.c.smax


def run_layers(list layers, cnp.ndarray x, list Ks, list Vs, int64_t pos, cnp.ndarray cos, cnp.ndarray sin,
               int isa, int nthreads):
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
    if x.dtype != np.float32 or not x.flags.c_contiguous or x.ndim != 2 or x.shape[0] != 1 or x.shape[1] != c.C:
        raise ValueError(f"x: expected a C-contiguous float32 (1, {c.C}), got {x.dtype} {np.shape(x)}")
    for a, name in ((cos, "cos"), (sin, "sin")):
        if a.dtype != np.float32 or not a.flags.c_contiguous or a.ndim != 1 or a.shape[0] < hd // 2:
            raise ValueError(f"{name}: expected a C-contiguous float32 ({hd // 2},), got {a.dtype} {np.shape(a)}")
    if pos < 0 or pos + 1 > c.smax:
        raise ValueError(f"pos: expected 0 <= pos < {c.smax} (the attention scratch), got {pos}")
    cdef lc_dlayer *Ls = <lc_dlayer *>malloc(nl * sizeof(lc_dlayer))
    if Ls == NULL:
        raise MemoryError()
    cdef bint team = True
    cdef int rc
    cdef float *px = _f(x)
    cdef const float *pc = _f(cos)
    cdef const float *ps = _f(sin)
    try:
        for i in range(nl):
            D = layers[i]
            if D.c.h != c.h or D.c.sc != c.sc or D.c.C != c.C:
                raise ValueError(f"layers[{i}]: expected layers sharing one scratch and shape")
            for a, name in ((Ks[i], "Ks"), (Vs[i], "Vs")):
                if not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.c_contiguous \
                        or a.ndim != 3 or a.shape[0] != KV or a.shape[2] != hd or a.shape[1] <= pos:
                    raise ValueError(f"{name}[{i}]: expected a C-contiguous float32 ({KV}, > {pos}, {hd}), "
                                     f"got {getattr(a, 'dtype', type(a).__name__)} {tuple(np.shape(a))}")
            if Ks[i].shape[1] != Vs[i].shape[1]:
                raise ValueError(f"Ks[{i}], Vs[{i}]: expected equal capacities, got {Ks[i].shape[1]} and {Vs[i].shape[1]}")
            Ls[i] = D.d
            Ls[i].Kc, Ls[i].Vc, Ls[i].cap = _f(Ks[i]), _f(Vs[i]), Ks[i].shape[1]
            team = team and D.teamable
        with nogil:
            rc = lc_dec_layers(Ls, nl, &c, px, pos, pc, ps, isa, nthreads, team)
    finally:
        free(Ls)
    if rc == -2:
        raise MemoryError("run_layers: the team's private rows could not be allocated")
    return rc


def attn_scores(const float[:, ::1] q, const float[:, ::1] K, int isa):
    """(R, S) = q (R, hd) @ K (S, hd)^T through lutcore/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = q.shape[0], hd = q.shape[1], S = K.shape[0]
    if K.shape[1] != hd:
        raise ValueError(f"K: expected (S, {hd}), got ({K.shape[0]}, {K.shape[1]})")
    out = cnp.PyArray_EMPTY(2, [R, S], cnp.NPY_FLOAT32, 0)
    kt = cnp.PyArray_EMPTY(1, [LC_ATTN_KT(hd)], cnp.NPY_FLOAT32, 0)
    cdef float *po = _f(out)
    cdef float *pk = _f(kt)
    if R and S:
        with nogil:
            lc_attn_scores(po, S, &q[0, 0], hd, R, &K[0, 0], S, hd, pk, isa)
    return out


def attn_values(const float[:, ::1] p, const float[:, ::1] V, int isa):
    """(R, hd) = p (R, S) @ V (S, hd) through lutcore/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = p.shape[0], S = p.shape[1], hd = V.shape[1]
    if V.shape[0] != S:
        raise ValueError(f"V: expected ({S}, hd), got ({V.shape[0]}, {V.shape[1]})")
    out = cnp.PyArray_EMPTY(2, [R, hd], cnp.NPY_FLOAT32, 0)
    cdef float *po = _f(out)
    if R and hd:
        with nogil:
            lc_attn_values(po, hd, &p[0, 0], S, R, &V[0, 0], S, hd, isa)
    return out


def rmsnorm_rows(float[:, ::1] out, const float[:, ::1] x, const float[::1] w, double eps, rstd, int isa,
                 int nthreads):
    """Rows of RMSNorm (lutcore/norm.h): out = (x * r) * w, r = 1/sqrt(in-order mean(x*x) + eps);
    r per row into rstd (R,) float32 when given (else None); the body for `isa`."""
    cdef int64_t R = x.shape[0], C = x.shape[1]
    cdef float[::1] rs
    cdef float *pr = NULL
    if out.shape[0] != R or out.shape[1] != C or w.shape[0] != C:
        raise ValueError(f"out, w: expected ({R}, {C}) and ({C},), got ({out.shape[0]}, {out.shape[1]}) "
                         f"and ({w.shape[0]},)")
    if rstd is not None:
        rs = rstd
        if rs.shape[0] != R:
            raise ValueError(f"rstd: expected ({R},), got ({rs.shape[0]},)")
        if R:
            pr = &rs[0]
    if R and C:
        with nogil:
            lc_rmsnorm_rows(&out[0, 0], pr, &x[0, 0], &w[0], R, C, <float>eps, isa, nthreads)


def rmsnorm_rows_backward(float[:, ::1] dx, float[::1] dw, const float[:, ::1] dy, const float[:, ::1] x,
                          const float[::1] w, const float[::1] rstd, int isa, int nthreads):
    """dx of RMSNorm rows, and dw += the weight's gradient (lutcore/norm.h; the same bits at
    any thread count)."""
    cdef int64_t R = x.shape[0], C = x.shape[1]
    if dx.shape[0] != R or dx.shape[1] != C or dy.shape[0] != R or dy.shape[1] != C:
        raise ValueError(f"dx, dy: expected ({R}, {C}), got ({dx.shape[0]}, {dx.shape[1]}) and "
                         f"({dy.shape[0]}, {dy.shape[1]})")
    if w.shape[0] != C or dw.shape[0] != C or rstd.shape[0] != R:
        raise ValueError(f"w, dw, rstd: expected ({C},), ({C},), ({R},), got ({w.shape[0]},), ({dw.shape[0]},), "
                         f"({rstd.shape[0]},)")
    if R == 0 or C == 0:
        return
    cdef float[::1] work = np.empty(((R + LC_NORM_ROWS - 1) // LC_NORM_ROWS) * C, np.float32)
    with nogil:
        lc_rmsnorm_rows_bwd(&dx[0, 0], &dw[0], &dy[0, 0], &x[0, 0], &w[0], &rstd[0], R, C, &work[0], isa, nthreads)


def layernorm_rows(float[:, ::1] y, float[:, ::1] xhat, float[::1] rstd, const float[:, ::1] x,
                   const float[::1] w, const float[::1] b, double eps, int isa, int nthreads):
    """Rows of LayerNorm (lutcore/norm.h): y, and xhat and rstd for the backward."""
    cdef int64_t R = x.shape[0], C = x.shape[1]
    if y.shape[0] != R or y.shape[1] != C or xhat.shape[0] != R or xhat.shape[1] != C or rstd.shape[0] != R:
        raise ValueError(f"y, xhat, rstd: expected ({R}, {C}), ({R}, {C}), ({R},), got ({y.shape[0]}, {y.shape[1]}), "
                         f"({xhat.shape[0]}, {xhat.shape[1]}), ({rstd.shape[0]},)")
    if w.shape[0] != C or b.shape[0] != C:
        raise ValueError(f"w, b: expected ({C},), got ({w.shape[0]},) and ({b.shape[0]},)")
    if R and C:
        with nogil:
            lc_layernorm_rows(&y[0, 0], &xhat[0, 0], &rstd[0], &x[0, 0], &w[0], &b[0], R, C, <float>eps, isa, nthreads)


def layernorm_rows_backward(float[:, ::1] dx, float[::1] dw, float[::1] db, const float[:, ::1] dy,
                            const float[:, ::1] xhat, const float[::1] w, const float[::1] rstd, int isa,
                            int nthreads):
    """dx of LayerNorm rows; dw, db += their gradients (the same bits at any thread count)."""
    cdef int64_t R = xhat.shape[0], C = xhat.shape[1]
    if dx.shape[0] != R or dx.shape[1] != C or dy.shape[0] != R or dy.shape[1] != C:
        raise ValueError(f"dx, dy: expected ({R}, {C}), got ({dx.shape[0]}, {dx.shape[1]}) and "
                         f"({dy.shape[0]}, {dy.shape[1]})")
    if w.shape[0] != C or dw.shape[0] != C or db.shape[0] != C or rstd.shape[0] != R:
        raise ValueError(f"w, dw, db, rstd: expected ({C},) x3 and ({R},), got ({w.shape[0]},), ({dw.shape[0]},), "
                         f"({db.shape[0]},), ({rstd.shape[0]},)")
    if R == 0 or C == 0:
        return
    cdef float[::1] work = np.empty(((R + LC_NORM_ROWS - 1) // LC_NORM_ROWS) * 2 * C, np.float32)
    with nogil:
        lc_layernorm_rows_bwd(&dx[0, 0], &dw[0], &db[0], &dy[0, 0], &xhat[0, 0], &w[0], &rstd[0], R, C, &work[0],
                              isa, nthreads)


def softmax_causal(float[:, :, ::1] s, int64_t T, int64_t pos, int64_t window, int isa, int nthreads):
    """In place on scores s (KV, g*T, S), rows (g, t): the query at row r sits at position
    pos + r % T; causal (and sliding-window) masking, then the stage's softmax steps."""
    cdef int64_t KV = s.shape[0], R = s.shape[1], S = s.shape[2], i
    if T <= 0 or R % T:
        raise ValueError(f"T: expected a positive divisor of the {R} score rows, got {T}")
    if KV == 0 or R == 0 or S == 0:
        return
    for i in prange(KV * R, nogil=True, num_threads=max(1, nthreads), schedule="static"):
        lc_softmax_row(&s[i // R, i % R, 0], S, pos + (i % R) % T, window, isa)


def softmax_causal_backward(float[:, :, ::1] ds, const float[:, :, ::1] att, int64_t T, int64_t pos, double scale,
                            int nthreads):
    """In place on ds = dL/d(att) (KV, g*T, S), rows laid out as in softmax_causal, given its
    output att: the scores' gradient ((ds - <ds, att>_row) * att) * scale, zero past each
    query's position (lutcore/softmax.h)."""
    cdef int64_t KV = ds.shape[0], R = ds.shape[1], S = ds.shape[2], i
    if att.shape[0] != KV or att.shape[1] != R or att.shape[2] != S:
        raise ValueError(f"att: expected the shape of ds ({KV}, {R}, {S}), got ({att.shape[0]}, {att.shape[1]}, "
                         f"{att.shape[2]})")
    if T <= 0 or R % T:
        raise ValueError(f"T: expected a positive divisor of the {R} rows, got {T}")
    if KV == 0 or R == 0 or S == 0:
        return
    for i in prange(KV * R, nogil=True, num_threads=max(1, nthreads), schedule="static"):
        lc_softmax_bwd_row(&ds[i // R, i % R, 0], &att[i // R, i % R, 0], S, pos + (i % R) % T, <float>scale)


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
