# The C interface of csrc/mantgemm/mantgemm.h: declarations only (the paired mantgemm.pyx sees them;
# a SIMDe twin includes this file before mantgemm.pyx).
from libc.stdint cimport int64_t

cdef extern from "mantgemm/mantgemm.h" nogil:
    ctypedef struct lc_mt_job:
        float *Y
        const float *A
        const float *B
        const float *T
        int64_t M, N, K
        int fmt, route
    int LC_MT_BF16, LC_MT_FP16, LC_MT_ROUTE_MUL, LC_MT_ROUTE_TABLE
    size_t lc_mt_work_size(lc_mt_job *j, int isa, int nthreads)
    void lc_mt_run(lc_mt_job *j, char *ws, int isa, int nthreads)
    void lc_mt_round(float *y, const float *x, int64_t n, int fmt, int isa)
    const char *lc_mt_body_name(int isa)
