/* csrc/mxgemm/x86/avx512.c — the MX GEMM's AVX-512 F/BW/DQ body, both modes (mxgemm/mxgemm.h: the
 * contract; job.h: the shared steps).  Compiled alone with its flags (setup.py) and once more
 * against SIMDe for the tests.  Every block sum is exact, so the order of the additions here
 * (other than the generic body's) changes no bit; the per-block fold is the generic one, lane
 * for lane: fl32(S), times 2^(xa + xb) in float64, fl32, added to y in float32.
 *
 * The FMA route (the exact table of the decoded values, one float64 part): a float64 GEMM per
 * block.  A unit (rows x 32 columns) decodes a chunk of B's columns once (Bd: kc x 32 float64,
 * vb[code]); a tile of up to 6 rows x 4 zmm keeps 24 accumulators while per k each row's value
 * va[A[m,k]] is broadcast into 4 FMAs.  Products of decoded values are exact and so is every
 * partial sum (the route's condition), so FMA adds them exactly.
 *
 *   Bd   float64 (kc, 32)          decoded B of the chunk (0 past nc)            scratch
 *   yt   float32 (rows, 32)        the unit's y                                   scratch
 *   sp   float64 (rows, 32)        accumulators across chunks (bk > LC_MX_KCF)    scratch
 *
 * Any table: row tables (the gemm family's trick).  Per k of a chunk of kc <= 32 and the unit's
 * 32 columns, P_k[r][j] = T'[r][B[k, n0 + sigma(j)]] for the table's reduced rows r (T[a] =
 * afac[a] T'[rep[a]], afac a signed power of two: rows equal up to sign and exponent share one):
 * 16 x 16 transposes of the transposed reduced table tt — with many reduced rows (the arithmetic
 * form rep = a & rep_mask) only for the 16-row groups some row of the unit uses at that k.  Then
 * per row m and k one row P_k[rep[A[m,k]]] gives 32 products: widened to float64 (HI32: the word
 * is the float64's high half, a dword unpack with zeros — sigma puts the columns in order; F32:
 * vcvtps2pd) and added with FMA by afac (exact).  Two parts: v = x afac split at 2^c by the magic
 * constant (hi = (v + C) - C, lo = v - hi), each summed on its own, fl32(hi + lo) by TwoSum
 * rounded to odd.  Tiles: 4 rows x 4 zmm (one part), 3 rows x 8 zmm (two).
 *
 *   P    uint32 (kc, R16 x 32 + 16)  the chunk's row tables (a line of padding)   scratch
 *   yt   float32 (rows, 32)        the unit's y                                   scratch
 *   sp   float64 (rows, np, 32)    accumulators across chunks (bk > 32)           scratch
 *
 * Narrow mode: the same row tables (the table's own values, one "part"); per row and k the 32
 * products p = x afac 2^(xa + xb) (exact) step 4 zmm of registers in k order (lc_mx_step8: TwoSum
 * rounded to odd, then the integer rounding between exact power-of-two scalings, overflow and
 * specials — job.h's steps lane for lane), promoted into y where k's count says; the registers
 * live in ac between chunks.  Tiles of 2 rows.
 *
 *   ac   float64 (rows, 32)        the unit's narrow registers                    scratch
 */
#define LC_BODY_ISA avx512
#include "core/simd.h"
#include "mxgemm/x86/x86.h"

#if LC_X86

#define LC_MX_KCF 256      /* k per decoded B chunk, FMA route */
#define LC_MX_KCT 32       /* k per row-table chunk */
#define LC_MX_FR 6         /* rows per FMA tile */
#define LC_MX_TR 4         /* rows per row-table tile */

static inline size_t lc_mx_al(size_t n) { return (n + 63) & ~(size_t)63; }

/* float32 <-> float64, 8 lanes (vcvtps2pd / vcvtpd2ps), and rounding to an integer (vrndscalepd);
 * SIMDe 0.8.2 has no conversions and its rounding toward zero rounds to nearest: the twin works
 * lane by lane with C (exact widening; narrowing to nearest even; trunc, nearbyint), as the
 * instructions do */
#if defined(LC_SIMDE)
static inline __m512d lc_mx_cvtps_pd(__m256 f) {
    float t[8];
    double d[8];
    _mm256_storeu_ps(t, f);
    for (int i = 0; i < 8; i++) d[i] = (double)t[i];
    return _mm512_loadu_pd(d);
}
static inline __m256 lc_mx_cvtpd_ps(__m512d x) {
    double d[8];
    float t[8];
    _mm512_storeu_pd(d, x);
    for (int i = 0; i < 8; i++) t[i] = (float)d[i];
    return _mm256_loadu_ps(t);
}
/* to an integer, nearest even or toward zero (SIMDe's roundscale does not honour the latter) */
static inline __m512d lc_mx_round_pd(__m512d x, int tz) {
    double d[8];
    _mm512_storeu_pd(d, x);
    for (int i = 0; i < 8; i++) d[i] = tz ? trunc(d[i]) : nearbyint(d[i]);
    return _mm512_loadu_pd(d);
}
#else
#define lc_mx_cvtps_pd(f) _mm512_cvtps_pd(f)
#define lc_mx_cvtpd_ps(x) _mm512_cvtpd_ps(x)
#define lc_mx_round_pd(x, tz) ((tz) ? _mm512_roundscale_pd((x), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC) \
                                    : _mm512_roundscale_pd((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#endif
static inline int64_t lc_mx_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* y[0..8) += fl32(fl32(S) * (sa * sb)) — the generic fold, 8 lanes */
LC_AI void lc_mx_fold8(float *y, __m512d S, __m512d sa, __m512d sb) {
    __m256 f = lc_mx_cvtpd_ps(S);
    __m256 u = lc_mx_cvtpd_ps(_mm512_mul_pd(lc_mx_cvtps_pd(f), _mm512_mul_pd(sa, sb)));
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_loadu_ps(y), u));
}

