/* csrc/gradtables/rows.h — the gradient-table pass's row function, written once for every body
 * (the generic one in gradtables.h, the x86 ones in x86/<isa>.c): each body supplies only how
 * it runs the vector blocks of one output row, the rest — the roles of `which`, the row loop
 * and the scalar tail — is this.
 *
 * LC_GT_ROWS(QUAL, NAME, BLOCKS) defines `QUAL void NAME(which, out, qx, qw, w, t, M, K, O, r0,
 * r1)` (x86/x86.h's gt_rows contract): output rows r0..r1-1 of pass `which` on one thread.
 * Rows r = m (which 0: the fixed codes a = qx[m, .], inner i = o over the codes b = qw[o, .],
 * weights g[m, o], the table Ga) or r = o (which 1: fixed b = qw[o, .], inner i = m over
 * a = qx[m, .], weights dy[m, o], the transposed table GbT).  BLOCKS(which, out, w, t, K, O,
 * NI, var, r, f) writes row r's k blocks from 0 (its fixed codes f, the inner codes var) and
 * returns where they stopped; the tail k0..K-1 is each sum in index order i = 0..NI-1 (not I:
 * complex.h, via SIMDe), a product rounded before its add, as in every block. */
#ifndef LUTCORE_GRADTABLES_ROWS_H
#define LUTCORE_GRADTABLES_ROWS_H

#include <stdint.h>

#define LC_GT_ROWS(QUAL, NAME, BLOCKS)                                                                 \
QUAL void NAME(int which, float *out, const int8_t *qx, const uint8_t *qw, const float *w, const float *t,  \
               int64_t M, int64_t K, int64_t O, int64_t r0, int64_t r1) {                           \
    const int64_t NI = which ? M : O;                                                                \
    const uint8_t *fix = which ? qw : (const uint8_t *)qx;                                           \
    const uint8_t *var = which ? (const uint8_t *)qx : qw;                                           \
    for (int64_t r = r0; r < r1; r++) {                                                              \
        const uint8_t *f = fix + r * K;                                                              \
        for (int64_t k0 = BLOCKS(which, out, w, t, K, O, NI, var, r, f); k0 < K; k0++) {              \
            const int32_t rr = (int32_t)f[k0] << 8;                                                  \
            float acc = 0.0f;                                                                        \
            for (int64_t i = 0; i < NI; i++)                                                         \
                acc += (which ? w[i * O + r] : w[r * O + i]) * t[rr | (int32_t)var[i * K + k0]];     \
            out[r * K + k0] = acc;                                                                   \
        }                                                                                            \
    }                                                                                                \
}

#endif /* LUTCORE_GRADTABLES_ROWS_H */
