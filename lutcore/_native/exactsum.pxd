# The C interface of csrc/exactsum/exactsum.h: declarations only (the paired exactsum.pyx sees them).
from libc.stdint cimport int64_t, uint8_t

cdef extern from "exactsum/exactsum.h" nogil:
    int LC_XSUM_MAXL
    void lc_xsum_range(const float *x, int64_t n, int *qmin, int *qmax, int *nonfinite, int nthreads)
    void lc_xsum_add(int64_t *L, int64_t nl, int64_t lo, const float *x, uint8_t *flags, int64_t n, int nthreads)
    void lc_xsum_norm(int64_t *L, int64_t nl, int64_t n, int nthreads)
    void lc_xsum_round(float *out, const int64_t *L, int64_t nl, int64_t lo, int64_t n, int nthreads)
