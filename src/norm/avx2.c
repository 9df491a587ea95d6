/* src/norm/avx2.c — the norms' AVX2 body (8 rows a group, ymm): src/norm/body.h with
 * 8-float vectors, compiled alone with the AVX2 flags (setup.py).  The 8 x 8 transpose
 * is attention's (lutcore/attn.h). */
#define LC_BODY_ISA avx2
#include <math.h>
#include "core/simd.h"
#include "lutcore/attn.h"
#include "lutcore/norm/x86.h"

#if LC_X86
typedef __m256 V;
#define NB_W 8
#define VLD(p) _mm256_loadu_ps(p)
#define VST(p, v) _mm256_storeu_ps(p, v)
#define VSET1(f) _mm256_set1_ps(f)
#define VZERO() _mm256_setzero_ps()
#define VADD(a, b) _mm256_add_ps(a, b)
#define VSUB(a, b) _mm256_sub_ps(a, b)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VDIV(a, b) _mm256_div_ps(a, b)
#define VTR(v) lc_tr8x8(v)
#include "body.h"
#endif
