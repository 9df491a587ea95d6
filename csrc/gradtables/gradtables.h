/* csrc/gradtables/gradtables.h — backward="table": gradients through a unit's gradient tables.
 *
 * Contract (lutcore/torch/_gradtables.py, docs/DESIGN.md): with Ga = df/da, Gb = df/db
 * float32 (65536,) indexed (a & 0xff) * 256 + (b & 0xff), codes qx (M, K) and qw (O, K):
 *   lc_gt 0  dx[m, k] = sum_o g[m, o] * Ga[qx[m, k], qw[o, k]]    g float32 (M, O)   -> dx (M, K)
 *   lc_gt 1  s[o, k]  = sum_m dy[m, o] * Gb[qx[m, k], qw[o, k]]   dy float32 (M, O)  -> s (O, K)
 *            (given the transposed table GbT[b * 256 + a] = Gb[a * 256 + b])
 * Each sum runs in index order (o = 0, 1, ... / m = 0, 1, ...) from 0 in float32, a
 * product rounded before its add (-ffp-contract=off).  dx is threaded over rows m, s
 * over rows o: every output has one thread and one order, so the bits are the same at
 * any thread count and on every ISA (the bodies differ only in how the lookups are
 * vectorised: generic C here, AVX2 and AVX-512 gathers in csrc/gradtables/x86/, the AVX-512
 * one checked through SIMDe on any x86-64 CPU by tests/test_x86_bodies_gradtables.py).
 * dx's order is the numpy fallback's; s's is not (numpy adds per-block sums).
 */
#ifndef LUTCORE_GRADTABLES_H
#define LUTCORE_GRADTABLES_H

#include "core/common.h"
#include "core/dispatch.h"
#include "gradtables/rows.h"

#define LC_GT_PAR_MIN (1 << 15)

#define LC_GT_KC 16          /* k's per accumulator block (one AVX-512 vector, two AVX2) */

/* The generic body (rows.h): row r's blocks of LC_GT_KC k's, whose LC_GT_KC sums over i stay
 * in registers; lane j looks up the table row of its fixed code (16 rows, 16 KiB: L1). */
static inline int64_t lc_gt_blocks_generic(int which, float *out, const float *w, const float *t, int64_t K,
                                           int64_t O, int64_t NI, const uint8_t *var, int64_t r, const uint8_t *f) {
    const float *wr = which ? w + r : w + r * O;       /* weight i of row r: wr[i * ws] */
    const int64_t ws = which ? O : 1;
    int64_t k0 = 0;
    for (; k0 + LC_GT_KC <= K; k0 += LC_GT_KC) {
        int32_t row[LC_GT_KC];
        float acc[LC_GT_KC];
        for (int j = 0; j < LC_GT_KC; j++) { row[j] = (int32_t)f[k0 + j] << 8; acc[j] = 0.0f; }
        for (int64_t i = 0; i < NI; i++) {
            const float s = wr[i * ws];
            const uint8_t *v = var + i * K + k0;
            for (int j = 0; j < LC_GT_KC; j++) acc[j] += s * t[row[j] | (int32_t)v[j]];
        }
        for (int j = 0; j < LC_GT_KC; j++) out[r * K + k0 + j] = acc[j];
    }
    return k0;
}
LC_GT_ROWS(static, lc_gt_rows_generic, lc_gt_blocks_generic)

/* ------------------------------------------------------------ the body table
 * The x86 bodies (csrc/gradtables/x86/avx2.c, avx512.c: the generic loops with the lanes of a
 * block as one vector and the lookups as hardware gathers, the same bits) live in their own
 * translation units; LC_GT_SIMDE (setup.py: 1 in the test twin's build) binds the SIMDe copy
 * of the AVX-512 one (the AVX2 one runs natively wherever the twin does). */
#include "gradtables/x86/x86.h"
#ifndef LC_GT_SIMDE
#define LC_GT_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*rows)(int, float *, const int8_t *, const uint8_t *, const float *, const float *, int64_t, int64_t,
                 int64_t, int64_t, int64_t);
} lc_gt_body;
static const lc_gt_body lc_gt_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_GT_SIMDE, avx512, gt_rows)},
    {{"avx2", LC_ISA_AVX2}, lc_avx2_gt_rows},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_gt_rows_generic},
};
LC_BODY_TABLE(lc_gt_body, lc_gt, lc_gt_bodies)   /* lc_gt_pick(isa), lc_gt_body_name(isa) */

/* Rows per team range: at least about this many table lookups (a range costs a claim). */
#define LC_GT_RANGE_MIN (1 << 16)

typedef struct {
    const lc_gt_body *B;
    float *out;
    const int8_t *qx;
    const uint8_t *qw;
    const float *w, *table;
    int64_t M, K, O;
    int which;
} lc_gt_job;

static void lc_gt_range(void *ctx, int64_t r0, int64_t r1, int tid) {
    const lc_gt_job *j = (const lc_gt_job *)ctx;
    (void)tid;
    for (int64_t r = r0; r < r1; r++)   /* a row a call */
        j->B->rows(j->which, j->out, j->qx, j->qw, j->w, j->table, j->M, j->K, j->O, r, r + 1);
}

/* which: 0 = dx (table Ga, weights g), 1 = s (table GbT, weights dy); isa as common.h.
 * Threads over the output rows (one row, one thread: the bits do not depend on them). */
static void lc_gt(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,
                  const float *table, int64_t M, int64_t K, int64_t O, int isa, int nthreads) {
    const int64_t R = which ? O : M, per_row = (which ? M : O) * K > 0 ? (which ? M : O) * K : 1;
    lc_gt_job j = {lc_gt_pick(isa), out, qx, qw, w, table, M, K, O, which};
    lc_team_range(M * K * O > LC_GT_PAR_MIN ? nthreads : 1, R,
                  per_row >= LC_GT_RANGE_MIN ? 1 : (LC_GT_RANGE_MIN + per_row - 1) / per_row, lc_gt_range, &j);
}

/* the same passes with the table in registers (the layouts differ: its own contract) */
#include "gradtables/planes.h"

#endif /* LUTCORE_GRADTABLES_H */
