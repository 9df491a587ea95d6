# The C interface of csrc/mathfn/mathfn.h: declarations only (the paired mathfn.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before mathfn.pyx).
from libc.stdint cimport int64_t

cdef extern from "mathfn/mathfn.h" nogil:
    void lc_mathfn_f32(float *out, const float *x, int64_t n, int fn, int isa, int nthreads)
    const char *lc_mathfn_body_name(int isa)
    void lc_mathfn_f64(double *out, const double *x, int64_t n, int fn, int nthreads)
    void lc_gelu_f32(float *y, float *t, const float *u, int64_t n, int isa, int nthreads)
    void lc_gelu_bwd_f32(float *dx, const float *dy, const float *u, const float *t, int64_t n, int isa,
                         int nthreads)
    void lc_silu_bwd_f32(float *dx, const float *dy, const float *dy2, const float *x, int64_t n, int isa,
                         int nthreads)
