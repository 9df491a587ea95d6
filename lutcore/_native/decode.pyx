# cython: language_level=3
"""Norms, decode attention and causal softmax (csrc/norm/norm.h, attn.h, softmax.h), with the
float GEMV's body name; the llama decode layer built on them is lutcore._native.models.
Python validates; these wrappers take pointers, release the GIL and call C.
"""
from cython.parallel cimport prange
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t
import numpy as np
cimport numpy as cnp
cnp.import_array()


cdef inline float* _f(object a):
    return <float *>cnp.PyArray_DATA(<cnp.ndarray>a) if a is not None else NULL

cdef extern from "attn/attn.h" nogil:
    int64_t LC_ATTN_KT(int64_t hd)
    const char *lc_attn_body_name(int isa)
    void lc_attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                        int64_t S, int64_t hd, float *kt, int isa)
    void lc_attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                        int64_t S, int64_t hd, int isa)

cdef extern from "softmax/softmax.h" nogil:
    void lc_softmax_row(float *s, int64_t S, int64_t qpos, int64_t window, int isa)
    void lc_softmax_bwd_row(float *ds, const float *att, int64_t S, int64_t qpos, float scale)

cdef extern from "norm/norm.h" nogil:
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

cdef extern from "sgemm/sgemm.h" nogil:
    const char *lc_sgemv_body_name(int isa)



def body_names(int isa):
    """The bodies this module's kernels run for `isa` (show_config)."""
    att = lc_attn_body_name(isa).decode()
    gemv = lc_sgemv_body_name(isa).decode()
    return {"norms (RMSNorm, LayerNorm)": lc_norm_body_name(isa).decode(),
            "attention (decode)": att,
            "sgemv (decode, ops.matmul M = 1)": gemv}


def attn_scores(const float[:, ::1] q, const float[:, ::1] K, int isa):
    """(R, S) = q (R, hd) @ K (S, hd)^T through csrc/attn/attn.h (tests: equal to the sgemm's bits)."""
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
    """(R, hd) = p (R, S) @ V (S, hd) through csrc/attn/attn.h (tests: equal to the sgemm's bits)."""
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
    """Rows of RMSNorm (csrc/norm/norm.h): out = (x * r) * w, r = 1/sqrt(in-order mean(x*x) + eps);
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
    """dx of RMSNorm rows, and dw += the weight's gradient (csrc/norm/norm.h; the same bits at
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
    """Rows of LayerNorm (csrc/norm/norm.h): y, and xhat and rstd for the backward."""
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
    query's position (csrc/softmax/softmax.h)."""
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
