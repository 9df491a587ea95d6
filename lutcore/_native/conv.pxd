# The C interface of csrc/conv/conv.h: declarations only (the paired conv.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before conv.pyx).
from libc.stdint cimport int64_t

cdef extern from "conv/conv.h" nogil:
    const char *lc_conv_body_name(int isa)
    void lc_conv_fwd_f32(float *y, const float *x, const float *wt, const float *bias, int64_t Bsz, int64_t L,
                         int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_fwd_f64(double *y, const double *x, const double *wt, const double *bias, int64_t Bsz, int64_t L,
                         int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_bwd_f32(float *dx, float *dwt, float *db, const float *dy, const float *x, const float *wt,
                         int64_t Bsz, int64_t L, int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_bwd_f64(double *dx, double *dwt, double *db, const double *dy, const double *x, const double *wt,
                         int64_t Bsz, int64_t L, int64_t D, int64_t K, int isa, int nthreads)
    void lc_conv_step_f32(float *y, float *state, const float *xt, const float *wt, const float *bias,
                          int64_t Bsz, int64_t D, int64_t K)
    void lc_conv_step_f64(double *y, double *state, const double *xt, const double *wt, const double *bias,
                          int64_t Bsz, int64_t D, int64_t K)
