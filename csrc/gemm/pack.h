/* csrc/gemm/pack.h — packing: A as int16 rows, B as int8 panels of 16 columns x k-pairs (the
 * exact micro-kernels' register tile, LC_MR x LC_NR), and the header of a form kept per packed
 * operand.  Part of the gemm family (gemm.h includes every part; a part includes the parts it
 * uses, never gemm.h). */
#ifndef LUTCORE_GEMM_PACK_H
#define LUTCORE_GEMM_PACK_H

#include "core/common.h"

#define LC_MR 6    /* rows of the exact register tile: Ap is padded to a multiple */
#define LC_NR 16   /* columns of a packed B panel */

/* ------------------------------------------------------------------ packing */

/* The header of a form made once for a packed operand and kept by its owner (a PackedB:
 * the any-table body's staged indices, table_packed.h; the VNNI whole calls' panels,
 * drivers.h): which form (magic), for which body, of which (K, N), one more size.  A form
 * is used only where its header matches the call, so a stale or foreign one is never misread. */
#define LC_FORM_HDR 64
typedef struct {
    uint64_t magic;
    int64_t body, K, N, extra;
} lc_form_header;
_Static_assert(sizeof(lc_form_header) <= LC_FORM_HDR, "the header fits its bytes");

static inline void lc_form_header_write(uint8_t *f, uint64_t magic, int64_t body, int64_t K, int64_t N,
                                        int64_t extra) {
    lc_form_header h = {magic, body, K, N, extra};
    memset(f, 0, LC_FORM_HDR);
    memcpy(f, &h, sizeof(h));
}

/* 1 when f's header names this form, body (> 0), (K, N) and extra */
static inline int lc_form_header_ok(const uint8_t *f, uint64_t magic, int64_t body, int64_t K, int64_t N,
                                    int64_t extra) {
    lc_form_header h;
    memcpy(&h, f, sizeof(h));
    return body > 0 && h.magic == magic && h.body == body && h.K == K && h.N == N && h.extra == extra;
}

/* packed k index -> source k, or -1 for padding */
static inline int64_t lc_src_k(int64_t kp, int64_t bk, int64_t bkp, int64_t K) {
    int64_t blk = kp / bkp, j = kp % bkp;
    if (j >= bk) return -1;
    int64_t k = blk * bk + j;
    return k < K ? k : -1;
}

/* One packed row: dst[kp] = src[src_k(kp)] widened to int16, padding zero. */
static inline void lc_pack_a16_row(int16_t *dst, const int8_t *src, int64_t K, int64_t bk, int64_t bkp,
                                   int64_t Kp) {
    if (bk == bkp && bk * (Kp / bkp) == K) {
        for (int64_t k = 0; k < K; k++) dst[k] = src[k];
    } else {
        for (int64_t kp = 0; kp < Kp; kp++) {
            int64_t k = lc_src_k(kp, bk, bkp, K);
            dst[kp] = k < 0 ? 0 : src[k];
        }
    }
}
/* Rows (A) and panels (B) are packed independently, each into its own bytes: ranges of them on
 * the team, at least ~32 KB of output a range (smaller calls run on the caller alone). */
#define LC_PACK_GRAIN_BYTES ((int64_t)1 << 15)
typedef struct {
    void *dst;
    const int8_t *src;
    int64_t M, N, K, ld, bk, bkp, Kp;
} lc_pack_job;

static void lc_pack_a16_range(void *p, int64_t m0, int64_t m1, int tid) {
    const lc_pack_job *j = (const lc_pack_job *)p;
    int16_t *Ap = (int16_t *)j->dst;
    (void)tid;
    for (int64_t m = m0; m < m1; m++) {
        if (m >= j->M) memset(Ap + m * j->Kp, 0, (size_t)j->Kp * sizeof(int16_t));
        else lc_pack_a16_row(Ap + m * j->Kp, j->src + m * j->ld, j->K, j->bk, j->bkp, j->Kp);
    }
}

/* Ap[m, kp] = A[m, src(kp)] widened to int16; rows >= M are zero. */
static void lc_pack_a16(int16_t *Ap, const int8_t *A, int64_t M, int64_t Mp, int64_t K,
                        int64_t lda, int64_t bk, int64_t bkp, int64_t Kp, int nthreads) {
    lc_pack_job j = {Ap, A, M, 0, K, lda, bk, bkp, Kp};
    int64_t row = Kp * (int64_t)sizeof(int16_t);
    lc_team_range(nthreads, Mp, LC_PACK_GRAIN_BYTES / (row > 0 ? row : 1) + 1, lc_pack_a16_range, &j);
}

static void lc_pack_b_range(void *ctx, int64_t pan0, int64_t pan1, int tid) {
    const lc_pack_job *j = (const lc_pack_job *)ctx;
    int8_t *Bp = (int8_t *)j->dst;
    const int8_t *B = j->src;
    const int64_t K = j->K, N = j->N, ldb = j->ld, bk = j->bk, bkp = j->bkp, P = j->Kp / 2;
    (void)tid;
    for (int64_t pan = pan0; pan < pan1; pan++) {
        int8_t *dst = Bp + pan * P * 2 * LC_NR;
        int64_t n0 = pan * LC_NR;
        for (int64_t p = 0; p < P; p++) {
            int64_t k0 = lc_src_k(2 * p, bk, bkp, K), k1 = lc_src_k(2 * p + 1, bk, bkp, K);
            int8_t *d = dst + p * 2 * LC_NR;
            for (int64_t c = 0; c < LC_NR; c++) {
                int64_t n = n0 + c;
                d[2 * c] = (n < N && k0 >= 0) ? B[k0 * ldb + n] : 0;
                d[2 * c + 1] = (n < N && k1 >= 0) ? B[k1 * ldb + n] : 0;
            }
        }
    }
}

/* Bp[panel][p][c][2] = (B[src(2p), n], B[src(2p+1), n]) with n = panel*16 + c. */
static void lc_pack_b(int8_t *Bp, const int8_t *B, int64_t K, int64_t N, int64_t ldb,
                      int64_t bk, int64_t bkp, int64_t Kp, int nthreads) {
    int64_t npan = (N + LC_NR - 1) / LC_NR, pan = Kp * LC_NR;
    lc_pack_job j = {Bp, B, 0, N, K, ldb, bk, bkp, Kp};
    lc_team_range(nthreads, npan, LC_PACK_GRAIN_BYTES / (pan > 0 ? pan : 1) + 1, lc_pack_b_range, &j);
}

#endif /* LUTCORE_GEMM_PACK_H */
