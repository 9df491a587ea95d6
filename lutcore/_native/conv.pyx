# cython: language_level=3
"""Thin wrappers over csrc/conv/ (causal depthwise conv1d: forward, backward, decode step);
arguments validated by lutcore.ops.scan."""
from libc.stdint cimport int64_t
import numpy as np
cimport numpy as cnp
cnp.import_array()


cdef inline void* _p(object a):
    """Data pointer of a C-contiguous ndarray, or NULL for None."""
    if a is None:
        return NULL
    return cnp.PyArray_DATA(<cnp.ndarray>a)


def body_names(int isa):
    """The bodies ``isa`` runs: {"conv1d"} -> name."""
    return {"conv1d": lc_conv_body_name(isa).decode()}


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
