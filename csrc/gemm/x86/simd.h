/* csrc/gemm/x86/simd.h — what every x86 body file of the gemm family includes:
 * the shared intrinsics/SIMDe switch (csrc/core/simd.h), the family's
 * declarations (x86.h) and its register-tile macros.
 */
#ifndef LUTCORE_SRC_GEMM_X86_SIMD_H
#define LUTCORE_SRC_GEMM_X86_SIMD_H

#include "core/simd.h"
#include "gemm/x86/x86.h"

#define LC_XNR 16            /* columns per packed panel (gemm.h LC_NR) */
#define LC_XTR 12            /* rows per register tile: 12 x 2 panels = 24 zmm accumulators */

static inline int32_t lc_x_ld32(const void *p) { int32_t v; memcpy(&v, p, 4); return v; }

/* Per-row register variables (named, not an array: compilers keep an array of
 * vectors in memory): X(r) for r = 0..11; a row r >= R is dead code. */
#define LC_X_REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define LC_X_REP4(X) X(0) X(1) X(2) X(3)
#define LC_X_REP8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* tile instantiations: rows 1..12 x 1..2 panels, picked at run time from a table */
#define LC_X_ROWS(X, NP) X(1, NP) X(2, NP) X(3, NP) X(4, NP) X(5, NP) X(6, NP) X(7, NP) X(8, NP) \
    X(9, NP) X(10, NP) X(11, NP) X(12, NP)
#define LC_X_ROWS8(X, NP) X(1, NP) X(2, NP) X(3, NP) X(4, NP) X(5, NP) X(6, NP) X(7, NP) X(8, NP)

#endif
