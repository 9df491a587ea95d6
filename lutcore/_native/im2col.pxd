# The C interface of csrc/im2col/im2col.h: declarations only (the paired im2col.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before im2col.pyx).
from libc.stdint cimport int8_t, int32_t, int64_t

cdef extern from "im2col/im2col.h" nogil:
    float lc_absmax(const float *x, int64_t n, int64_t *bad, int isa, int nthreads)
    int lc_same_bytes(const void *a, const void *b, int64_t n, int nthreads)
    int64_t lc_quantize_nhwc(int8_t *q, const float *x, int64_t N, int64_t H, int64_t W, int64_t C,
                             int64_t sn, int64_t sh, int64_t sw, int64_t sc, float s, int isa, int nthreads)
    void lc_im2col_nhwc(int8_t *A, const int8_t *q, int64_t N, int64_t H, int64_t W, int64_t C,
                        int64_t G, int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh,
                        int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int nthreads)
    void lc_grouped_direct(int32_t *acc, int64_t ldacc, const int8_t *q, int64_t H, int64_t W, int64_t C,
                           int64_t G, int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw,
                           int64_t ph, int64_t pw, int64_t dh, int64_t dw, const int8_t *Wt,
                           const int32_t *mul, int exact, int64_t O, int64_t N, int isa, int nthreads)
    void lc_dequant(float *y, const int32_t *acc, int64_t ldacc, const float *scale, const float *bias,
                    int64_t N, int64_t P, int64_t O, int nthreads)
    void lc_im2col_kmajor(int8_t *AT, int64_t ld, const int8_t *q, int64_t N, int64_t C, int64_t H, int64_t W,
                          int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw, int64_t dh, int64_t dw, int nthreads)
    void lc_fold_kmajor(float *dx, const float *colT, int64_t ld, int64_t N, int64_t C, int64_t H, int64_t W,
                        int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph,
                        int64_t pw, int64_t dh, int64_t dw, int nthreads)
    int lc_chw_rows(float *rows, const float *x, int64_t N, int64_t C, int64_t P, float S, int nthreads)
    int lc_scaled_om(float *gT, int64_t ld, const float *x, const float *sw, float S, int64_t N, int64_t O,
                     int64_t P, int nthreads)
    void lc_dw_layout(float *dw, const float *sT, float s, int64_t T, int64_t C, int64_t O, int nthreads)

cdef extern from "conv2d/conv2d.h" nogil:
    ctypedef struct lc_c2d_geo:
        int64_t N, H, W, C, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, O, K
    int LC_C2D_KMAX
    int lc_conv2d_direct(float *y, const int8_t *q, const lc_c2d_geo *g, const int8_t *Wt, const int32_t *mul,
                         int exact, const float *scale, const float *bias, int isa, int nthreads)
    const char *lc_c2d_body_name(int isa, int exact)
    int lc_c2d_fast(int isa, int exact)
