# The C interface of csrc/elementwise/elementwise.h: declarations only (the paired elementwise.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before elementwise.pyx).
from libc.stdint cimport int8_t, uint16_t, int32_t, int64_t

cdef extern from "elementwise/elementwise.h" nogil:
    void lc_requant(int8_t *out, const int32_t *acc, int64_t n, int shift, const int8_t *lut,
                    int clamp_lo, int clamp_hi, int is_clamp, int isa, int nthreads)
    void lc_relu8(int8_t *out, const int8_t *x, int64_t n, const int8_t *lut, int isa, int nthreads)
    void lc_fp16_encode(uint16_t *out, const float *x, int64_t n, int mode, int isa, int nthreads)
    void lc_fp16_decode(float *out, const uint16_t *h, int64_t n, int isa, int nthreads)
    void lc_fp16_round(float *out, const float *x, int64_t n, int mode, int isa, int nthreads)
    const char *lc_ew_body_name(int isa, int which)
    void lc_scatter_add_rows(float *grad, int64_t C, const int64_t *ids, int64_t n, const float *dy, int nthreads)
