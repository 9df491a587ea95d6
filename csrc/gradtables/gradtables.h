/* csrc/gradtables/gradtables.h — backward="table": gradients through a unit's gradient tables.
 *
 * Contract (lutcore/torch/_gradtables.py, docs/DESIGN.md): with Ga = df/da, Gb = df/db
 * float32 (65536,) indexed (a & 0xff) * 256 + (b & 0xff), codes qx (M, K) and qw (O, K):
 *   lc_gt_dx  dx[m, k] = sum_o g[m, o] * Ga[qx[m, k], qw[o, k]]    g float32 (M, O)   -> dx (M, K)
 *   lc_gt_dw  s[o, k]  = sum_m dy[m, o] * Gb[qx[m, k], qw[o, k]]   dy float32 (M, O)  -> s (O, K)
 *             (given the transposed table GbT[b * 256 + a] = Gb[a * 256 + b])
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

#define LC_GT_PAR_MIN (1 << 15)

#define LC_GT_KC 16          /* k's per accumulator block (one AVX-512 vector, two AVX2) */

/* dx: for each row m and block of 16 k's, the 16 sums over o stay in registers; lane j
 * gathers from the table row Ga[qx[m, k+j], .] (16 rows, 16 KiB: L1).  dw: the same with
 * the roles of (m, o) swapped, gathering from the transposed table GbT[qw[o, k+j], .]. */
#define LC_GT_BODIES(SUF, ATTR)                                                                      \
static ATTR void lc_gt_dx_##SUF(float *dx, const int8_t *qx, const uint8_t *qw, const float *g,      \
                                const float *ga, int64_t M, int64_t K, int64_t O, int nthreads) {    \
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN)) \
    for (int64_t m = 0; m < M; m++) {                                                                \
        const uint8_t *a = (const uint8_t *)(qx + m * K);                                            \
        const float *gm = g + m * O;                                                                 \
        int64_t k0 = 0;                                                                              \
        for (; k0 + LC_GT_KC <= K; k0 += LC_GT_KC) {                                                 \
            int32_t row[LC_GT_KC];                                                                   \
            float acc[LC_GT_KC];                                                                     \
            for (int j = 0; j < LC_GT_KC; j++) { row[j] = (int32_t)a[k0 + j] << 8; acc[j] = 0.0f; }  \
            for (int64_t o = 0; o < O; o++) {                                                        \
                const float gv = gm[o];                                                              \
                const uint8_t *b = qw + o * K + k0;                                                  \
                for (int j = 0; j < LC_GT_KC; j++) acc[j] += gv * ga[row[j] | (int32_t)b[j]];        \
            }                                                                                        \
            for (int j = 0; j < LC_GT_KC; j++) dx[m * K + k0 + j] = acc[j];                          \
        }                                                                                            \
        for (; k0 < K; k0++) {                                                                       \
            const int32_t r = (int32_t)a[k0] << 8;                                                   \
            float acc = 0.0f;                                                                        \
            for (int64_t o = 0; o < O; o++) acc += gm[o] * ga[r | (int32_t)qw[o * K + k0]];          \
            dx[m * K + k0] = acc;                                                                    \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
static ATTR void lc_gt_dw_##SUF(float *s, const int8_t *qx, const uint8_t *qw, const float *dy,      \
                                const float *gbt, int64_t M, int64_t K, int64_t O, int nthreads) {   \
    LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN)) \
    for (int64_t o = 0; o < O; o++) {                                                                \
        const uint8_t *b = qw + o * K;                                                               \
        int64_t k0 = 0;                                                                              \
        for (; k0 + LC_GT_KC <= K; k0 += LC_GT_KC) {                                                 \
            int32_t row[LC_GT_KC];                                                                   \
            float acc[LC_GT_KC];                                                                     \
            for (int j = 0; j < LC_GT_KC; j++) { row[j] = (int32_t)b[k0 + j] << 8; acc[j] = 0.0f; }  \
            for (int64_t m = 0; m < M; m++) {                                                        \
                const float dv = dy[m * O + o];                                                      \
                const uint8_t *a = (const uint8_t *)(qx + m * K + k0);                               \
                for (int j = 0; j < LC_GT_KC; j++) acc[j] += dv * gbt[row[j] | (int32_t)a[j]];       \
            }                                                                                        \
            for (int j = 0; j < LC_GT_KC; j++) s[o * K + k0 + j] = acc[j];                           \
        }                                                                                            \
        for (; k0 < K; k0++) {                                                                       \
            const int32_t r = (int32_t)b[k0] << 8;                                                   \
            float acc = 0.0f;                                                                        \
            for (int64_t m = 0; m < M; m++)                                                          \
                acc += dy[m * O + o] * gbt[r | (int32_t)(uint8_t)qx[m * K + k0]];                    \
            s[o * K + k0] = acc;                                                                     \
        }                                                                                            \
    }                                                                                                \
}

LC_GT_BODIES(generic, )

/* The x86 bodies (csrc/gradtables/x86/avx2.c, avx512.c: the generic loops with the lanes of a
 * block as one vector and the lookups as hardware gathers, the same bits) live in their
 * own translation units, built where setup.py defines LC_HAVE_X86_BODIES; LC_GT_SIMDE
 * binds the SIMDe copy of the AVX-512 one (the test-only extension _simde_gt).  Each
 * computes a range of output rows on one thread; lc_gt threads over the rows. */
#if LC_X86 && defined(LC_HAVE_X86_BODIES)
#include "gradtables/x86/x86.h"
#define LC_GT_X86 1
#if defined(LC_GT_SIMDE)
#define LC_GT_AVX512 lc_simde_avx512_gt_rows
#else
#define LC_GT_AVX512 lc_avx512_gt_rows
#endif
#else
#define LC_GT_X86 0
#endif

/* the body lc_gt runs at isa (lutcore.show_config) */
static const char *lc_gt_body_name(int isa) {
    const int lvl = isa & 3;
    if (LC_GT_X86 && lvl >= LC_ISA_AVX512) return "avx512";
    if (LC_GT_X86 && lvl >= LC_ISA_AVX2) return "avx2";
    return "generic";
}

/* which: 0 = dx (table Ga, weights g), 1 = s (table GbT, weights dy); isa as common.h */
static void lc_gt(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,
                  const float *table, int64_t M, int64_t K, int64_t O, int isa, int nthreads) {
#if LC_GT_X86
    const int lvl = isa & 3;
    if (lvl >= LC_ISA_AVX2) {
        void (*body)(int, float *, const int8_t *, const uint8_t *, const float *, const float *,
                     int64_t, int64_t, int64_t, int64_t, int64_t) =
            lvl >= LC_ISA_AVX512 ? LC_GT_AVX512 : lc_avx2_gt_rows;
        const int64_t R = which ? O : M;
        LC_PRAGMA(omp parallel for schedule(static) num_threads(nthreads) if(M * K * O > LC_GT_PAR_MIN))
        for (int64_t r = 0; r < R; r++) body(which, out, qx, qw, w, table, M, K, O, r, r + 1);
        return;
    }
#else
    (void)isa;
#endif
    if (which) lc_gt_dw_generic(out, qx, qw, w, table, M, K, O, nthreads);
    else lc_gt_dx_generic(out, qx, qw, w, table, M, K, O, nthreads);
}

#endif
