# cython: language_level=3
"""Thin wrappers over csrc/{mathfn,scan,conv}/.

Arguments are validated by lutcore.ops.scan (dtype, shape, contiguity);
optional inputs arrive as None and become NULL here.
"""
from libc.stdint cimport int64_t

cdef extern from "mathfn/mathfn.h" nogil:
    void lc_mathfn_f32(float *out, const float *x, int64_t n, int fn, int isa, int nthreads)
    const char *lc_mathfn_body_name(int isa)
    void lc_mathfn_f64(double *out, const double *x, int64_t n, int fn, int nthreads)
    void lc_gelu_f32(float *y, float *t, const float *u, int64_t n, int isa, int nthreads)
    void lc_gelu_bwd_f32(float *dx, const float *dy, const float *u, const float *t, int64_t n, int isa,
                         int nthreads)
    void lc_silu_bwd_f32(float *dx, const float *dy, const float *dy2, const float *x, int64_t n, int isa,
                         int nthreads)

cdef extern from "scan/scan.h" nogil:
    int LC_SCAN_GROUP_UNITS
    const char *lc_scan_body_name(int isa)
    int lc_scan_fwd_f32(float *y, float *ypre, float *hs, float *hlast, const float *u, const float *delta,
                        const float *A, const float *Bm, const float *Cm, const float *Dv, const float *z,
                        const float *dbias, const float *h0, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
    int lc_scan_fwd_f64(double *y, double *ypre, double *hs, double *hlast, const double *u, const double *delta,
                        const double *A, const double *Bm, const double *Cm, const double *Dv, const double *z,
                        const double *dbias, const double *h0, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
    int lc_scan_bwd_f32(float *du, float *ddelta, float *dA, float *dB, float *dC, float *dD, float *dz,
                        float *ddb, float *dh0, float *dAp, float *dBp, float *dCp, float *dDp, float *ddbp,
                        const float *dout, const float *u, const float *delta, const float *A,
                        const float *Bm, const float *Cm, const float *Dv, const float *z, const float *dbias,
                        const float *hs, const float *ypre, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
    int lc_scan_bwd_f64(double *du, double *ddelta, double *dA, double *dB, double *dC, double *dD, double *dz,
                        double *ddb, double *dh0, double *dAp, double *dBp, double *dCp, double *dDp, double *ddbp,
                        const double *dout, const double *u, const double *delta, const double *A,
                        const double *Bm, const double *Cm, const double *Dv, const double *z, const double *dbias,
                        const double *hs, const double *ypre, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)

cdef extern from "conv/conv.h" nogil:
    const char *lc_conv_body_name(int isa)
    void lc_conv_fwd_f32(float *y, const float *x, const float *wt, const float *bias, int64_t Bsz, int64_t L,
                         int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_fwd_f64(double *y, const double *x, const double *wt, const double *bias, int64_t Bsz, int64_t L,
                         int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_bwd_f32(float *dx, float *dwt, float *db, const float *dy, const float *x, const float *wt,
                         int64_t Bsz, int64_t L, int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_bwd_f64(double *dx, double *dwt, double *db, const double *dy, const double *x, const double *wt,
                         int64_t Bsz, int64_t L, int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_step_f32(float *y, float *state, const float *xt, const float *wt, const float *bias,
                          int64_t Bsz, int64_t D, int64_t K)
    void lc_conv_step_f64(double *y, double *state, const double *xt, const double *wt, const double *bias,
                          int64_t Bsz, int64_t D, int64_t K)

import numpy as np
cimport numpy as cnp
cnp.import_array()

GROUP_CHANNELS = 16 * LC_SCAN_GROUP_UNITS


cdef inline void* _p(object a):
    """Data pointer of a C-contiguous ndarray, or NULL for None."""
    if a is None:
        return NULL
    return cnp.PyArray_DATA(<cnp.ndarray>a)


def body_names(int isa):
    """The bodies ``isa`` runs: {"math functions (exp, silu, gelu, ...)", "conv1d",
    "selective scan"} -> name (the scan's: its float32 body; float64 is always generic)."""
    return {"math functions (exp, silu, gelu, ...)": lc_mathfn_body_name(isa).decode(),
            "conv1d": lc_conv_body_name(isa).decode(),
            "selective scan": lc_scan_body_name(isa).decode()}


def mathfn(cnp.ndarray out, cnp.ndarray x, int fn, int isa, int nthreads):
    cdef int64_t n = x.size
    cdef void *po = _p(out)
    cdef void *px = _p(x)
    if n == 0:
        return
    if x.dtype == np.float32:
        with nogil:
            lc_mathfn_f32(<float *>po, <const float *>px, n, fn, isa, nthreads)
    else:
        with nogil:
            lc_mathfn_f64(<double *>po, <const double *>px, n, fn, nthreads)


def scan_fwd(y, ypre, hs, hlast, u, delta, A, Bm, Cm, Dv, z, dbias, h0,
             int64_t T, bint softplus, bint zoh, int isa, int nthreads):
    cdef int64_t Bsz = u.shape[0], L = u.shape[1], D = u.shape[2], N = A.shape[1]
    cdef int fail = 0
    cdef void *p[13]
    for i, a in enumerate((y, ypre, hs, hlast, u, delta, A, Bm, Cm, Dv, z, dbias, h0)):
        p[i] = _p(a)
    if Bsz == 0 or L == 0 or D == 0:
        return
    if u.dtype == np.float32:
        with nogil:
            fail = lc_scan_fwd_f32(<float *>p[0], <float *>p[1], <float *>p[2], <float *>p[3], <const float *>p[4],
                                   <const float *>p[5], <const float *>p[6], <const float *>p[7], <const float *>p[8],
                                   <const float *>p[9], <const float *>p[10], <const float *>p[11], <const float *>p[12],
                                   Bsz, L, D, N, T, softplus, zoh, isa, nthreads)
    else:
        with nogil:
            fail = lc_scan_fwd_f64(<double *>p[0], <double *>p[1], <double *>p[2], <double *>p[3], <const double *>p[4],
                                   <const double *>p[5], <const double *>p[6], <const double *>p[7], <const double *>p[8],
                                   <const double *>p[9], <const double *>p[10], <const double *>p[11], <const double *>p[12],
                                   Bsz, L, D, N, T, softplus, zoh, isa, nthreads)
    if fail:
        raise MemoryError("selective_scan: out of memory for the per-thread scan buffers")


def scan_bwd(du, ddelta, dA, dB, dC, dD, dz, ddb, dh0, dAp, dBp, dCp, dDp, ddbp,
             dout, u, delta, A, Bm, Cm, Dv, z, dbias, hs, ypre,
             int64_t T, bint softplus, bint zoh, int isa, int nthreads):
    cdef int64_t Bsz = u.shape[0], L = u.shape[1], D = u.shape[2], N = A.shape[1]
    cdef int fail = 0
    cdef void *p[25]
    for i, a in enumerate((du, ddelta, dA, dB, dC, dD, dz, ddb, dh0, dAp, dBp, dCp, dDp, ddbp,
                           dout, u, delta, A, Bm, Cm, Dv, z, dbias, hs, ypre)):
        p[i] = _p(a)
    if Bsz == 0 or L == 0 or D == 0:
        return
    if u.dtype == np.float32:
        with nogil:
            fail = lc_scan_bwd_f32(<float *>p[0], <float *>p[1], <float *>p[2], <float *>p[3], <float *>p[4],
                                   <float *>p[5], <float *>p[6], <float *>p[7], <float *>p[8], <float *>p[9],
                                   <float *>p[10], <float *>p[11], <float *>p[12], <float *>p[13],
                                   <const float *>p[14], <const float *>p[15], <const float *>p[16],
                                   <const float *>p[17], <const float *>p[18], <const float *>p[19],
                                   <const float *>p[20], <const float *>p[21], <const float *>p[22],
                                   <const float *>p[23], <const float *>p[24], Bsz, L, D, N, T, softplus, zoh,
                                   isa, nthreads)
    else:
        with nogil:
            fail = lc_scan_bwd_f64(<double *>p[0], <double *>p[1], <double *>p[2], <double *>p[3], <double *>p[4],
                                   <double *>p[5], <double *>p[6], <double *>p[7], <double *>p[8], <double *>p[9],
                                   <double *>p[10], <double *>p[11], <double *>p[12], <double *>p[13],
                                   <const double *>p[14], <const double *>p[15], <const double *>p[16],
                                   <const double *>p[17], <const double *>p[18], <const double *>p[19],
                                   <const double *>p[20], <const double *>p[21], <const double *>p[22],
                                   <const double *>p[23], <const double *>p[24], Bsz, L, D, N, T, softplus, zoh,
                                   isa, nthreads)
    if fail:
        raise MemoryError("selective_scan_backward: out of memory for the per-thread scan buffers")


def conv_fwd(y, x, wt, bias, int isa, int nthreads):
    cdef int64_t Bsz = x.shape[0], L = x.shape[1], D = x.shape[2], K = wt.shape[0]
    cdef void *py = _p(y)
    cdef void *px = _p(x)
    cdef void *pw = _p(wt)
    cdef void *pb = _p(bias)
    if Bsz == 0 or L == 0 or D == 0:
        return
    if x.dtype == np.float32:
        with nogil:
            lc_conv_fwd_f32(<float *>py, <const float *>px, <const float *>pw, <const float *>pb, Bsz, L, D, K, isa, nthreads)
    else:
        with nogil:
            lc_conv_fwd_f64(<double *>py, <const double *>px, <const double *>pw, <const double *>pb, Bsz, L, D, K, isa, nthreads)


def conv_bwd(dx, dwt, db, dy, x, wt, int isa, int nthreads):
    cdef int64_t Bsz = x.shape[0], L = x.shape[1], D = x.shape[2], K = wt.shape[0]
    cdef void *p0 = _p(dx)
    cdef void *p1 = _p(dwt)
    cdef void *p2 = _p(db)
    cdef void *p3 = _p(dy)
    cdef void *p4 = _p(x)
    cdef void *p5 = _p(wt)
    if D == 0:
        return
    if x.dtype == np.float32:
        with nogil:
            lc_conv_bwd_f32(<float *>p0, <float *>p1, <float *>p2, <const float *>p3, <const float *>p4, <const float *>p5,
                            Bsz, L, D, K, isa, nthreads)
    else:
        with nogil:
            lc_conv_bwd_f64(<double *>p0, <double *>p1, <double *>p2, <const double *>p3, <const double *>p4, <const double *>p5,
                            Bsz, L, D, K, isa, nthreads)


def conv_step(y, state, xt, wt, bias):
    cdef int64_t Bsz = xt.shape[0], D = xt.shape[1], K = wt.shape[0]
    cdef void *p0 = _p(y)
    cdef void *p1 = _p(state)
    cdef void *p2 = _p(xt)
    cdef void *p3 = _p(wt)
    cdef void *p4 = _p(bias)
    if Bsz == 0 or D == 0:
        return
    if xt.dtype == np.float32:
        with nogil:
            lc_conv_step_f32(<float *>p0, <float *>p1, <const float *>p2, <const float *>p3, <const float *>p4, Bsz, D, K)
    else:
        with nogil:
            lc_conv_step_f64(<double *>p0, <double *>p1, <const double *>p2, <const double *>p3, <const double *>p4, Bsz, D, K)


def gelu(cnp.ndarray y, cnp.ndarray t, cnp.ndarray u, int isa, int nthreads):
    """float32 C-contiguous, same size (checked by the caller)."""
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef float *pt = <float *>cnp.PyArray_DATA(t)
    cdef const float *pu = <const float *>cnp.PyArray_DATA(u)
    cdef int64_t n = u.size
    with nogil:
        lc_gelu_f32(py, pt, pu, n, isa, nthreads)


def silu_bwd(cnp.ndarray dx, cnp.ndarray dy, object dy2, cnp.ndarray x, int isa, int nthreads):
    """dx = (dy + dy2) * silu'(x), float32, C-contiguous, same shapes (the caller checks)."""
    cdef float *pdx = <float *>cnp.PyArray_DATA(dx)
    cdef const float *pdy = <const float *>cnp.PyArray_DATA(dy)
    cdef const float *pdy2 = <const float *>cnp.PyArray_DATA(<cnp.ndarray>dy2) if dy2 is not None else NULL
    cdef const float *px = <const float *>cnp.PyArray_DATA(x)
    cdef int64_t n = x.size
    with nogil:
        lc_silu_bwd_f32(pdx, pdy, pdy2, px, n, isa, nthreads)


def gelu_bwd(cnp.ndarray dx, cnp.ndarray dy, cnp.ndarray u, cnp.ndarray t, int isa, int nthreads):
    cdef float *pdx = <float *>cnp.PyArray_DATA(dx)
    cdef const float *pdy = <const float *>cnp.PyArray_DATA(dy)
    cdef const float *pu = <const float *>cnp.PyArray_DATA(u)
    cdef const float *pt = <const float *>cnp.PyArray_DATA(t)
    cdef int64_t n = u.size
    with nogil:
        lc_gelu_bwd_f32(pdx, pdy, pu, pt, n, isa, nthreads)
