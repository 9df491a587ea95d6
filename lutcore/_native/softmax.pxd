# The C interface of csrc/softmax/softmax.h: declarations only (the paired softmax.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before softmax.pyx).
from libc.stdint cimport int64_t

cdef extern from "softmax/softmax.h" nogil:
    void lc_softmax_row(float *s, int64_t S, int64_t qpos, int64_t window, int isa)
    void lc_softmax_bwd_row(float *ds, const float *att, int64_t S, int64_t qpos, float scale)
    void lc_softmax_causal(float *s, int64_t KV, int64_t R, int64_t S, int64_t T, int64_t pos, int64_t window,
                           int isa, int nthreads)
    void lc_softmax_causal_bwd(float *ds, const float *att, int64_t KV, int64_t R, int64_t S, int64_t T,
                               int64_t pos, float scale, int nthreads)

cdef extern from "mathfn/mathfn.h" nogil:
    const char *lc_mathfn_body_name(int isa)
