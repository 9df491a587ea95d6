# The C interface of csrc/models/decode.h (the llama decode layer): declarations only (the
# paired models.pyx sees them; a SIMDe twin includes this file before models.pyx).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t

cdef extern from "attn/attn.h" nogil:
    int64_t LC_ATTN_KT(int64_t hd)
    const char *lc_attn_body_name(int isa)

cdef extern from "sgemm/sgemm.h" nogil:
    const char *lc_sgemv_body_name(int isa)

cdef extern from "models/decode.h" nogil:
    int LC_DLIN_FLOAT, LC_DLIN_EXACT, LC_DLIN_TABLE
    ctypedef struct lc_dlin:
        int kind
        int64_t K, N, nblk, bk, bkp
        const float *panels
        const int8_t *bp
        const float *sbp
        int16_t *ap
        int8_t *qa
        float *sa
        const int8_t *qb
        const float *sb
        const int32_t *T32
        int32_t *twork
        const float *bias
    ctypedef struct lc_dlayer:
        lc_dlin qkv, o, up, down
        const float *n1w
        const float *n2w
        float *Kc
        float *Vc
        int64_t cap, window
        float scale
    ctypedef struct lc_dctx:
        int64_t C, H, KV, hd, inter, smax
        float eps
        float *h
        float *qkvb
        float *rq
        float *att
        float *ob
        float *upb
        float *sc
        float *kt
    void lc_dec_rope_head(float *dst, const float *src, const float *cs, const float *sn, int64_t half)
    int lc_dec_layers(const lc_dlayer *Ls, int64_t nl, lc_dctx *c, float *x, int64_t pos, const float *cs,
                      const float *sn, int isa, int nt, int team)
