/* csrc/mxgemm/x86/x86.h — the mxgemm family's x86 bodies, each in its own translation unit
 * (csrc/mxgemm/x86/avx512.c: AVX-512 F/BW/DQ; x86/avx2.c: AVX2 + FMA), compiled alone with their
 * flags; their SIMDe copies (lc_simde_avx512_*, lc_simde_avx2_*) back the test-only extension
 * lutcore._native._simde_mxgemm.  Included by mxgemm.h, whose generic body of the same job gives
 * the contract (and the bits):
 *   mx_exact_unit   exact mode, Y[m0..m1, n0..n0+nc): the FMA route's register tile (nc <= the
 *                   body's NB_FMA) or the row-table route (nc <= its NB_TABLE), per the products'
 *                   route; ws its thread's scratch, mx_exact_ws(j) bytes (64-aligned)
 *   mx_narrow_unit  narrow mode, Y[m0..m1, n0..n0+nc) (nc <= NB_TABLE): the same row tables,
 *                   registers stepped in k order (avx512: 2 rows x 4 zmm; avx2: 1 row x 8 ymm);
 *                   mx_narrow_ws(j) bytes
 */
#ifndef LUTCORE_MXGEMM_X86_H
#define LUTCORE_MXGEMM_X86_H

#include <stddef.h>
#include <stdint.h>
#include "mxgemm/job.h"

#define LC_MX_X86_NB_FMA 32       /* the FMA tile's columns: 4 zmm of float64 */
#define LC_MX_X86_NB_TABLE 32     /* the row tables' columns: a row is two zmm of words */
#define LC_MX_AVX2_NB 32          /* avx2, both routes: 2 strips of 4 ymm of float64 (FMA, two parts), 8 ymm */

#define LC_MX_X86_DECLARE(P)                                                                          \
    size_t P##mx_exact_ws(const lc_mx_job *j);                                                        \
    void P##mx_exact_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws);  \
    size_t P##mx_narrow_ws(const lc_mx_job *j);                                                       \
    void P##mx_narrow_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws);

LC_MX_X86_DECLARE(lc_avx512_)
LC_MX_X86_DECLARE(lc_simde_avx512_)
LC_MX_X86_DECLARE(lc_avx2_)
LC_MX_X86_DECLARE(lc_simde_avx2_)

#endif /* LUTCORE_MXGEMM_X86_H */