/* the float64 rounded to odd from hi + lo where hi is finite, else hi (job.h lc_mx_sum32's
 * argument, lane for lane) */
LC_AI __m512d lc_mx_odd8(__m512d hi, __m512d lo) {
    const __m512d z = _mm512_setzero_pd();
    const __m512i one = _mm512_set1_epi64(1);
    __mmask8 fin = _mm512_cmp_pd_mask(_mm512_sub_pd(hi, hi), z, _CMP_EQ_OQ);
    __m512d s = _mm512_add_pd(hi, lo), bb = _mm512_sub_pd(s, hi);
    __m512d e = _mm512_add_pd(_mm512_sub_pd(hi, _mm512_sub_pd(s, bb)), _mm512_sub_pd(lo, bb));
    __m512i u = _mm512_castpd_si512(s);
    __mmask8 go = fin & _mm512_cmp_pd_mask(e, z, _CMP_NEQ_OQ) & _mm512_testn_epi64_mask(u, one);
    __mmask8 up = (__mmask8)~(_mm512_cmp_pd_mask(e, z, _CMP_GT_OQ) ^ _mm512_cmp_pd_mask(s, z, _CMP_GT_OQ));
    u = _mm512_mask_add_epi64(u, go & up, u, one);
    u = _mm512_mask_sub_epi64(u, go & (__mmask8)~up, u, one);
    return _mm512_mask_blend_pd(fin, hi, _mm512_castsi512_pd(u));
}

/* Y[m0 + r, n0 + c] = canon(yt[r][c]) for c < nc */
static void lc_mx_store(const lc_mx_job *j, const float *yt, int ld, int64_t m0, int64_t rows, int64_t n0, int nc) {
    for (int64_t r = 0; r < rows; r++) {
        float *y = j->Y + (m0 + r) * j->N + n0;
        for (int c = 0; c < nc; c++) y[c] = lc_mx_canon(yt[r * ld + c]);
    }
}

/* ------------------------------------------------------------------ the FMA route */
static inline int64_t lc_mx_kcf(const lc_mx_job *j) { return j->bk < LC_MX_KCF ? j->bk : LC_MX_KCF; }

static size_t lc_mx_fma_ws(const lc_mx_job *j) {
    size_t n = lc_mx_al((size_t)lc_mx_kcf(j) * 32 * 8) + lc_mx_al((size_t)j->rows_per * 32 * 4);
    if (j->bk > LC_MX_KCF) n += lc_mx_al((size_t)j->rows_per * 32 * 8);
    return n;
}

#define LC_MX_REP6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define LC_MX_FDECL(r) __m512d c##r##0, c##r##1, c##r##2, c##r##3; const uint8_t *a##r = A + (r < R ? r : 0) * Kp;
#define LC_MX_FINIT(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (first) {                                                                                    \
            c##r##0 = c##r##1 = c##r##2 = c##r##3 = _mm512_setzero_pd();                                \
        } else {                                                                                        \
            c##r##0 = _mm512_load_pd(sp + r * 32); c##r##1 = _mm512_load_pd(sp + r * 32 + 8);           \
            c##r##2 = _mm512_load_pd(sp + r * 32 + 16); c##r##3 = _mm512_load_pd(sp + r * 32 + 24);     \
        }                                                                                               \
    }
