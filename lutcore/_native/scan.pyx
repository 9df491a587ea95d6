# cython: language_level=3
"""Thin wrappers over csrc/scan/ (the selective scan, forward and backward).

Arguments are validated by lutcore.ops.scan (dtype, shape, contiguity);
optional inputs arrive as None and become NULL here.
"""
from libc.stdint cimport int64_t
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
    """The bodies ``isa`` runs: {"selective scan"} -> name (its float32 body; float64 is always generic)."""
    return {"selective scan": lc_scan_body_name(isa).decode()}


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
