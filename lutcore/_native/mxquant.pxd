# The C interface of csrc/mxquant/mxquant.h: declarations only (the paired mxquant.pyx sees them;
# a SIMDe twin includes this file before mxquant.pyx).
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t

cdef extern from "mxquant/mxquant.h" nogil:
    ctypedef struct lc_mxq_fmt:
        int32_t thresh, shift, off, c0, max_mag, emax, smag, twos
    ctypedef struct lc_mxq_job:
        const uint32_t *x
        uint8_t *codes
        uint8_t *scales
        int64_t R, L, N, bk, nb, Lp
        lc_mxq_fmt f
    int lc_mxq_format(lc_mxq_fmt *f, int kind, int bits, int mbits, int bias, int emax, int max_code)
    void lc_mxq_rows(const lc_mxq_job *j, int isa, int nthreads)
    void lc_mxq_cols(const lc_mxq_job *j, int isa, int nthreads)
    const char *lc_mxq_body_name(int isa)
