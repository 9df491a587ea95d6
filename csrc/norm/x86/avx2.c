/* csrc/norm/x86/avx2.c — the norms' AVX2 body (8 rows a group, ymm): csrc/norm/x86/body.h with
 * 8-float vectors, compiled alone with the AVX2 flags (setup.py).  The 8 x 8 transpose
 * is csrc/core/transpose.h's. */
#define LC_BODY_ISA avx2
#include <math.h>
#include "core/simd.h"
#include "core/transpose.h"
#include "norm/x86/x86.h"

#if LC_X86
#define LC_VEC_W 8
#include "core/vec.h"
#define VTR(v) lc_tr8x8(v)
#include "body.h"
#endif
