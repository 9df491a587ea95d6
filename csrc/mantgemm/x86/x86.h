/* csrc/mantgemm/x86/x86.h — the mantgemm family's AVX-512 bodies, in their own translation unit
 * (csrc/mantgemm/x86/avx512.c: AVX-512 F/BW/DQ), compiled alone with their flags; their SIMDe copies
 * (lc_simde_avx512_*) back the test-only extension lutcore._native._simde_mantgemm.  Included by
 * mantgemm.h, whose generic bodies of the same jobs give the contract (and the bits):
 *   mt_mul_unit    the mul route, Y[m0..m1, panel p] (nc <= LC_MT_NB columns): a register tile of
 *                  up to 6 rows x 4 zmm, fl32(va * vb) added in k order (k in chunks)
 *   mt_table_unit  the table route, the same outputs: per row and k the table's words for 4 zmm of
 *                  columns (bf16: permutes of T's row, 8 zmm; fp16: gathers), scaled by vscalefps,
 *                  signed, added in k order; rows or panels holding inf/NaN take job.h's row
 *   mt_ws          the per-thread scratch bytes of a unit (its y between k chunks, rows_per x NB)
 *   mt_round, mt_prep_a, mt_prep_b   the pre-pass (job.h's rounding and forms, 16 lanes a step)
 */
#ifndef LUTCORE_MANTGEMM_X86_H
#define LUTCORE_MANTGEMM_X86_H

#include <stddef.h>
#include <stdint.h>
#include "mantgemm/job.h"

#define LC_MT_X86_DECLARE(P)                                                                          \
    void P##mt_round(float *y, const float *x, int64_t n, int fmt);                                   \
    void P##mt_prep_a(const lc_mt_job *j, int64_t m0, int64_t m1);                                    \
    void P##mt_prep_b(const lc_mt_job *j, int64_t k0, int64_t k1, uint8_t *fl);                       \
    size_t P##mt_ws(const lc_mt_job *j);                                                              \
    void P##mt_mul_unit(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws);     \
    void P##mt_table_unit(const lc_mt_job *j, int64_t m0, int64_t m1, int64_t p, int nc, void *ws);

LC_MT_X86_DECLARE(lc_avx512_)
LC_MT_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_MANTGEMM_X86_H */
