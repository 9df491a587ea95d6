/* csrc/attn/x86/avx512.c — decode attention's AVX-512 bodies (csrc/attn/attn.h's contract).
 *
 * Design: compiled alone with the AVX-512 flags (setup.py), and once more against SIMDe
 * for the tests (the generated SIMDe twin).  csrc/attn/vattn.h, written once over
 * csrc/core/vec.h, at 16 lanes (attn.h compiles it at 8 for AVX2):
 *   attn_scores  16 keys at a time: a 16 x 16 transpose puts key j in lane j of kt's
 *                row i, then up to 8 query rows run their fma chains over i in order
 *   attn_values  16 dims a vector: 128 dims of 2 rows, 64 of 4 rows or 16 of 8 rows of
 *                running chains over j (each V row loaded once for those rows); the last
 *                dims (< 16) one masked vector
 * so every output is the sgemm's in-order fused multiply-add chain from zero (vfmadd and
 * fmaf round once per step): the generic and AVX2 bodies' bits.
 *
 *   sc  (R, lds) OUT   q (R, ldq) IN   K (S, hd) IN   kt  hd * 16 floats of scratch
 *   out (R, ldo) OUT   p (R, ldp) IN   V (S, hd) IN
 */
#define LC_BODY_ISA avx512
#include <math.h>
#include "core/simd.h"
#include "attn/x86/x86.h"
#include "core/transpose.h"

/* csrc/attn/vattn.h at 16 lanes (attn.h compiles it at 8) */
#define LC_VEC_W 16
#include "core/vec.h"
#undef LC_VEC_W
#define LC_VR_NAME(n) LC_BODY(n)
#define LC_VR_FN
#define LC_VA_TR(v) lc_a_tr16(v)
#include "attn/vattn.h"
