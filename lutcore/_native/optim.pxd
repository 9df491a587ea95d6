# The C interface of csrc/optim/optim.h: declarations only (the paired optim.pyx sees them;
# a SIMDe twin includes this file before optim.pyx).
from libc.stdint cimport int64_t

cdef extern from "optim/optim.h" nogil:
    ctypedef struct lc_adamw_hp:
        float b1, b2, c1, c2, eps, step_size, inv_sqrt_bc2, decay, max_delta, gscale
    void lc_adamw(float *p, const float *g, float *m, float *v, int64_t n, const lc_adamw_hp *h,
                  int isa, int nthreads)
    void lc_adamw_multi(float **p, float **g, float **m, float **v, const int64_t *n, int64_t ntensors,
                        const lc_adamw_hp *h, int isa, int nthreads)
    ctypedef struct lc_adamw_step_io:
        double grad_scale, max_grad_norm, safe_norm, norm, clip
    int lc_adamw_step_multi(lc_adamw_step_io *io, float **p, float **g, float **m, float **v, const int64_t *n,
                            int64_t ntensors, lc_adamw_hp *h, int isa, int nthreads)
    int lc_sumsq_multi(double *out, const float **x, const int64_t *n, int64_t ntensors, int isa, int nthreads)
    const char *lc_optim_body_name(int isa)