#define LC_MX_FROW(r)                                                                                   \
    if (r < R) {                                                                                        \
        __m512d av = _mm512_set1_pd(va[a##r[k]]);                                                       \
        c##r##0 = _mm512_fmadd_pd(b0, av, c##r##0); c##r##1 = _mm512_fmadd_pd(b1, av, c##r##1);         \
        c##r##2 = _mm512_fmadd_pd(b2, av, c##r##2); c##r##3 = _mm512_fmadd_pd(b3, av, c##r##3);         \
    }
#define LC_MX_FDONE(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (last) {                                                                                     \
            __m512d sa = _mm512_set1_pd(scale[SA[r * nblk]]);                                            \
            lc_mx_fold8(yt + r * 32, c##r##0, sa, sb0); lc_mx_fold8(yt + r * 32 + 8, c##r##1, sa, sb1);  \
            lc_mx_fold8(yt + r * 32 + 16, c##r##2, sa, sb2); lc_mx_fold8(yt + r * 32 + 24, c##r##3, sa, sb3); \
        } else {                                                                                        \
            _mm512_store_pd(sp + r * 32, c##r##0); _mm512_store_pd(sp + r * 32 + 8, c##r##1);           \
            _mm512_store_pd(sp + r * 32 + 16, c##r##2); _mm512_store_pd(sp + r * 32 + 24, c##r##3);     \
        }                                                                                               \
    }

/* R rows (A at their chunk start, Kp apart; SA at their block, nblk apart) x 32 columns over kc k:
 * sums into the accumulators (from sp unless first), then folded into yt (last) or kept in sp */
LC_AI void lc_mx_fma_tile(const uint8_t *A, int64_t Kp, const uint8_t *SA, int64_t nblk, const double *va,
                          const double *Bd, int64_t kc, const double *scale, const double *sbv, float *yt,
                          double *sp, int first, int last, const int R) {
    LC_MX_REP6(LC_MX_FDECL)
    LC_MX_REP6(LC_MX_FINIT)
    for (int64_t k = 0; k < kc; k++) {
        const double *bd = Bd + k * 32;
        __m512d b0 = _mm512_load_pd(bd), b1 = _mm512_load_pd(bd + 8), b2 = _mm512_load_pd(bd + 16),
                b3 = _mm512_load_pd(bd + 24);
        LC_MX_REP6(LC_MX_FROW)
    }
    __m512d sb0 = _mm512_loadu_pd(sbv), sb1 = _mm512_loadu_pd(sbv + 8), sb2 = _mm512_loadu_pd(sbv + 16),
            sb3 = _mm512_loadu_pd(sbv + 24);
    LC_MX_REP6(LC_MX_FDONE)
}

typedef void (*lc_mx_fma_fn)(const uint8_t *, int64_t, const uint8_t *, int64_t, const double *, const double *,
                             int64_t, const double *, const double *, float *, double *, int, int);
#define LC_MX_FDEF(R)                                                                                   \
    static void lc_mx_fma_##R(const uint8_t *A, int64_t Kp, const uint8_t *SA, int64_t nblk, const double *va, \
                              const double *Bd, int64_t kc, const double *scale, const double *sbv, float *yt, \
                              double *sp, int first, int last) {                                        \
        lc_mx_fma_tile(A, Kp, SA, nblk, va, Bd, kc, scale, sbv, yt, sp, first, last, R);                \
    }
LC_MX_FDEF(1) LC_MX_FDEF(2) LC_MX_FDEF(3) LC_MX_FDEF(4) LC_MX_FDEF(5) LC_MX_FDEF(6)
static const lc_mx_fma_fn lc_mx_fma_tiles[LC_MX_FR + 1] = {0, lc_mx_fma_1, lc_mx_fma_2, lc_mx_fma_3,
                                                           lc_mx_fma_4, lc_mx_fma_5, lc_mx_fma_6};

static void lc_mx_fma_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, char *ws) {
    const lc_mx_products *P = j->P;
    const int64_t N = j->N, K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, rows = m1 - m0, kcf = lc_mx_kcf(j);
    double *Bd = (double *)ws;
    float *yt = (float *)(ws + lc_mx_al((size_t)kcf * 32 * 8));
    double *sp = (double *)((char *)yt + lc_mx_al((size_t)j->rows_per * 32 * 4));
    double sbv[32];
    memset(yt, 0, (size_t)rows * 32 * sizeof(float));
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t k0 = b * bk, k1 = lc_mx_min(k0 + bk, K);
        for (int c = 0; c < 32; c++) sbv[c] = c < nc ? P->scale[j->SB[b * N + n0 + c]] : 1.0;
        for (int64_t c0 = k0; c0 < k1; c0 += kcf) {
            const int64_t c1 = lc_mx_min(c0 + kcf, k1);
            for (int64_t k = c0; k < c1; k++) {
                const uint8_t *bk_ = j->B + k * N + n0;
                double *bd = Bd + (k - c0) * 32;
                for (int c = 0; c < 32; c++) bd[c] = c < nc ? P->vb[bk_[c]] : 0.0;
            }
            for (int64_t r = 0; r < rows; r += LC_MX_FR) {
                int R = (int)lc_mx_min(LC_MX_FR, rows - r);
                lc_mx_fma_tiles[R](j->A + (m0 + r) * Kp + c0, Kp, j->SA + (m0 + r) * nblk + b, nblk, P->va, Bd,
                                   c1 - c0, P->scale, sbv, yt + r * 32, sp + r * 32, c0 == k0, c1 == k1);
            }
        }
    }
    lc_mx_store(j, yt, 32, m0, rows, n0, nc);
}

/* ------------------------------------------------------------------ any table: row tables */
static inline int64_t lc_mx_kct(const lc_mx_job *j) { return j->bk < LC_MX_KCT ? j->bk : LC_MX_KCT; }
/* words from one k's row tables to the next: R16 rows of 32 words and one line more (a power-of-two
 * stride would put every k's row r in the same few L1 sets) */
static inline int64_t lc_mx_pstride(int R16) { return (int64_t)R16 * 32 + 16; }

static size_t lc_mx_table_ws(const lc_mx_job *j) {
    const lc_mx_products *P = j->P;
    size_t n = lc_mx_al((size_t)lc_mx_kct(j) * lc_mx_pstride(P->R16) * 4) + lc_mx_al((size_t)j->rows_per * 32 * 4);
    if (j->bk > LC_MX_KCT) n += lc_mx_al((size_t)j->rows_per * 32 * 8 * P->nparts);
    return n;
}

/* 16 x 16 transpose of 32-bit words: r[c][i] -> r[i][c] */
LC_AI void lc_mx_tr16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {       /* u[i + e] lane L: element 4L + e of rows i .. i+3 */
        u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (int e = 0; e < 4; e++) {           /* element 4L + e: lane L of u[e], u[4 + e], u[8 + e], u[12 + e] */
        __m512 xl = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88), xh = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xDD);
        __m512 yl = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
        __m512 yh = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xDD);
        r[e] = _mm512_shuffle_f32x4(xl, yl, 0x88);
        r[8 + e] = _mm512_shuffle_f32x4(xl, yl, 0xDD);
        r[4 + e] = _mm512_shuffle_f32x4(xh, yh, 0x88);
        r[12 + e] = _mm512_shuffle_f32x4(xh, yh, 0xDD);
    }
}

