/* csrc/gradtables/tail.h — the scalar tail (k0..K-1) of one output row r, shared by every body
 * (the generic one in gradtables.h, the x86 ones): each sum in index order i = 0..NI-1 (not I:
 * complex.h, via SIMDe), a product rounded before its add.  Uses the body's names: which, out,
 * w, t, K, O, NI, r, f (row r's fixed codes), var (the inner codes), k0. */
#define LC_GT_SCALAR_TAIL                                                                              \
        for (; k0 < K; k0++) {                                                                          \
            const int32_t rr = (int32_t)f[k0] << 8;                                                     \
            float acc = 0.0f;                                                                           \
            for (int64_t i = 0; i < NI; i++)                                                             \
                acc += (which ? w[i * O + r] : w[r * O + i]) * t[rr | (int32_t)var[i * K + k0]];        \
            out[r * K + k0] = acc;                                                                      \
        }
