# The C interface of csrc/mxgemm/mxgemm.h: declarations only (the paired mxgemm.pyx sees them;
# a SIMDe twin includes this file before mxgemm.pyx).
from libc.stdint cimport uint8_t, uint32_t, int64_t

cdef extern from "mxgemm/mxgemm.h" nogil:
    ctypedef struct lc_mx_products:
        const uint32_t *tab
        const uint32_t *tt
        const uint8_t *rep
        const double *afac
        const double *va
        const double *vb
        const double *scale
        int ba, bb, expand, route, nparts, rep_mask, R16
        double split
    ctypedef struct lc_mx_job:
        float *Y
        const uint8_t *A
        const uint8_t *SA
        const uint8_t *B
        const uint8_t *SB
        int64_t M, N, K, Kp, bk, nblk
        const lc_mx_products *P
        int mbits, tz
        int64_t promote
    int LC_MX_ROUTE_FMA, LC_MX_ROUTE_TABLE, LC_MX_F32, LC_MX_HI32
    size_t lc_mx_work_size(lc_mx_job *j, int narrow, int isa, int nthreads)
    void lc_mx_run(lc_mx_job *j, int narrow, char *ws, int isa, int nthreads)
    const char *lc_mx_name(int isa, int which)