/* position j of a row table's 16-column half holds column sigma(j) of the half: HI32's dword
 * unpacks then give its columns 0-7 and 8-15 in order */
static const int lc_mx_sigma_hi32[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};

/* used[kk] (kk < kc): bit g set when a row in [0, rows) has rep >> 4 == g at k0 + kk; the
 * reduction's arithmetic form (rep = code & rep_mask), or every group (rep_mask < 0: few) */
static void lc_mx_used(uint16_t *used, const uint8_t *A, int64_t Kp, int64_t rows, int64_t kc, int rep_mask) {
    if (rep_mask < 0 || rep_mask < 32) {
        for (int64_t kk = 0; kk < kc; kk++) used[kk] = 0xFFFF;
        return;
    }
    if (kc == 32) {
        const __m512i rm = _mm512_set1_epi16((short)rep_mask), one = _mm512_set1_epi16(1);
        __m512i acc = _mm512_setzero_si512();
        for (int64_t r = 0; r < rows; r++) {
            /* sign-extended (SIMDe 0.8.2 has no zero-extension); and rep_mask (< 256) clears the high byte */
            __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(A + r * Kp)));
            acc = _mm512_or_si512(acc, _mm512_sllv_epi16(one, _mm512_srli_epi16(_mm512_and_si512(w, rm), 4)));
        }
        _mm512_storeu_si512((void *)used, acc);
        return;
    }
    for (int64_t kk = 0; kk < kc; kk++) used[kk] = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kk = 0; kk < kc; kk++) used[kk] |= (uint16_t)(1u << ((A[r * Kp + kk] & rep_mask) >> 4));
}

/* P_kk (R16 x 32 words) for k = k0 + kk, kk < kc: the used 16-row groups of the transposed table */
static void lc_mx_build(uint32_t *Pw, const lc_mx_job *j, const uint16_t *used, int64_t k0, int64_t kc, int64_t n0,
                        int nc) {
    const lc_mx_products *P = j->P;
    const int R16 = P->R16;
    const int *sg = P->expand == LC_MX_HI32 ? lc_mx_sigma_hi32 : NULL;
    for (int64_t kk = 0; kk < kc; kk++) {
        const uint8_t *bk_ = j->B + (k0 + kk) * j->N + n0;
        const uint32_t *src[32];
        for (int c = 0; c < 32; c++) {
            int col = (c & 16) + (sg ? sg[c & 15] : (c & 15));
            src[c] = P->tt + (int64_t)(col < nc ? bk_[col] : 0) * R16;
        }
        uint32_t *Pk = Pw + kk * lc_mx_pstride(R16);
        for (int g = 0; g * 16 < R16; g++) {
            if (!((used[kk] >> g) & 1)) continue;
            for (int h = 0; h < 2; h++) {
                __m512 r[16];
                for (int c = 0; c < 16; c++) r[c] = _mm512_loadu_ps((const float *)(src[16 * h + c] + g * 16));
                lc_mx_tr16(r);
                for (int i = 0; i < 16; i++) _mm512_store_ps((float *)(Pk + (g * 16 + i) * 32 + 16 * h), r[i]);
            }
        }
    }
}

/* one row table row's 32 products as float64: x0..x3 = columns 0-7, 8-15, 16-23, 24-31 */
#define LC_MX_EXPAND(p)                                                                                 \
    __m512d x0, x1, x2, x3;                                                                             \
    if (EX == LC_MX_HI32) {                                                                             \
        __m512i w0_ = _mm512_load_si512((const void *)(p)), w1_ = _mm512_load_si512((const void *)((p) + 16)); \
        x0 = _mm512_castsi512_pd(_mm512_unpacklo_epi32(zi, w0_));                                       \
        x1 = _mm512_castsi512_pd(_mm512_unpackhi_epi32(zi, w0_));                                       \
        x2 = _mm512_castsi512_pd(_mm512_unpacklo_epi32(zi, w1_));                                       \
        x3 = _mm512_castsi512_pd(_mm512_unpackhi_epi32(zi, w1_));                                       \
    } else {                                                                                            \
        x0 = lc_mx_cvtps_pd(_mm256_load_ps((const float *)(p)));                                       \
        x1 = lc_mx_cvtps_pd(_mm256_load_ps((const float *)(p) + 8));                                   \
        x2 = lc_mx_cvtps_pd(_mm256_load_ps((const float *)(p) + 16));                                  \
        x3 = lc_mx_cvtps_pd(_mm256_load_ps((const float *)(p) + 24));                                  \
    }
#define LC_MX_REP4(X) X(0) X(1) X(2) X(3)
#define LC_MX_TDECL(r)                                                                                  \
    __m512d h##r##0, h##r##1, h##r##2, h##r##3, l##r##0, l##r##1, l##r##2, l##r##3;                    \
    const uint8_t *a##r = A + (r < R ? r : 0) * Kp;
