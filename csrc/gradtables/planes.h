/* csrc/gradtables/planes.h — the gradient-table pass with the table in registers ("planes"):
 * backward="table"'s dX and dW where the lookups can be byte permutes instead of gathers.
 *
 * Contract.  A gradient table whose entries are int16 multiples of one power of two 2^e,
 * G[r][x] = v[r][x] * 2^e, held as byte planes, 512 bytes a row r:
 *     planes[r] = [ lo(x) for x < 128 | hi(x) for x < 128 | lo(x) for x >= 128 | hi(x) for x >= 128 ]
 * (lo, hi: the low and high byte of v[r][x]; lutcore/torch/_gradtables.py makes them and checks
 * that G is the float table exactly), and scale = 2^(e - 16) a normal float32, so that
 * G = scale * float32(v * 65536) exactly.  Then
 *
 *     outT[k, l] = sum_{i = 0 .. NI-1} w[i, l] * G[c[i, k]][idxT[k, l]]
 *
 * from 0 in float32, i in order, each product rounded before its add (-ffp-contract=off).
 *
 *     outT    float32 (K, L), rows ldo apart                  OUT
 *     c       int8    (NI, K), element (i, k) at c[i*cs_i + k*cs_k]   IN  the row of each (i, k)
 *     idxT    uint8   (K, L), rows ldi apart                  IN  the entry of each (k, l)
 *     w       float32 (NI, L), rows ldi apart                 IN
 *     planes  uint8   (256, 512)                              IN
 *
 * The two passes of backward="table" (gradtables.h's lc_gt 0 and 1: the same sums in the same
 * order, so the same bits):
 *     dX   l = m, i = o:  c = q_w (O, K), idxT = q_x^T (K, M), w = g^T (O, M), the rows of Ga^T
 *          (row b, entry a): outT = dX^T
 *     dW   l = o, i = m:  c = q_x (M, K) (or q_x^T read with strides), idxT = q_w^T (K, O),
 *          w = dY (M, O), the rows of Gb (row a, entry b): outT = S^T
 * The lanes of a vector are outputs that share their table row at each i (dX: the weight
 * code q_w[o, k] for 128 patch rows m; dW: the input code q_x[m, k] for 64..128 output
 * channels o), so a row is loaded into registers once per i and read by byte permutes.
 *
 * Work units: tiles of LC_GTP_LANES lanes x LC_GTP_KB k's, handed to the team; a unit's
 * outputs are each one whole sum on one thread, so the bits do not depend on the threads.
 * Bodies (each one tile on one thread): generic (here: scalar, the reference order), and
 * x86/avx512_vbmi.c (vpermi2b; its SIMDe twin for the tests).  The pass pays only where the
 * body is the VBMI one: lutcore/ops/gradtables.py asks lc_gtp_fast (elsewhere the gathers of
 * lc_gt run).
 */
#ifndef LUTCORE_GRADTABLES_PLANES_H
#define LUTCORE_GRADTABLES_PLANES_H

#include "core/common.h"
#include "core/dispatch.h"
#include "core/team.h"
#include "gradtables/x86/x86.h"

#define LC_GTP_LANES 128    /* lanes of a work unit: two 64-byte groups of codes */
#define LC_GTP_KB 32        /* k's of a work unit */
#define LC_GTP_ROW 512      /* bytes of a table row */

/* G[r][x] from the planes (the contract's value, as every body computes it) */
static inline float lc_gtp_value(const uint8_t *row, uint8_t x, float scale) {
    const int off = (x & 127) + (x & 128 ? 256 : 0);
    const int32_t v = (int16_t)(uint16_t)(row[off] | (row[off + 128] << 8));
    return scale * (float)(v * 65536);
}

/* The generic body: outT[k, l0..l1) for k in [k0, k1), each sum over i in order (every step,
 * every entry looked up where it is: `flags` only permit shortcuts, see lc_gt_planes). */
static void lc_gtp_tile_generic(float *outT, int64_t ldo, const int8_t *c, int64_t cs_i, int64_t cs_k,
                                const uint8_t *idxT, const float *w, int64_t ldi, const uint8_t *planes, float scale,
                                int64_t NI, int64_t l0, int64_t l1, int64_t k0, int64_t k1, int flags) {
    (void)flags;
    for (int64_t k = k0; k < k1; k++)
        for (int64_t l = l0; l < l1; l++) {
            const uint8_t x = idxT[k * ldi + l];
            float acc = 0.0f;
            for (int64_t i = 0; i < NI; i++) {
                const uint8_t *row = planes + (int64_t)(uint8_t)c[i * cs_i + k * cs_k] * LC_GTP_ROW;
                acc += w[i * ldi + l] * lc_gtp_value(row, x, scale);
            }
            outT[k * ldo + l] = acc;
        }
}

#ifndef LC_GT_SIMDE
#define LC_GT_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*tile)(float *, int64_t, const int8_t *, int64_t, int64_t, const uint8_t *, const float *, int64_t,
                 const uint8_t *, float, int64_t, int64_t, int64_t, int64_t, int64_t, int);
} lc_gtp_body;
static const lc_gtp_body lc_gtp_bodies[] = {
#if LC_X86_BODIES
    {{"avx512vbmi (vpermi2b planes)", LC_ISA_AVX512 | LC_ISA_VBMI}, LC_XBODY(LC_GT_SIMDE, avx512vbmi, gtp_tile)},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_gtp_tile_generic},
};
LC_BODY_TABLE(lc_gtp_body, lc_gtp, lc_gtp_bodies)   /* lc_gtp_pick(isa), lc_gtp_body_name(isa) */

