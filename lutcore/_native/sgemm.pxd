# The C interface of csrc/sgemm/sgemm.h: declarations only (the paired sgemm.pyx sees them;
# a SIMDe twin includes this file before sgemm.pyx).
from libc.stdint cimport int64_t

cdef extern from "sgemm/sgemm.h" nogil:
    void lc_sgemm_tri(float *C, int64_t scb, int64_t ldc, const float *A, int64_t sab, int64_t sar, int64_t sac,
                      const float *B, int64_t sbb, int64_t sbr, int64_t sbc, int64_t nbatch, int64_t M, int64_t N,
                      int64_t K, int accumulate, int tri, float *work, const float *Bpre, int isa, int nthreads)
    const char *lc_sgemm_body_name(int isa)
    const char *lc_sgemv_body_name(int isa)
    size_t lc_sgemm_work(int64_t M, int64_t N, int64_t K)
    void lc_sgemm_pack_b(float *Bp, const float *B, int64_t K, int64_t N, int64_t sbr, int64_t sbc)
    int LC_SNR
    int LC_TRI_NONE, LC_TRI_A_LOWER, LC_TRI_A_UPPER, LC_TRI_C_LOWER
