# The C interface of csrc/gradtables/gradtables.h: declarations only (the paired gradtables.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before gradtables.pyx).
from libc.stdint cimport int8_t, uint8_t, int64_t

cdef extern from "gradtables/gradtables.h" nogil:
    void lc_gt(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,
               const float *table, int64_t M, int64_t K, int64_t O, int isa, int nthreads)

cdef extern from "gradtables/gradtables.h" nogil:
    const char *lc_gt_body_name(int isa)

cdef extern from "gradtables/gradtables.h" nogil:
    void lc_gt_planes(float *outT, int64_t ldo, const int8_t *c, int64_t cs_i, int64_t cs_k, const uint8_t *idxT,
                      const float *w, int64_t ldi, const uint8_t *planes, float scale, int64_t NI, int64_t K,
                      int64_t L, int flags, int isa, int nthreads)
    int LC_GTP_SKIP, LC_GTP_SYM
    int lc_gtp_fast(int isa)
    const char *lc_gtp_body_name(int isa)
