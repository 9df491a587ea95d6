/* src/norm/avx512.c — the norms' AVX-512 body (16 rows a group, zmm): src/norm/body.h
 * with 16-float vectors, compiled alone with the AVX-512 flags (setup.py) and once
 * more against SIMDe for the tests (simde_avx512.c). */
#define LC_BODY_ISA avx512
#include <math.h>
#include "core/simd.h"
#include "lutcore/norm/x86.h"
#include "attn/tr16.h"   /* the 16 x 16 transpose */

#if LC_X86
typedef __m512 V;
#define NB_W 16
#define VLD(p) _mm512_loadu_ps(p)
#define VST(p, v) _mm512_storeu_ps(p, v)
#define VSET1(f) _mm512_set1_ps(f)
#define VZERO() _mm512_setzero_ps()
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUB(a, b) _mm512_sub_ps(a, b)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VDIV(a, b) _mm512_div_ps(a, b)

#define VTR(v) lc_a_tr16(v)
#include "body.h"
#endif
