/* csrc/sgemm/x86/avx512.c — sgemm's AVX-512 F register tile (ops.matmul).
 *
 * Design: compiled alone with the AVX-512 flags (setup.py), and once more against
 * SIMDe for the tests (simde_sgemm_avx512.c; the file names differ from gemm's:
 * the SIMDe copies share one archive).  The packing of sgemm.h is unchanged: A
 * in 6-row panels (or read in place), B in 16-column panels.  One zmm holds a
 * panel's 16 columns of one row, so a 6-row x 2-panel tile (two B panels side by
 * side, 32 columns) keeps 12 zmm accumulators — the AVX2 tile's register count
 * at twice the width; per k step 2 panel loads and 6 broadcasts feed 12 FMAs.
 * Each element is one fused multiply-add chain over k in order (vfmadd rounds
 * once per step, as fmaf): the generic and AVX2 bodies' bits.
 *
 *   t   float (NP, 6, 16) tile sums, panel p at t + p*96     IN (init) / OUT
 *   ap  element (r, k) of A at ap[k*aks + r*ars], r < R       IN
 *   bp  NP panels (K, 16), bps floats apart                   IN
 * and the one-row product against prepacked panels (sgemv_panels, decoding's GEMV).
 */
#define LC_BODY_ISA avx512
#include "core/simd.h"
#include "sgemm/x86/x86.h"

#if LC_X86

#define LC_ST 96             /* floats per tile in t: 6 rows x 16 */
#define LC_SREP6(X) X(0) X(1) X(2) X(3) X(4) X(5)

#define LC_S_DECL(r) __m512 c##r##_0 = _mm512_setzero_ps(), c##r##_1 = c##r##_0;
#define LC_S_LOAD(r)                                                                \
    if (r < R) {                                                                    \
        c##r##_0 = _mm512_loadu_ps(t + r * 16);                                     \
        if (NP > 1) c##r##_1 = _mm512_loadu_ps(t + LC_ST + r * 16);                 \
    }
#define LC_S_ROW(r)                                                                 \
    if (r < R) {                                                                    \
        __m512 av = _mm512_set1_ps(a[r * ars]);                                     \
        c##r##_0 = _mm512_fmadd_ps(av, b0, c##r##_0);                               \
        if (NP > 1) c##r##_1 = _mm512_fmadd_ps(av, b1, c##r##_1);                   \
    }
#define LC_S_STORE(r)                                                               \
    if (r < R) {                                                                    \
        _mm512_storeu_ps(t + r * 16, c##r##_0);                                     \
        if (NP > 1) _mm512_storeu_ps(t + LC_ST + r * 16, c##r##_1);                 \
    }

LC_AI void lc_s_tile(float *t, const float *ap, int64_t aks, int64_t ars, const float *bp, int64_t bps, int64_t K,
                     int init, const int R, const int NP) {
    LC_SREP6(LC_S_DECL)
    if (init) { LC_SREP6(LC_S_LOAD) }   /* continue the chains of an earlier k block */
#pragma GCC unroll 4
    for (int64_t k = 0; k < K; k++) {
        const __m512 b0 = _mm512_loadu_ps(bp + k * 16);
        const __m512 b1 = NP > 1 ? _mm512_loadu_ps(bp + bps + k * 16) : b0;
        const float *a = ap + k * aks;
        LC_SREP6(LC_S_ROW)
    }
    LC_SREP6(LC_S_STORE)
}

#define LC_S_INST(R, NP)                                                                                      \
    static void lc_s_tile_##R##_##NP(float *t, const float *ap, int64_t aks, int64_t ars, const float *bp,     \
                                     int64_t bps, int64_t K, int init) {                                      \
        lc_s_tile(t, ap, aks, ars, bp, bps, K, init, R, NP);                                                  \
    }
#define LC_S_ROWS(X, NP) X(1, NP) X(2, NP) X(3, NP) X(4, NP) X(5, NP) X(6, NP)
LC_S_ROWS(LC_S_INST, 1)
LC_S_ROWS(LC_S_INST, 2)

typedef void (*lc_s_tile_fn)(float *, const float *, int64_t, int64_t, const float *, int64_t, int64_t, int);
#define LC_S_PTR(R, NP) lc_s_tile_##R##_##NP,
static const lc_s_tile_fn lc_s_tiles[2][6] = {{LC_S_ROWS(LC_S_PTR, 1)}, {LC_S_ROWS(LC_S_PTR, 2)}};

void LC_BODY(sgemm_tile)(float *t, const float *ap, int64_t aks, int64_t ars, const float *bp, int64_t bps,
                         int64_t K, int init, int R, int NP) {
    lc_s_tiles[NP > 1][(R < 1 ? 1 : R > 6 ? 6 : R) - 1](t, ap, aks, ars, bp, bps, K, init);
}

/* One row against prepacked panels (decoding's GEMV, sgemm.h's lc_sgemv_panels): a zmm
 * per panel (its 16 columns), eight panels at a time (eight independent chains, eight
 * weight streams), then four, then one; each column one fma chain over k from zero. */
LC_AI void lc_s_gemv(float *y, const float *x, const float *Bp, int64_t K, int64_t N, int64_t q, int accumulate,
                     const int NP) {
    __m512 a[8];
    const float *b[8];
    for (int p = 0; p < NP; p++) {
        a[p] = _mm512_setzero_ps();
        b[p] = Bp + (q + p) * K * 16;
    }
    for (int64_t k = 0; k < K; k++) {
        const __m512 xv = _mm512_set1_ps(x[k]);
        for (int p = 0; p < NP; p++) a[p] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b[p] + k * 16), a[p]);
    }
    for (int p = 0; p < NP; p++) {
        const int64_t c0 = (q + p) * 16, nc = N - c0 < 16 ? N - c0 : 16;
        float *yp = y + c0;
        if (nc == 16) {
            _mm512_storeu_ps(yp, accumulate ? _mm512_add_ps(_mm512_loadu_ps(yp), a[p]) : a[p]);
        } else {
            float t[16];
            _mm512_storeu_ps(t, a[p]);
            for (int64_t c = 0; c < nc; c++) yp[c] = accumulate ? yp[c] + t[c] : t[c];
        }
    }
}

void LC_BODY(sgemv_panels)(float *y, const float *x, const float *Bp, int64_t K, int64_t N, int64_t q0, int64_t q1,
                           int accumulate) {
    int64_t q = q0;
    for (; q + 8 <= q1; q += 8) lc_s_gemv(y, x, Bp, K, N, q, accumulate, 8);
    for (; q + 4 <= q1; q += 4) lc_s_gemv(y, x, Bp, K, N, q, accumulate, 4);
    for (; q < q1; q++) lc_s_gemv(y, x, Bp, K, N, q, accumulate, 1);
}

#endif /* LC_X86 */
