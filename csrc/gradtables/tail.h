/* csrc/gradtables/x86/tail.h — the scalar tail (k0..K-1) of one output row r, shared by the x86
 * bodies: the generic body's sum in index order i = 0..NI-1 (not I: complex.h, via SIMDe) (gradtables/gradtables.h). */
#define LC_GT_SCALAR_TAIL                                                                              \
        for (; k0 < K; k0++) {                                                                          \
            const int32_t rr = (int32_t)f[k0] << 8;                                                     \
            float acc = 0.0f;                                                                           \
            for (int64_t i = 0; i < NI; i++)                                                             \
                acc += (which ? w[i * O + r] : w[r * O + i]) * t[rr | (int32_t)var[i * K + k0]];        \
            out[r * K + k0] = acc;                                                                      \
        }