#define LC_MX_TINIT(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (first) {                                                                                    \
            h##r##0 = h##r##1 = h##r##2 = h##r##3 = _mm512_setzero_pd();                                \
            l##r##0 = l##r##1 = l##r##2 = l##r##3 = h##r##0;                                            \
        } else {                                                                                        \
            const double *s_ = sp + r * 32 * NP;                                                        \
            h##r##0 = _mm512_load_pd(s_); h##r##1 = _mm512_load_pd(s_ + 8);                             \
            h##r##2 = _mm512_load_pd(s_ + 16); h##r##3 = _mm512_load_pd(s_ + 24);                       \
            l##r##0 = l##r##1 = l##r##2 = l##r##3 = h##r##0;                                            \
            if (NP > 1) {                                                                               \
                l##r##0 = _mm512_load_pd(s_ + 32); l##r##1 = _mm512_load_pd(s_ + 40);                   \
                l##r##2 = _mm512_load_pd(s_ + 48); l##r##3 = _mm512_load_pd(s_ + 56);                   \
            }                                                                                           \
        }                                                                                               \
    }
/* v = x afac exactly, so fma(x, afac, C) is fl(v + C) and fma(x, afac, -hi) is v - hi, exact */
#define LC_MX_TSPLIT(r, i)                                                                              \
    {                                                                                                   \
        __m512d g_ = _mm512_sub_pd(_mm512_fmadd_pd(x##i, s_, C), C);                                    \
        h##r##i = _mm512_add_pd(h##r##i, g_);                                                           \
        l##r##i = _mm512_add_pd(l##r##i, _mm512_fmsub_pd(x##i, s_, g_));                                \
    }
#define LC_MX_TROW(r)                                                                                   \
    if (r < R) {                                                                                        \
        unsigned c_ = a##r[k];                                                                          \
        const uint32_t *p_ = Pk + (int64_t)rep[c_] * 32;                                                \
        __m512d s_ = _mm512_set1_pd(afac[c_]);                                                          \
        LC_MX_EXPAND(p_)                                                                                \
        if (NP == 1) {                                                                                  \
            h##r##0 = _mm512_fmadd_pd(x0, s_, h##r##0); h##r##1 = _mm512_fmadd_pd(x1, s_, h##r##1);     \
            h##r##2 = _mm512_fmadd_pd(x2, s_, h##r##2); h##r##3 = _mm512_fmadd_pd(x3, s_, h##r##3);     \
        } else {                                                                                        \
            LC_MX_TSPLIT(r, 0) LC_MX_TSPLIT(r, 1) LC_MX_TSPLIT(r, 2) LC_MX_TSPLIT(r, 3)                 \
        }                                                                                               \
    }
#define LC_MX_TFOLD(r, i)                                                                               \
    lc_mx_fold8(yt + r * 32 + 8 * i, NP == 1 ? h##r##i : lc_mx_odd8(h##r##i, l##r##i), sa, sb##i);
#define LC_MX_TDONE(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (last) {                                                                                     \
            __m512d sa = _mm512_set1_pd(scale[SA[r * nblk]]);                                            \
            LC_MX_TFOLD(r, 0) LC_MX_TFOLD(r, 1) LC_MX_TFOLD(r, 2) LC_MX_TFOLD(r, 3)                     \
        } else {                                                                                        \
            double *s_ = sp + r * 32 * NP;                                                              \
            _mm512_store_pd(s_, h##r##0); _mm512_store_pd(s_ + 8, h##r##1);                             \
            _mm512_store_pd(s_ + 16, h##r##2); _mm512_store_pd(s_ + 24, h##r##3);                       \
            if (NP > 1) {                                                                               \
                _mm512_store_pd(s_ + 32, l##r##0); _mm512_store_pd(s_ + 40, l##r##1);                   \
                _mm512_store_pd(s_ + 48, l##r##2); _mm512_store_pd(s_ + 56, l##r##3);                   \
            }                                                                                           \
        }                                                                                               \
    }

/* R rows (A at their chunk start, Kp apart; SA at their block) x 32 columns over the chunk's kc
 * row tables Pw, the products in form EX, NP parts */
LC_AI void lc_mx_table_tile(const uint8_t *A, int64_t Kp, const uint8_t *SA, int64_t nblk, const uint32_t *Pw,
                            int64_t kc, int R16, const uint8_t *rep, const double *afac, double split,
                            const double *scale, const double *sbv, float *yt, double *sp, int first, int last,
                            const int R, const int NP, const int EX) {
    const __m512i zi = _mm512_setzero_si512();
    const __m512d C = _mm512_set1_pd(split);
    LC_MX_REP4(LC_MX_TDECL)
    LC_MX_REP4(LC_MX_TINIT)
    for (int64_t k = 0; k < kc; k++) {
        const uint32_t *Pk = Pw + k * lc_mx_pstride(R16);
        LC_MX_REP4(LC_MX_TROW)
    }
    __m512d sb0 = _mm512_loadu_pd(sbv), sb1 = _mm512_loadu_pd(sbv + 8), sb2 = _mm512_loadu_pd(sbv + 16),
            sb3 = _mm512_loadu_pd(sbv + 24);
    LC_MX_REP4(LC_MX_TDONE)
    (void)zi, (void)C;
}

typedef void (*lc_mx_table_fn)(const uint8_t *, int64_t, const uint8_t *, int64_t, const uint32_t *, int64_t, int,
                               const uint8_t *, const double *, double, const double *, const double *, float *,
                               double *, int, int);
#define LC_MX_TDEF(R, NP, EX)                                                                           \
    static void lc_mx_table_##R##_##NP##_##EX(const uint8_t *A, int64_t Kp, const uint8_t *SA, int64_t nblk, \
                                              const uint32_t *Pw, int64_t kc, int R16, const uint8_t *rep,  \
                                              const double *afac, double split, const double *scale,      \
                                              const double *sbv, float *yt, double *sp, int first, int last) { \
        lc_mx_table_tile(A, Kp, SA, nblk, Pw, kc, R16, rep, afac, split, scale, sbv, yt, sp, first, last, R, NP, EX); \
    }
LC_MX_TDEF(1, 1, 0) LC_MX_TDEF(2, 1, 0) LC_MX_TDEF(3, 1, 0) LC_MX_TDEF(4, 1, 0)
LC_MX_TDEF(1, 1, 1) LC_MX_TDEF(2, 1, 1) LC_MX_TDEF(3, 1, 1) LC_MX_TDEF(4, 1, 1)
LC_MX_TDEF(1, 2, 0) LC_MX_TDEF(2, 2, 0) LC_MX_TDEF(3, 2, 0)
LC_MX_TDEF(1, 2, 1) LC_MX_TDEF(2, 2, 1) LC_MX_TDEF(3, 2, 1)
/* [parts - 1][expand][rows]: 4 rows a tile with one part (16 accumulators), 3 with two (24) */
static const int lc_mx_table_rows[2] = {4, 3};
static const lc_mx_table_fn lc_mx_table_tiles[2][2][LC_MX_TR + 1] = {
    {{0, lc_mx_table_1_1_0, lc_mx_table_2_1_0, lc_mx_table_3_1_0, lc_mx_table_4_1_0},
     {0, lc_mx_table_1_1_1, lc_mx_table_2_1_1, lc_mx_table_3_1_1, lc_mx_table_4_1_1}},
    {{0, lc_mx_table_1_2_0, lc_mx_table_2_2_0, lc_mx_table_3_2_0, 0},
     {0, lc_mx_table_1_2_1, lc_mx_table_2_2_1, lc_mx_table_3_2_1, 0}}};

static void lc_mx_table_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, char *ws) {
    const lc_mx_products *P = j->P;
    const int64_t N = j->N, K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, rows = m1 - m0, kct = lc_mx_kct(j);
    const int np = P->nparts, tr = lc_mx_table_rows[np - 1];
    uint32_t *Pw = (uint32_t *)ws;
    float *yt = (float *)(ws + lc_mx_al((size_t)kct * lc_mx_pstride(P->R16) * 4));
    double *sp = (double *)((char *)yt + lc_mx_al((size_t)j->rows_per * 32 * 4));
    const lc_mx_table_fn *tiles = lc_mx_table_tiles[np - 1][P->expand == LC_MX_HI32];
    uint16_t used[LC_MX_KCT] __attribute__((aligned(64)));
    double sbv[32];
    memset(yt, 0, (size_t)rows * 32 * sizeof(float));
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t k0 = b * bk, k1 = lc_mx_min(k0 + bk, K);
        for (int c = 0; c < 32; c++) sbv[c] = c < nc ? P->scale[j->SB[b * N + n0 + c]] : 1.0;
        for (int64_t c0 = k0; c0 < k1; c0 += kct) {
            const int64_t c1 = lc_mx_min(c0 + kct, k1);
            lc_mx_used(used, j->A + m0 * Kp + c0, Kp, rows, c1 - c0, P->rep_mask);
            lc_mx_build(Pw, j, used, c0, c1 - c0, n0, nc);
            for (int64_t r = 0; r < rows; r += tr) {
                int R = (int)lc_mx_min(tr, rows - r);
                tiles[R](j->A + (m0 + r) * Kp + c0, Kp, j->SA + (m0 + r) * nblk + b, nblk, Pw, c1 - c0, P->R16,
                         P->rep, P->afac, P->split, P->scale, sbv, yt + r * 32, sp + r * 32 * np, c0 == k0,
                         c1 == k1);
            }
        }
    }
    lc_mx_store(j, yt, 32, m0, rows, n0, nc);
}

/* ------------------------------------------------------------------ narrow mode */
/* The register's step, 8 lanes: acc + p rounded to odd (TwoSum), then to mbits + 1 bits in
 * float32's exponent range, nearest even or toward zero (TZ), overflowing to +-inf or the maximum;
 * a non-finite acc + p passes (IEEE); zeros +0 — job.h's lc_mx_add_odd and lc_mx_narrow, lane for
 * lane.  The quantum 2^q from the bits (q = max(e, -126) - mbits): scalings by 2^-q and 2^q are
 * exact, the integer rounding between them the only rounding. */
LC_AI __m512d lc_mx_step8(__m512d acc, __m512d p, __m512i mb, __m512d lim, __m512d mx, const int TZ) {
    const __m512d z = _mm512_setzero_pd();
    const __m512i one = _mm512_set1_epi64(1), bias = _mm512_set1_epi64(1023), emin = _mm512_set1_epi64(-126);
    const __m512i absm = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
    __m512d s = _mm512_add_pd(acc, p), bb = _mm512_sub_pd(s, acc);
    __m512d e = _mm512_add_pd(_mm512_sub_pd(acc, _mm512_sub_pd(s, bb)), _mm512_sub_pd(p, bb));
    __mmask8 fin = _mm512_cmp_pd_mask(_mm512_sub_pd(s, s), z, _CMP_EQ_OQ);
    __m512i u = _mm512_castpd_si512(s);
    __mmask8 go = fin & _mm512_cmp_pd_mask(e, z, _CMP_NEQ_OQ) & _mm512_testn_epi64_mask(u, one);
    __mmask8 up = (__mmask8)~(_mm512_cmp_pd_mask(e, z, _CMP_GT_OQ) ^ _mm512_cmp_pd_mask(s, z, _CMP_GT_OQ));
    u = _mm512_mask_add_epi64(u, go & up, u, one);
    u = _mm512_mask_sub_epi64(u, go & (__mmask8)~up, u, one);
    __m512i ex = _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(u, 52), _mm512_set1_epi64(0x7FF)), bias);
    __m512i q = _mm512_sub_epi64(_mm512_max_epi64(ex, emin), mb);
    __m512d down = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_sub_epi64(bias, q), 52));      /* 2^-q */
    __m512d back = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(bias, q), 52));      /* 2^q */
    __m512d r = _mm512_mul_pd(_mm512_castsi512_pd(u), down);
    r = lc_mx_round_pd(r, TZ);
    r = _mm512_mul_pd(r, back);
    __mmask8 ovf = _mm512_cmp_pd_mask(_mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(r), absm)), mx,
                                      _CMP_GT_OQ);
    __m512d sgn = _mm512_castsi512_pd(_mm512_andnot_si512(absm, u));
    r = _mm512_mask_blend_pd(ovf, r, _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(sgn),
                                                                           _mm512_castpd_si512(lim))));
    return _mm512_add_pd(_mm512_mask_blend_pd(fin, s, r), z);
}

