/* csrc/mathfn/x86/avx512.c — the math functions' AVX-512 bodies (16 floats a vector).
 *
 * Design: compiled alone with -mavx512f/bw/vl/dq (setup.py), and once more
 * against SIMDe for the tests (simde_avx512.c).  The vector functions and
 * the row loops are written once over csrc/core/vec.h (csrc/mathfn/vmath.h through
 * csrc/mathfn/x86/zmm.h, shared with the selective scan's AVX-512 body, and
 * csrc/mathfn/vrows.h) and compiled here at 16 lanes, so every lane has the generic
 * body's bits.  Tails (< 16 values) run the scalar functions of mathfn.h.
 *
 *   mathfn_row  out (n) <- fn(x (n)), fn one of LC_FN_*
 *   gelu        y, t (n) <- GELU of u (n);  gelu_bwd dx (n) <- dy, u, t (n)
 *   silu_bwd    dx (n) <- (dy + dy2) silu'(x), dy2 optional (NULL)
 */
#define LC_BODY_ISA avx512
#include "mathfn/mathfn.h"
#include "core/simd.h"
#include "mathfn/x86/x86.h"
#include "mathfn/x86/zmm.h"

#if LC_X86

/* the row loops: csrc/mathfn/vrows.h at 16 lanes (mathfn.h compiles it at 8) */
#define LC_VR_NAME(n) LC_BODY(n)
#define LC_VR_FN
#include "mathfn/vrows.h"

#endif /* LC_X86 */
