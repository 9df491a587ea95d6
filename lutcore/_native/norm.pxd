# The C interface of csrc/norm/norm.h: declarations only (the paired norm.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before norm.pyx).
from libc.stdint cimport int64_t

cdef extern from "norm/norm.h" nogil:
    void lc_rmsnorm_rows(float *y, float *rstd, const float *x, const float *w, int64_t R, int64_t C, float eps,
                         int isa, int nthreads)
    void lc_rmsnorm_rows_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                             const float *rstd, int64_t R, int64_t C, float *work, int isa, int nthreads)
    void lc_layernorm_rows(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b,
                           int64_t R, int64_t C, float eps, int isa, int nthreads)
    void lc_layernorm_rows_bwd(float *dx, float *dw, float *db, const float *dy, const float *xhat,
                               const float *w, const float *rstd, int64_t R, int64_t C, float *work, int isa,
                               int nthreads)
    const char *lc_norm_body_name(int isa)
    int LC_NORM_ROWS