#ifndef LC_MX_NR
#define LC_MX_NR 2          /* rows per narrow tile: 8 register chains of 8 lanes (3, 4: no faster) */
#endif
static size_t lc_mx_narrow_ws(const lc_mx_job *j) {
    return lc_mx_al((size_t)lc_mx_kct(j) * lc_mx_pstride(j->P->R16) * 4) + lc_mx_al((size_t)j->rows_per * 32 * 4) +
           lc_mx_al((size_t)j->rows_per * 32 * 8);
}

#define LC_MX_NDECL(r)                                                                                  \
    const double *a##r##_ = ac + (r < R ? r : 0) * 32;                                                  \
    __m512d c##r##0 = _mm512_load_pd(a##r##_), c##r##1 = _mm512_load_pd(a##r##_ + 8),                   \
            c##r##2 = _mm512_load_pd(a##r##_ + 16), c##r##3 = _mm512_load_pd(a##r##_ + 24);
#define LC_MX_NROW(r)                                                                                   \
    if (r < R) {                                                                                        \
        unsigned c_ = A[r * Kp + kk];                                                                   \
        const uint32_t *p_ = Pk + (int64_t)P->rep[c_] * 32;                                            \
        __m512d s_ = _mm512_set1_pd(P->afac[c_] * sa[r]);                                              \
        LC_MX_EXPAND(p_)                                                                                \
        c##r##0 = lc_mx_step8(c##r##0, _mm512_mul_pd(_mm512_mul_pd(x0, s_), sb0), mb, lim, mx, TZ);      \
        c##r##1 = lc_mx_step8(c##r##1, _mm512_mul_pd(_mm512_mul_pd(x1, s_), sb1), mb, lim, mx, TZ);      \
        c##r##2 = lc_mx_step8(c##r##2, _mm512_mul_pd(_mm512_mul_pd(x2, s_), sb2), mb, lim, mx, TZ);      \
        c##r##3 = lc_mx_step8(c##r##3, _mm512_mul_pd(_mm512_mul_pd(x3, s_), sb3), mb, lim, mx, TZ);      \
    }
