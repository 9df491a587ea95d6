/* csrc/elementwise/x86/x86.h — the element-wise family's per-ISA bodies that live in
 * their own translation units (csrc/elementwise/x86/<isa>.c, each compiled alone with
 * that ISA's flags; the simde_<isa>.c copies, built against SIMDe with AVX2+FMA
 * flags, back the test-only extension lutcore._native._simde_ew).
 *
 * Each body takes one chunk (elementwise.h splits the array into LC_EW_CHUNK
 * pieces for the threads) and has the contract of elementwise.h's generic body
 * of the same name, bit for bit:
 *   requant_clamp  out int8 (n)   <- acc int32 (n), shift, clamp [lo, hi]
 *   fp16_encode    out uint16 (n) <- x float32 (n), mode 0 nearest / 1 truncate
 *   fp16_decode    out float32 (n)<- h uint16 (n)
 *   fp16_round     out float32 (n)<- x float32 (n), mode
 *   relu8 (VBMI)   out int8 (n)   <- lut[x & 0xff], x int8 (n), lut int8 (256)
 */
#ifndef LUTCORE_ELEMENTWISE_X86_H
#define LUTCORE_ELEMENTWISE_X86_H

#include <stdint.h>

#define LC_EW_X86_DECLARE(P)                                                                      \
    void P##ew_requant_clamp(int8_t *out, const int32_t *acc, int64_t n, int shift, int lo, int hi); \
    void P##ew_fp16_encode(uint16_t *out, const float *x, int64_t n, int mode);                  \
    void P##ew_fp16_decode(float *out, const uint16_t *h, int64_t n);                            \
    void P##ew_fp16_round(float *out, const float *x, int64_t n, int mode);
#define LC_EW_X86_DECLARE_VBMI(P) void P##ew_relu8(int8_t *out, const int8_t *x, int64_t n, const int8_t *lut);

/* AVX-512 F/BW/VL/DQ, and + VBMI (vpermi2b over the 256-byte table) */
LC_EW_X86_DECLARE(lc_avx512_)
LC_EW_X86_DECLARE(lc_simde_avx512_)
LC_EW_X86_DECLARE_VBMI(lc_avx512vbmi_)
LC_EW_X86_DECLARE_VBMI(lc_simde_avx512vbmi_)

#endif /* LUTCORE_ELEMENTWISE_X86_H */
