# The C interface of csrc/attn/attn.h: declarations only (the paired attn.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before attn.pyx).
from libc.stdint cimport int64_t

cdef extern from "attn/attn.h" nogil:
    int64_t LC_ATTN_KT(int64_t hd)
    const char *lc_attn_body_name(int isa)
    void lc_attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                        int64_t S, int64_t hd, float *kt, int isa)
    void lc_attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                        int64_t S, int64_t hd, int isa)