#define LC_MX_NFLUSH1(r, i)                                                                             \
    _mm256_storeu_ps(yt + r * 32 + 8 * i,                                                               \
                     _mm256_add_ps(_mm256_loadu_ps(yt + r * 32 + 8 * i), lc_mx_cvtpd_ps(c##r##i)));      \
    c##r##i = _mm512_setzero_pd();
#define LC_MX_NFLUSH(r)                                                                                 \
    if (r < R) { LC_MX_NFLUSH1(r, 0) LC_MX_NFLUSH1(r, 1) LC_MX_NFLUSH1(r, 2) LC_MX_NFLUSH1(r, 3) }
#define LC_MX_NSTORE(r)                                                                                 \
    if (r < R) {                                                                                        \
        _mm512_store_pd(ac + r * 32, c##r##0); _mm512_store_pd(ac + r * 32 + 8, c##r##1);               \
        _mm512_store_pd(ac + r * 32 + 16, c##r##2); _mm512_store_pd(ac + r * 32 + 24, c##r##3);         \
    }
#define LC_MX_NREP(X) X(0) X(1) X(2) X(3)

/* R rows x 32 columns over k = kg0 + kk, kk < kc, of one chunk of block b: the registers from and
 * back to ac (R x 32 float64), promoted into yt (R x 32 float32) where k's count says so */
LC_AI void lc_mx_narrow_tile(const lc_mx_job *j, const uint8_t *A, const double *sa, const uint32_t *Pw, int64_t kg0,
                             int64_t kc, const double *sbv, float *yt, double *ac, const int R, const int EX,
                             const int TZ) {
    const lc_mx_products *P = j->P;
    const int R16 = P->R16;
    const int64_t Kp = j->Kp, pr = j->promote, K = j->K;
    const __m512i zi = _mm512_setzero_si512(), mb = _mm512_set1_epi64(j->mbits);
    const double mxd = (2.0 - lc_mx_pow2(-j->mbits)) * lc_mx_pow2(127);
    const __m512d mx = _mm512_set1_pd(mxd), lim = _mm512_set1_pd(TZ ? mxd : INFINITY);
    __m512d sb0 = _mm512_loadu_pd(sbv), sb1 = _mm512_loadu_pd(sbv + 8), sb2 = _mm512_loadu_pd(sbv + 16),
            sb3 = _mm512_loadu_pd(sbv + 24);
    LC_MX_NREP(LC_MX_NDECL)
    for (int64_t kk = 0; kk < kc; kk++) {
        const int64_t kg = kg0 + kk;
        const uint32_t *Pk = Pw + kk * lc_mx_pstride(R16);
        LC_MX_NREP(LC_MX_NROW)
        if ((pr > 0 && (kg + 1) % pr == 0) || kg == K - 1) {      /* y = fl32(y + acc), acc = 0 */
            LC_MX_NREP(LC_MX_NFLUSH)
        }
    }
    LC_MX_NREP(LC_MX_NSTORE)
    (void)zi;
}

typedef void (*lc_mx_narrow_fn)(const lc_mx_job *, const uint8_t *, const double *, const uint32_t *, int64_t,
                                int64_t, const double *, float *, double *);
#define LC_MX_NDEF(R, EX, TZ)                                                                           \
    static void lc_mx_narrow_##R##_##EX##_##TZ(const lc_mx_job *j, const uint8_t *A, const double *sa,        \
                                               const uint32_t *Pw, int64_t kg0, int64_t kc, const double *sbv, \
                                               float *yt, double *ac) {                                 \
        lc_mx_narrow_tile(j, A, sa, Pw, kg0, kc, sbv, yt, ac, R, EX, TZ);                              \
    }
#define LC_MX_NDEF_R(EX, TZ) LC_MX_NDEF(1, EX, TZ) LC_MX_NDEF(2, EX, TZ) LC_MX_NDEF(3, EX, TZ) LC_MX_NDEF(4, EX, TZ)
LC_MX_NDEF_R(0, 0) LC_MX_NDEF_R(1, 0) LC_MX_NDEF_R(0, 1) LC_MX_NDEF_R(1, 1)
#define LC_MX_NNAMES(EX, TZ) {0, lc_mx_narrow_1_##EX##_##TZ, lc_mx_narrow_2_##EX##_##TZ, lc_mx_narrow_3_##EX##_##TZ, \
                              lc_mx_narrow_4_##EX##_##TZ}
/* [toward zero][expand][rows] */
static const lc_mx_narrow_fn lc_mx_narrow_tiles[2][2][5] = {
    {LC_MX_NNAMES(0, 0), LC_MX_NNAMES(1, 0)}, {LC_MX_NNAMES(0, 1), LC_MX_NNAMES(1, 1)}};

static void lc_mx_narrow_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, char *ws) {
    const lc_mx_products *P = j->P;
    const int64_t N = j->N, K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, rows = m1 - m0, kct = lc_mx_kct(j);
    uint32_t *Pw = (uint32_t *)ws;
    float *yt = (float *)(ws + lc_mx_al((size_t)kct * lc_mx_pstride(P->R16) * 4));
    double *ac = (double *)((char *)yt + lc_mx_al((size_t)j->rows_per * 32 * 4));
    const lc_mx_narrow_fn *tiles = lc_mx_narrow_tiles[j->tz != 0][P->expand == LC_MX_HI32];
    uint16_t used[LC_MX_KCT] __attribute__((aligned(64)));
    double sbv[32], sa[LC_MX_NR];
    memset(yt, 0, (size_t)rows * 32 * sizeof(float));
    memset(ac, 0, (size_t)rows * 32 * sizeof(double));
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t k0 = b * bk, k1 = lc_mx_min(k0 + bk, K);
        for (int c = 0; c < 32; c++) sbv[c] = c < nc ? P->scale[j->SB[b * N + n0 + c]] : 1.0;
        for (int64_t c0 = k0; c0 < k1; c0 += kct) {
            const int64_t c1 = lc_mx_min(c0 + kct, k1);
            lc_mx_used(used, j->A + m0 * Kp + c0, Kp, rows, c1 - c0, P->rep_mask);
            lc_mx_build(Pw, j, used, c0, c1 - c0, n0, nc);
            for (int64_t r = 0; r < rows; r += LC_MX_NR) {
                int R = (int)lc_mx_min(LC_MX_NR, rows - r);
                for (int i = 0; i < R; i++) sa[i] = P->scale[j->SA[(m0 + r + i) * nblk + b]];
                tiles[R](j, j->A + (m0 + r) * Kp + c0, sa, Pw, c0, c1 - c0, sbv, yt + r * 32, ac + r * 32);
            }
        }
    }
    lc_mx_store(j, yt, 32, m0, rows, n0, nc);
}

/* ------------------------------------------------------------------ the body's entry points */
size_t LC_BODY(mx_exact_ws)(const lc_mx_job *j) {
    return j->P->route == LC_MX_ROUTE_FMA ? lc_mx_fma_ws(j) : lc_mx_table_ws(j);
}

void LC_BODY(mx_exact_unit)(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws) {
    if (j->P->route == LC_MX_ROUTE_FMA)
        lc_mx_fma_unit(j, m0, m1, n0, nc, (char *)ws);
    else
        lc_mx_table_unit(j, m0, m1, n0, nc, (char *)ws);
}

size_t LC_BODY(mx_narrow_ws)(const lc_mx_job *j) { return lc_mx_narrow_ws(j); }

void LC_BODY(mx_narrow_unit)(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, void *ws) {
    lc_mx_narrow_unit(j, m0, m1, n0, nc, (char *)ws);
}

#endif /* LC_X86 */
