/* csrc/mathfn/x86/zmm.h — the math functions at 16 lanes (AVX-512 F/DQ), for the
 * AVX-512 bodies that evaluate them (csrc/mathfn/x86/avx512.c, csrc/scan/x86/avx512.c).
 *
 * Design: the one source of the vector math functions, csrc/mathfn/vmath.h, compiled
 * over csrc/core/vec.h at 16 lanes (mathfn.h compiles it at 8: lc_*_ps), operation for
 * operation — so every lane has the AVX2 (and the generic) body's bits.  Included after core/simd.h
 * (native intrinsics, or SIMDe's under LC_SIMDE) in a file compiled with the
 * AVX-512 flags.
 */
#ifndef LUTCORE_SRC_MATHFN_ZMM_H
#define LUTCORE_SRC_MATHFN_ZMM_H

#include "mathfn/mathfn.h"

#if LC_X86

/* z_exp, z_exp2, z_log, z_softplus, z_sigmoid, z_silu, ...: csrc/mathfn/vmath.h at 16 lanes */
#define LC_VEC_W 16
#include "core/vec.h"
#include "mathfn/vmath.h"
#undef LC_VEC_W

#endif /* LC_X86 */
#endif /* LUTCORE_SRC_MATHFN_ZMM_H */
