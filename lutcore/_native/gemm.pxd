# The C interface of csrc/gemm/gemm.h and csrc/q8/q8.h: declarations only (the paired gemm.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before gemm.pyx).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t

cdef extern from "gemm/gemm.h" nogil:
    void lc_pack_a16(int16_t *Ap, const int8_t *A, int64_t M, int64_t Mp, int64_t K, int64_t lda,
                     int64_t bk, int64_t bkp, int64_t Kp, int nthreads)
    void lc_pack_b(int8_t *Bp, const int8_t *B, int64_t K, int64_t N, int64_t ldb, int64_t bk,
                   int64_t bkp, int64_t Kp, int nthreads)
    void lc_gemm_exact_packed(int32_t *C, int64_t ldc, const int16_t *Ap, const int8_t *Bp, const uint8_t *Bf,
                              int64_t M, int64_t N, int64_t Kp, int isa, int nthreads)
    void lc_gemm_exact(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *Bp, const uint8_t *Bf,
                       int64_t M, int64_t N, int64_t K, int64_t Kp, int16_t *Ap, int isa, int nthreads)
    void lc_gemm_exact_rows(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B, int64_t ldb,
                            int64_t M, int64_t N, int64_t K, int8_t *Bp, int16_t *Ap, int isa, int nthreads)
    int lc_gemm_exact_a8(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *Bp, const uint8_t *Bf,
                         int64_t M, int64_t N, int64_t K, int64_t Kp, int isa, int nthreads)
    size_t lc_gemm_exact_bform_size(int64_t Kp, int64_t N, int isa)
    int lc_gemm_exact_bform(uint8_t *Bf, const int8_t *Bp, int64_t Kp, int64_t N, int isa, int nthreads)
    void lc_qmatmul_exact_packed(float *Y, int64_t ldy, const int16_t *Ap, const float *sa,
                                 const int8_t *Bp, const float *sbp, int64_t M, int64_t N,
                                 int64_t nblk, int64_t bkp, int isa, int nthreads)
    void lc_gemm_table(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                       int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t K,
                       int32_t *work, int isa, int nthreads)
    void lc_qmatmul_table(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                          const float *sb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t nblk,
                          int64_t bk, int32_t *work, int isa, int nthreads)
    void lc_gemm_table_auto(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *B,
                            int64_t ldb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N, int64_t K,
                            int32_t *work, int isa, int nthreads)
    void lc_qmatmul_table_auto(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                               const float *sb, const int32_t *T, const int32_t *Tt, int64_t M, int64_t N,
                               int64_t nblk, int64_t bk, int32_t *work, int isa, int nthreads)
    size_t lc_table_pack_size(int64_t K, int64_t N, int isa)
    int lc_table_pack_b(uint8_t *Bq, const int8_t *B, int64_t K, int64_t N, int64_t ldb, int isa, int nthreads)
    void lc_table_form(int16_t *T16, const int32_t *T, int isa)
    int lc_gemm_table_packed(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const uint8_t *Bq,
                             const int16_t *T16, int64_t M, int64_t N, int64_t K, int isa, int nthreads)
    int LC_TABLE_PACK_HDR
    int lc_table_transposed(int64_t M, int64_t N)
    size_t lc_table_kernel_work(int64_t M, int64_t N, int nthreads, int with_float)
    size_t lc_table_auto_work(int64_t M, int64_t N, int64_t K, int64_t nblk, int nthreads, int with_float)
    int LC_MR, LC_NR, LC_TABLE_NB, LC_TABLE_DIRECT_M
    const char *lc_gemm_body_name(int isa, int which)

# the Q8 block quantizer (csrc/q8/q8.h: gemm.h includes it)
cdef extern from "q8/q8.h" nogil:
    int64_t lc_quantize_rows(int8_t *q, float *s, const float *x, int64_t R, int64_t K, int64_t ldx,
                             int64_t bk, int64_t nblk, int isa, int nthreads)
    int64_t lc_quantize_cols(int8_t *q, float *s, const float *x, int64_t K, int64_t N, int64_t ldx,
                             int64_t bk, int64_t nblk, int isa, int nthreads)
