/* csrc/gradtables/x86/x86.h — the gradient-table pass's per-ISA bodies, each in its own
 * translation unit (csrc/gradtables/x86/<isa>.c, compiled alone with that ISA's flags;
 * simde_avx512.c, built against SIMDe with AVX2+FMA flags, backs the test-only
 * extension lutcore._native._simde_gt).  Included by gradtables.h.
 *   gt_rows  out rows r0..r1-1 of lc_gt's pass `which` (0: dx, rows m; 1: s, rows o):
 *            the contract, and the bits, of the generic body on those rows (one thread)
 *   gtp_tile (avx512_vbmi.c) lanes l0..l1-1 (at most 128) and k's k0..k1-1 of the planes
 *            pass (gradtables/planes.h): the generic body's bits (one thread)
 */
#ifndef LUTCORE_GRADTABLES_X86_H
#define LUTCORE_GRADTABLES_X86_H

#include <stdint.h>

#define LC_GT_X86_DECLARE(P)                                                                        \
    void P##gt_rows(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w,     \
                    const float *t, int64_t M, int64_t K, int64_t O, int64_t r0, int64_t r1);

LC_GT_X86_DECLARE(lc_avx2_)
LC_GT_X86_DECLARE(lc_avx512_)
LC_GT_X86_DECLARE(lc_simde_avx512_)

#define LC_GTP_X86_DECLARE(P)                                                                       \
    void P##gtp_tile(float *outT, int64_t ldo, const int8_t *c, int64_t cs_i, int64_t cs_k,         \
                     const uint8_t *idxT, const float *w, int64_t ldi, const uint8_t *planes,         \
                     float scale, int64_t NI, int64_t l0, int64_t l1, int64_t k0, int64_t k1, int flags);

/* gtp_tile's flags (gradtables/planes.h's driver sets them after checking) */
#define LC_GTP_SKIP 1      /* the steps of code 0 may be left out */
#define LC_GTP_SYM 2       /* every row is even in its entry: G[r][-x] = G[r][x] for 0 < x < 127 */

LC_GTP_X86_DECLARE(lc_avx512vbmi_)
LC_GTP_X86_DECLARE(lc_simde_avx512vbmi_)

#endif /* LUTCORE_GRADTABLES_X86_H */
