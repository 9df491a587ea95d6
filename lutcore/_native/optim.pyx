# cython: language_level=3
"""Thin wrappers over include/lutcore/optim.h (validated by lutcore.train.optim)."""
from libc.stdint cimport int64_t

cdef extern from "lutcore/optim.h" nogil:
    ctypedef struct lc_adamw_hp:
        float b1, b2, c1, c2, eps, lr, decay, max_delta, bc1, bc2, gscale
    void lc_adamw(float *p, const float *g, float *m, float *v, int64_t n, const lc_adamw_hp *h,
                  int isa, int nthreads)
    double lc_sumsq(const float *x, int64_t n, double *partials, int isa, int nthreads)
    int LC_SS_CHUNK

SS_CHUNK = LC_SS_CHUNK


def adamw(float[::1] p, const float[::1] g, float[::1] m, float[::1] v, double b1, double b2, double eps,
          double lr, double wd, double max_delta, double bc1, double bc2, double gscale, int isa, int nthreads):
    """Hyperparameters arrive in double; 1 - beta and 1 - lr*wd are formed in double
    before rounding to float32 (so beta = 0.99999999 keeps 1 - beta = 1e-8)."""
    cdef lc_adamw_hp h
    cdef int64_t n = p.shape[0]
    h.b1 = <float>b1
    h.b2 = <float>b2
    h.c1 = <float>(1.0 - b1)
    h.c2 = <float>(1.0 - b2)
    h.eps = <float>eps
    h.lr = <float>lr
    h.decay = <float>(1.0 - lr * wd)
    h.max_delta = <float>max_delta
    h.bc1 = <float>bc1
    h.bc2 = <float>bc2
    h.gscale = <float>gscale
    if n == 0:
        return
    with nogil:
        lc_adamw(&p[0], &g[0], &m[0], &v[0], n, &h, isa, nthreads)


def sumsq(const float[::1] x, double[::1] partials, int isa, int nthreads):
    cdef int64_t n = x.shape[0]
    cdef double s = 0
    if n == 0:
        return 0.0
    with nogil:
        s = lc_sumsq(&x[0], n, &partials[0], isa, nthreads)
    return s
