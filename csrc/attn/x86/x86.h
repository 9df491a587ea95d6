/* csrc/attn/x86/x86.h — decode attention's AVX-512 bodies, in their own translation unit
 * (csrc/attn/x86/avx512.c, compiled alone with the AVX-512 flags; the simde_avx512.c copy,
 * built against SIMDe with AVX2+FMA flags, backs the test-only extension
 * lutcore._native._simde_decode).  The contract, layouts and bits of attn.h's
 * functions of the same name:
 *   attn_scores  sc (R, lds) <- q (R, ldq) . K (S, hd) rows     kt: LC_ATTN_KT(hd) floats
 *   attn_values  out (R, ldo) <- p (R, ldp) @ V (S, hd)
 */
#ifndef LUTCORE_ATTN_X86_H
#define LUTCORE_ATTN_X86_H

#include <stdint.h>

#define LC_ATTN_X86_DECLARE(P)                                                                           \
    void P##attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,      \
                        int64_t S, int64_t hd, float *kt);                                                \
    void P##attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,     \
                        int64_t S, int64_t hd);

LC_ATTN_X86_DECLARE(lc_avx512_)
LC_ATTN_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_ATTN_X86_H */