/* 1 where isa runs a vector body of this pass (there it beats lc_gt's gathers) */
static inline int lc_gtp_fast(int isa) { return lc_gtp_pick(isa)->tile != lc_gtp_tile_generic; }

typedef struct {
    const lc_gtp_body *B;
    float *outT;
    const int8_t *c;
    const uint8_t *idxT, *planes;
    const float *w;
    float scale;
    int64_t ldo, ldi, cs_i, cs_k, NI, K, L, nkb;
    int flags;
} lc_gtp_job;

static void lc_gtp_unit(void *ctx, int64_t u, int tid) {
    const lc_gtp_job *j = (const lc_gtp_job *)ctx;
    (void)tid;
    const int64_t t = u / j->nkb, b = u % j->nkb;
    const int64_t l0 = t * LC_GTP_LANES, l1 = l0 + LC_GTP_LANES < j->L ? l0 + LC_GTP_LANES : j->L;
    const int64_t k0 = b * LC_GTP_KB, k1 = k0 + LC_GTP_KB < j->K ? k0 + LC_GTP_KB : j->K;
    j->B->tile(j->outT, j->ldo, j->c, j->cs_i, j->cs_k, j->idxT, j->w, j->ldi, j->planes, j->scale, j->NI, l0, l1,
               k0, k1, j->flags);
}

/* 1 when none of the n floats at w is NaN or +-inf (threads over chunks) */
typedef struct { const float *w; int64_t n; int bad; } lc_gtp_fin_job;
#define LC_GTP_FIN_CHUNK 65536
static void lc_gtp_fin_unit(void *ctx, int64_t u, int tid) {
    lc_gtp_fin_job *j = (lc_gtp_fin_job *)ctx;
    (void)tid;
    const int64_t a = u * LC_GTP_FIN_CHUNK, b = a + LC_GTP_FIN_CHUNK < j->n ? a + LC_GTP_FIN_CHUNK : j->n;
    int bad = 0;
    for (int64_t i = a; i < b; i++) {
        uint32_t bits;
        memcpy(&bits, j->w + i, 4);
        bad |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    if (bad) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}
static int lc_gtp_finite(const float *w, int64_t n, int nthreads) {
    lc_gtp_fin_job j = {w, n, 0};
    const int64_t units = (n + LC_GTP_FIN_CHUNK - 1) / LC_GTP_FIN_CHUNK;
    lc_team_for(units > 1 ? nthreads : 1, units, lc_gtp_fin_unit, &j);
    return !j.bad;
}
/* 1 when the (rows, L) floats at w, rows ld apart, are all finite */
static int lc_gtp_finite_rows(const float *w, int64_t rows, int64_t L, int64_t ld, int nthreads) {
    if (ld == L) return lc_gtp_finite(w, rows * L, nthreads);
    for (int64_t r = 0; r < rows; r++)
        if (!lc_gtp_finite(w + r * ld, L, 1)) return 0;
    return 1;
}

/* 1 when every row's entries -x and x (0 < x < 127) hold the same int16 (planes' layout) */
static int lc_gtp_even(const uint8_t *planes) {
    for (int64_t r = 0; r < 256; r++) {
        const uint8_t *p = planes + r * LC_GTP_ROW;
        for (int x = 1; x < 127; x++)               /* entry 256 - x: offset 128 - x of the upper half */
            if (p[x] != p[256 + 128 - x] || p[128 + x] != p[384 + 128 - x]) return 0;
    }
    return 1;
}

/* The pass (the contract above) on nthreads threads; isa as common.h.  The rows of outT are ldo
 * apart, those of idxT and w ldi apart (L lanes of wider arrays: a chunk of them).  flags: the
 * caller's hints, each checked here and dropped where it does not hold (the same bits either way):
 *   LC_GTP_SKIP  many codes c are 0 (dW: the input's codes after a ReLU, and the padding) — where
 *                the table's row 0 is all zeros and every weight is finite, a step of code 0 adds
 *                +0 or -0 to a sum that starts at +0 and so is never -0: the bodies may leave it out;
 *   LC_GTP_SYM   the codes idxT are signed (dW: the weight's) and the rows may be even in the
 *                entry (G[r][-x] = G[r][x], 0 < x < 127): the bodies may look them up by magnitude. */
static void lc_gt_planes(float *outT, int64_t ldo, const int8_t *c, int64_t cs_i, int64_t cs_k, const uint8_t *idxT,
                         const float *w, int64_t ldi, const uint8_t *planes, float scale, int64_t NI, int64_t K,
                         int64_t L, int flags, int isa, int nthreads) {
    if (K <= 0 || L <= 0) return;
    const int64_t ntiles = (L + LC_GTP_LANES - 1) / LC_GTP_LANES, nkb = (K + LC_GTP_KB - 1) / LC_GTP_KB;
    if (flags & LC_GTP_SKIP) {
        int ok = 1;
        for (int x = 0; x < LC_GTP_ROW; x++) ok &= planes[x] == 0;
        if (!ok || !lc_gtp_finite_rows(w, NI, L, ldi, NI * L > LC_GT_PAR_MIN ? nthreads : 1)) flags &= ~LC_GTP_SKIP;
    }
    if ((flags & LC_GTP_SYM) && !lc_gtp_even(planes)) flags &= ~LC_GTP_SYM;
    lc_gtp_job j = {lc_gtp_pick(isa), outT, c, idxT, planes, w, scale, ldo, ldi, cs_i, cs_k, NI, K, L, nkb, flags};
    lc_team_for(NI * K * L > LC_GT_PAR_MIN ? nthreads : 1, ntiles * nkb, lc_gtp_unit, &j);
}

#endif /* LUTCORE_GRADTABLES_PLANES_H */
