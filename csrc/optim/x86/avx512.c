/* csrc/optim/x86/avx512.c — AdamW's AVX-512 body (16 floats a vector).
 *
 * Design: compiled alone with -mavx512f/bw/vl/dq (setup.py), and once more
 * against SIMDe for the tests (simde_avx512.c).  csrc/optim/vadamw.h (written once over csrc/core/vec.h) at 16
 * lanes: the same float32 operations in the same order, no FMA (g' = g s;
 * m, v; s = (m lr/bc1) / (sqrt(v) / sqrt(bc2) + eps), non-finite -> 0, the
 * optional clamp; p = p (1 - lr wd) - s), so the generic body's bits.  The
 * tail (< 16) runs the generic body.
 *
 *   p, m, v  (n) float32   IN/OUT
 *   g        (n) float32   IN
 */
#define LC_BODY_ISA avx512
#include "optim/optim.h"
#include "core/simd.h"

#if LC_X86

/* csrc/optim/vadamw.h at 16 lanes (optim.h compiles it at 8) */
#define LC_VEC_W 16
#include "core/vec.h"
#undef LC_VEC_W
#define LC_VR_NAME(n) LC_BODY(n)
#define LC_VR_FN
#include "optim/vadamw.h"

#endif /* LC_X86 */
