# cython: language_level=3
"""Thin wrappers over csrc/mathfn/ (exp, softplus, silu, sigmoid, exp2; GELU; SiLU's backward):
arguments validated by lutcore.ops.mathfn."""
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
    """The bodies ``isa`` runs: {"math functions (exp, silu, gelu, ...)"} -> name."""
    return {"math functions (exp, silu, gelu, ...)": lc_mathfn_body_name(isa).decode()}


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
