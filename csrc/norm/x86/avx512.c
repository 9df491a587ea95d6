/* csrc/norm/x86/avx512.c — the norms' AVX-512 body (16 rows a group, zmm): csrc/norm/x86/body.h
 * with 16-float vectors, compiled alone with the AVX-512 flags (setup.py) and once
 * more against SIMDe for the tests (simde_avx512.c). */
#define LC_BODY_ISA avx512
#include <math.h>
#include "core/simd.h"
#include "norm/x86/x86.h"
#include "core/transpose.h"   /* the 16 x 16 transpose */

#if LC_X86
#define LC_VEC_W 16
#include "core/vec.h"
#define VTR(v) lc_a_tr16(v)
#include "body.h"
#endif
