/* csrc/mxgemm/x86/avx2.c — the MX GEMM's AVX2 (+FMA) body, both modes (mxgemm/mxgemm.h: the
 * contract; job.h: the shared steps; x86/avx512.c: the same routes on zmm).  Compiled alone with
 * the AVX2 flags (setup.py) and once more against SIMDe with the baseline flags for the tests (the
 * twin runs on any x86-64).  Every block sum is exact, so the order of the additions here changes
 * no bit; the per-block fold is the generic one, lane for lane: fl32(S), times 2^(xa + xb) in
 * float64, fl32, added to y in float32.  16 ymm registers of 4 float64: a unit is 32 columns, run
 * as strips of 16 (the FMA tile; two parts) or whole (one part; narrow); strips wholly past the
 * unit's nc columns are skipped.
 *
 * The FMA route (the exact table of the decoded values, one float64 part): a float64 GEMM per
 * block.  A unit decodes a chunk of B's columns once (Bd: per strip kc x 16 float64, vb[code]); a
 * tile of up to 3 rows x 4 ymm (16 columns) keeps 12 accumulators while per k each row's value
 * va[A[m,k]] is broadcast into 4 FMAs (the strip's 4 ymm of B read from L1 as operands).  Products
 * of decoded values and every partial sum are exact (the route's condition), so FMA adds them
 * exactly.
 *
 *   Bd   float64 (2, kc, 16)       decoded B of the chunk, strip by strip (0 past nc)  scratch
 *   yt   float32 (rows, 32)        the unit's y                                   scratch
 *   sp   float64 (rows, 32)        accumulators across chunks (bk > LC_MX_KCF)    scratch
 *
 * Any table: row tables, held as float64.  Per k of a chunk and the unit's 32 columns, P_k[r][j]
 * = T'[r][B[k, n0 + j]] for the table's reduced rows r (T[a] = afac[a] T'[rep[a]], afac a signed
 * power of two): 8 x 8 transposes of the transposed reduced table tt, each row widened to float64
 * as it is stored (HI32: the word is the float64's high half, a dword unpack with zeros — sigma
 * puts the columns in order; F32: vcvtps2pd), only for the 16-row groups some row of the unit
 * uses at that k where the rows are many (rep = code & rep_mask).  Then per row m and k one row
 * P_k[rep[A[m,k]]] of 32 float64 products is added with FMA by afac (exact), the table read as
 * FMA operands: no widening per product.  Two parts: v = x afac split at 2^c by the magic constant
 * (hi = (v + C) - C, lo = v - hi), each summed on its own, fl32(hi + lo) by TwoSum rounded to odd.
 * Tiles: 1 row x 8 ymm (one part), 1 row x 4 + 4 ymm over a strip of 16 (two).  Chunks of 32 k
 * (as the AVX-512 body's): chunks sized for the L1 measured slower (the accumulators' round trips).
 *
 *   P    float64 (kc, R16 x 32 + 8)  the chunk's row tables (a line of padding)   scratch
 *   yt   float32 (rows, 32)        the unit's y                                   scratch
 *   sp   float64 (rows, np, 32)    accumulators across chunks                     scratch
 *
 * Narrow mode: the same row tables (the table's own values, one "part"); per row and k the 32
 * products p = x afac 2^(xa + xb) (exact) step 8 ymm of registers in k order (lc_mx_step4:
 * TwoSum rounded to odd, then the integer rounding between exact power-of-two scalings, overflow
 * and specials — job.h's steps lane for lane), promoted into y where k's count says; the
 * registers live in ac between chunks.  Tiles of 2 rows: 16 chains of ~20 dependent steps each.
 *
 *   ac   float64 (rows, 32)        the unit's narrow registers                    scratch
 */
#define LC_BODY_ISA avx2
#include "core/simd.h"
#include "mxgemm/x86/x86.h"

#if LC_X86

#define LC_MX_NB 32        /* a unit's columns (LC_MX_AVX2_NB) */
#define LC_MX_SW 16        /* a strip's columns: 4 ymm of float64 */
#define LC_MX_KCF 256      /* k per decoded B chunk, FMA route (2 x 32 KB of Bd) */
#define LC_MX_KCT 32       /* k per row-table chunk */
#define LC_MX_FR 3         /* rows per FMA tile */

static inline size_t lc_mx_al(size_t n) { return (n + 63) & ~(size_t)63; }
static inline int64_t lc_mx_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* to an integer, nearest even or toward zero (vroundpd; SIMDe: nearbyint, trunc) */
#define lc_mx_round4(x, tz) ((tz) ? _mm256_round_pd((x), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC) \
                                  : _mm256_round_pd((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))

/* y[0..4) += fl32(fl32(S) * (sa * sb)) — the generic fold, 4 lanes */
LC_AI void lc_mx_fold4(float *y, __m256d S, __m256d sa, __m256d sb) {
    __m128 f = _mm256_cvtpd_ps(S);
    __m128 u = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(f), _mm256_mul_pd(sa, sb)));
    _mm_storeu_ps(y, _mm_add_ps(_mm_loadu_ps(y), u));
}

/* s + (go ? (dn ? -1 : +1) : 0) on the bits: the odd neighbour's step (masks all-ones or 0) */
LC_AI __m256i lc_mx_nudge(__m256i u, __m256d go, __m256d dn) {
    const __m256i one = _mm256_set1_epi64x(1);
    return _mm256_add_epi64(u, _mm256_and_si256(_mm256_castpd_si256(go),
                                                _mm256_or_si256(_mm256_castpd_si256(dn), one)));
}

/* a + b rounded to odd (TwoSum's error e: when e != 0 and the sum's last bit is 0, it moves one
 * ulp toward e) where a + b is finite — job.h lc_mx_add_odd, lane for lane; elsewhere junk, which
 * the callers replace */
LC_AI __m256d lc_mx_odd4(__m256d a, __m256d b) {
    const __m256d z = _mm256_setzero_pd();
    const __m256i one = _mm256_set1_epi64x(1), zi = _mm256_setzero_si256();
    __m256d s = _mm256_add_pd(a, b), bb = _mm256_sub_pd(s, a);
    __m256d e = _mm256_add_pd(_mm256_sub_pd(a, _mm256_sub_pd(s, bb)), _mm256_sub_pd(b, bb));
    __m256i u = _mm256_castpd_si256(s);
    __m256d even = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(u, one), zi));
    __m256d go = _mm256_and_pd(_mm256_cmp_pd(e, z, _CMP_NEQ_OQ), even);
    __m256d dn = _mm256_xor_pd(_mm256_cmp_pd(e, z, _CMP_GT_OQ), _mm256_cmp_pd(s, z, _CMP_GT_OQ));
    return _mm256_castsi256_pd(lc_mx_nudge(u, go, dn));
}

/* all-ones where x is finite */
LC_AI __m256d lc_mx_finite4(__m256d x) { return _mm256_cmp_pd(_mm256_sub_pd(x, x), _mm256_setzero_pd(), _CMP_EQ_OQ); }

/* the float64 rounded to odd from hi + lo where hi is finite (then so is lo), else hi (job.h
 * lc_mx_sum32's argument, lane for lane) */
LC_AI __m256d lc_mx_sum4(__m256d hi, __m256d lo) { return _mm256_blendv_pd(hi, lc_mx_odd4(hi, lo), lc_mx_finite4(hi)); }

/* Y[m0 + r, n0 + c] = canon(yt[r][c]) for c < nc */
static void lc_mx_store(const lc_mx_job *j, const float *yt, int64_t m0, int64_t rows, int64_t n0, int nc) {
    for (int64_t r = 0; r < rows; r++) {
        float *y = j->Y + (m0 + r) * j->N + n0;
        for (int c = 0; c < nc; c++) y[c] = lc_mx_canon(yt[r * LC_MX_NB + c]);
    }
}

/* sbv[c] = 2^xb of column n0 + c in block b (1 past nc) */
static void lc_mx_sb(double *sbv, const lc_mx_job *j, int64_t b, int64_t n0, int nc) {
    for (int c = 0; c < LC_MX_NB; c++) sbv[c] = c < nc ? j->P->scale[j->SB[b * j->N + n0 + c]] : 1.0;
}

/* ------------------------------------------------------------------ the FMA route */
static inline int64_t lc_mx_kcf(const lc_mx_job *j) { return j->bk < LC_MX_KCF ? j->bk : LC_MX_KCF; }

static size_t lc_mx_fma_ws(const lc_mx_job *j) {
    size_t n = lc_mx_al((size_t)lc_mx_kcf(j) * LC_MX_NB * 8) + lc_mx_al((size_t)j->rows_per * LC_MX_NB * 4);
    if (j->bk > LC_MX_KCF) n += lc_mx_al((size_t)j->rows_per * LC_MX_NB * 8);
    return n;
}

#define LC_MX_REP3(X) X(0) X(1) X(2)
#define LC_MX_FDECL(r) __m256d c##r##0, c##r##1, c##r##2, c##r##3; const uint8_t *a##r = A + (r < R ? r : 0) * Kp;
#define LC_MX_FINIT(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (first) {                                                                                    \
            c##r##0 = c##r##1 = c##r##2 = c##r##3 = _mm256_setzero_pd();                                \
        } else {                                                                                        \
            const double *s_ = sp + r * LC_MX_NB;                                                       \
            c##r##0 = _mm256_load_pd(s_); c##r##1 = _mm256_load_pd(s_ + 4);                             \
            c##r##2 = _mm256_load_pd(s_ + 8); c##r##3 = _mm256_load_pd(s_ + 12);                        \
        }                                                                                               \
    }
#define LC_MX_FROW(r)                                                                                   \
    if (r < R) {                                                                                        \
        __m256d av = _mm256_broadcast_sd(va + a##r[k]);                                                 \
        c##r##0 = _mm256_fmadd_pd(_mm256_load_pd(bd), av, c##r##0);                                     \
        c##r##1 = _mm256_fmadd_pd(_mm256_load_pd(bd + 4), av, c##r##1);                                 \
        c##r##2 = _mm256_fmadd_pd(_mm256_load_pd(bd + 8), av, c##r##2);                                 \
        c##r##3 = _mm256_fmadd_pd(_mm256_load_pd(bd + 12), av, c##r##3);                                \
    }
#define LC_MX_FDONE(r)                                                                                  \
    if (r < R) {                                                                                        \
        if (last) {                                                                                     \
            __m256d sa = _mm256_broadcast_sd(scale + SA[r * nblk]);                                     \
            float *y_ = yt + r * LC_MX_NB;                                                              \
            lc_mx_fold4(y_, c##r##0, sa, sb0); lc_mx_fold4(y_ + 4, c##r##1, sa, sb1);                   \
            lc_mx_fold4(y_ + 8, c##r##2, sa, sb2); lc_mx_fold4(y_ + 12, c##r##3, sa, sb3);              \
        } else {                                                                                        \
            double *s_ = sp + r * LC_MX_NB;                                                             \
            _mm256_store_pd(s_, c##r##0); _mm256_store_pd(s_ + 4, c##r##1);                             \
            _mm256_store_pd(s_ + 8, c##r##2); _mm256_store_pd(s_ + 12, c##r##3);                        \
        }                                                                                               \
    }

/* R rows (A at their chunk start, Kp apart; SA at their block, nblk apart) x one strip of 16
 * columns (Bd the strip's kc x 16; sbv, yt, sp at the strip) over kc k: sums into the accumulators
 * (from sp unless first), then folded into yt (last) or kept in sp */
LC_AI void lc_mx_fma_tile(const uint8_t *A, int64_t Kp, const uint8_t *SA, int64_t nblk, const double *va,
                          const double *Bd, int64_t kc, const double *scale, const double *sbv, float *yt,
                          double *sp, int first, int last, const int R) {
    LC_MX_REP3(LC_MX_FDECL)
    LC_MX_REP3(LC_MX_FINIT)
    for (int64_t k = 0; k < kc; k++) {
        const double *bd = Bd + k * LC_MX_SW;
        LC_MX_REP3(LC_MX_FROW)
    }
    __m256d sb0 = _mm256_loadu_pd(sbv), sb1 = _mm256_loadu_pd(sbv + 4), sb2 = _mm256_loadu_pd(sbv + 8),
            sb3 = _mm256_loadu_pd(sbv + 12);
    LC_MX_REP3(LC_MX_FDONE)
}

typedef void (*lc_mx_fma_fn)(const uint8_t *, int64_t, const uint8_t *, int64_t, const double *, const double *,
                             int64_t, const double *, const double *, float *, double *, int, int);
#define LC_MX_FDEF(R)                                                                                   \
    static void lc_mx_fma_##R(const uint8_t *A, int64_t Kp, const uint8_t *SA, int64_t nblk, const double *va, \
                              const double *Bd, int64_t kc, const double *scale, const double *sbv, float *yt, \
                              double *sp, int first, int last) {                                        \
        lc_mx_fma_tile(A, Kp, SA, nblk, va, Bd, kc, scale, sbv, yt, sp, first, last, R);                \
    }
LC_MX_FDEF(1) LC_MX_FDEF(2) LC_MX_FDEF(3)
static const lc_mx_fma_fn lc_mx_fma_tiles[LC_MX_FR + 1] = {0, lc_mx_fma_1, lc_mx_fma_2, lc_mx_fma_3};

static void lc_mx_fma_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, char *ws) {
    const lc_mx_products *P = j->P;
    const int64_t N = j->N, K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, rows = m1 - m0, kcf = lc_mx_kcf(j);
    const int ns = (nc + LC_MX_SW - 1) / LC_MX_SW;
    double *Bd = (double *)ws;
    float *yt = (float *)(ws + lc_mx_al((size_t)kcf * LC_MX_NB * 8));
    double *sp = (double *)((char *)yt + lc_mx_al((size_t)j->rows_per * LC_MX_NB * 4));
    double sbv[LC_MX_NB];
    memset(yt, 0, (size_t)rows * LC_MX_NB * sizeof(float));
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t k0 = b * bk, k1 = lc_mx_min(k0 + bk, K);
        lc_mx_sb(sbv, j, b, n0, nc);
        for (int64_t c0 = k0; c0 < k1; c0 += kcf) {
            const int64_t c1 = lc_mx_min(c0 + kcf, k1);
            for (int64_t k = c0; k < c1; k++) {
                const uint8_t *bk_ = j->B + k * N + n0;
                for (int s = 0; s < ns; s++) {
                    double *bd = Bd + (s * kcf + (k - c0)) * LC_MX_SW;
                    for (int c = 0; c < LC_MX_SW; c++) {
                        int col = s * LC_MX_SW + c;
                        bd[c] = col < nc ? P->vb[bk_[col]] : 0.0;
                    }
                }
            }
            for (int s = 0; s < ns; s++)
                for (int64_t r = 0; r < rows; r += LC_MX_FR) {
                    int R = (int)lc_mx_min(LC_MX_FR, rows - r);
                    lc_mx_fma_tiles[R](j->A + (m0 + r) * Kp + c0, Kp, j->SA + (m0 + r) * nblk + b, nblk, P->va,
                                       Bd + s * kcf * LC_MX_SW, c1 - c0, P->scale, sbv + s * LC_MX_SW,
                                       yt + r * LC_MX_NB + s * LC_MX_SW, sp + r * LC_MX_NB + s * LC_MX_SW, c0 == k0,
                                       c1 == k1);
                }
        }
    }
    lc_mx_store(j, yt, m0, rows, n0, nc);
}

/* ------------------------------------------------------------------ row tables */
/* float64 from one k's row tables to the next: R16 rows of 32 and one line more (a power-of-two
 * stride would put every k's row r in the same few L1 sets) */
static inline int64_t lc_mx_pstride(int R16) { return (int64_t)R16 * LC_MX_NB + 8; }
static inline int64_t lc_mx_kct(const lc_mx_job *j) { return j->bk < LC_MX_KCT ? j->bk : LC_MX_KCT; }

/* 8 x 8 transpose of 32-bit words: r[c][i] -> r[i][c] */
LC_AI void lc_mx_tr8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {        /* u[i + e], 128-bit lane L: element 4L + e of rows i .. i+3 */
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int e = 0; e < 4; e++) {
        r[e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x20);
        r[4 + e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x31);
    }
}

/* position p of an 8-column group holds column sigma(p): HI32's dword unpacks then give its
 * columns 0-3 and 4-7 in order */
static const int lc_mx_sigma_hi32[8] = {0, 1, 4, 5, 2, 3, 6, 7};

/* used[kk] (kk < kc): bit g set when a row in [0, rows) has rep >> 4 == g at k0 + kk; the
 * reduction's arithmetic form (rep = code & rep_mask), or every group (rep_mask < 0: few) */
static void lc_mx_used(uint16_t *used, const uint8_t *A, int64_t Kp, int64_t rows, int64_t kc, int rep_mask) {
    int64_t kk = 0;
    if (rep_mask < 0 || rep_mask < 32) {
        for (; kk < kc; kk++) used[kk] = 0xFFFF;
        return;
    }
    const __m256i rm = _mm256_set1_epi32(rep_mask), one = _mm256_set1_epi32(1);
    for (; kk + 8 <= kc; kk += 8) {
        __m256i acc = _mm256_setzero_si256();
        for (int64_t r = 0; r < rows; r++) {
            __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(A + r * Kp + kk)));
            acc = _mm256_or_si256(acc, _mm256_sllv_epi32(one, _mm256_srli_epi32(_mm256_and_si256(w, rm), 4)));
        }
        uint32_t t[8];
        _mm256_storeu_si256((__m256i *)t, acc);
        for (int i = 0; i < 8; i++) used[kk + i] = (uint16_t)t[i];
    }
    for (int64_t k = kk; k < kc; k++) used[k] = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = kk; k < kc; k++) used[k] |= (uint16_t)(1u << ((A[r * Kp + k] & rep_mask) >> 4));
}

/* P_kk (R16 x 32 float64) for k = k0 + kk, kk < kc: the used 16-row groups of the transposed table,
 * the column groups of 8 below nc */
static void lc_mx_build(double *Pw, const lc_mx_job *j, const uint16_t *used, int64_t k0, int64_t kc, int64_t n0,
                        int nc) {
    const lc_mx_products *P = j->P;
    const int R16 = P->R16, ng = (nc + 7) / 8, hi32 = P->expand == LC_MX_HI32;
    const __m256i zi = _mm256_setzero_si256();
    for (int64_t kk = 0; kk < kc; kk++) {
        const uint8_t *bk_ = j->B + (k0 + kk) * j->N + n0;
        const uint32_t *src[LC_MX_NB];
        for (int c = 0; c < 8 * ng; c++) {
            int col = (c & ~7) + (hi32 ? lc_mx_sigma_hi32[c & 7] : (c & 7));
            src[c] = P->tt + (int64_t)(col < nc ? bk_[col] : 0) * R16;
        }
        double *Pk = Pw + kk * lc_mx_pstride(R16);
        for (int g = 0; g * 16 < R16; g++) {
            if (!((used[kk] >> g) & 1)) continue;
            for (int h = 0; h < 2; h++)
                for (int cg = 0; cg < ng; cg++) {
                    __m256 r[8];
                    for (int c = 0; c < 8; c++) r[c] = _mm256_loadu_ps((const float *)(src[8 * cg + c] + g * 16 + h * 8));
                    lc_mx_tr8(r);
                    for (int i = 0; i < 8; i++) {
                        double *d = Pk + (int64_t)(g * 16 + h * 8 + i) * LC_MX_NB + 8 * cg;
                        if (hi32) {
                            __m256i w = _mm256_castps_si256(r[i]);
                            _mm256_store_pd(d, _mm256_castsi256_pd(_mm256_unpacklo_epi32(zi, w)));
                            _mm256_store_pd(d + 4, _mm256_castsi256_pd(_mm256_unpackhi_epi32(zi, w)));
                        } else {
                            _mm256_store_pd(d, _mm256_cvtps_pd(_mm256_castps256_ps128(r[i])));
                            _mm256_store_pd(d + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(r[i], 1)));
                        }
                    }
                }
        }
    }
}

/* ------------------------------------------------------------------ any table */
static size_t lc_mx_table_ws(const lc_mx_job *j) {
    return lc_mx_al((size_t)lc_mx_kct(j) * lc_mx_pstride(j->P->R16) * 8) +
           lc_mx_al((size_t)j->rows_per * LC_MX_NB * 4) + lc_mx_al((size_t)j->rows_per * LC_MX_NB * 8 * j->P->nparts);
}

#define LC_MX_REP8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define LC_MX_REP4(X) X(0) X(1) X(2) X(3)
/* one part, a row's 32 columns (8 ymm) */
#define LC_MX_H1DECL(i) __m256d h##i = first ? _mm256_setzero_pd() : _mm256_load_pd(sp + 4 * i);
#define LC_MX_H1ADD(i) h##i = _mm256_fmadd_pd(_mm256_load_pd(p_ + 4 * i), s_, h##i);
#define LC_MX_H1DONE(i)                                                                                 \
    if (last)                                                                                           \
        lc_mx_fold4(yt + 4 * i, h##i, sa, _mm256_loadu_pd(sbv + 4 * i));                                \
    else                                                                                                \
        _mm256_store_pd(sp + 4 * i, h##i);

/* one row (A at its chunk start; its scale sa) x 32 columns over the chunk's kc row tables Pw, one
 * part; the accumulators from sp (32) unless first, folded into yt (last) or back to sp */
static void lc_mx_table_1(const uint8_t *A, double sa1, const double *Pw, int64_t kc, int64_t ps,
                          const uint8_t *rep, const double *afac, const double *sbv, float *yt, double *sp,
                          int first, int last) {
    LC_MX_REP8(LC_MX_H1DECL)
    for (int64_t k = 0; k < kc; k++) {
        const unsigned c_ = A[k];
        const double *p_ = Pw + k * ps + (int64_t)rep[c_] * LC_MX_NB;
        const __m256d s_ = _mm256_broadcast_sd(afac + c_);
        LC_MX_REP8(LC_MX_H1ADD)
    }
    const __m256d sa = _mm256_set1_pd(sa1);
    LC_MX_REP8(LC_MX_H1DONE)
}

/* two parts, a strip's 16 columns (4 + 4 ymm): v = x afac exactly, so fma(x, afac, C) is fl(v + C)
 * and fma(x, afac, -hi) is v - hi, exact */
#define LC_MX_H2DECL(i)                                                                                 \
    __m256d h##i = first ? _mm256_setzero_pd() : _mm256_load_pd(sp + 4 * i);                            \
    __m256d l##i = first ? _mm256_setzero_pd() : _mm256_load_pd(sp + LC_MX_NB + 4 * i);
#define LC_MX_H2ADD(i)                                                                                  \
    {                                                                                                   \
        __m256d x_ = _mm256_load_pd(p_ + 4 * i);                                                        \
        __m256d g_ = _mm256_sub_pd(_mm256_fmadd_pd(x_, s_, C), C);                                      \
        h##i = _mm256_add_pd(h##i, g_);                                                                 \
        l##i = _mm256_add_pd(l##i, _mm256_fmsub_pd(x_, s_, g_));                                        \
    }
#define LC_MX_H2DONE(i)                                                                                 \
    if (last) {                                                                                         \
        lc_mx_fold4(yt + 4 * i, lc_mx_sum4(h##i, l##i), sa, _mm256_loadu_pd(sbv + 4 * i));              \
    } else {                                                                                            \
        _mm256_store_pd(sp + 4 * i, h##i);                                                              \
        _mm256_store_pd(sp + LC_MX_NB + 4 * i, l##i);                                                   \
    }

/* one row x one strip of 16 columns (Pw, sbv, yt at the strip; sp the row's hi then lo, 32 each,
 * at the strip), two parts */
static void lc_mx_table_2(const uint8_t *A, double sa1, const double *Pw, int64_t kc, int64_t ps,
                          const uint8_t *rep, const double *afac, double split, const double *sbv, float *yt,
                          double *sp, int first, int last) {
    const __m256d C = _mm256_set1_pd(split);
    LC_MX_REP4(LC_MX_H2DECL)
    for (int64_t k = 0; k < kc; k++) {
        const unsigned c_ = A[k];
        const double *p_ = Pw + k * ps + (int64_t)rep[c_] * LC_MX_NB;
        const __m256d s_ = _mm256_broadcast_sd(afac + c_);
        LC_MX_REP4(LC_MX_H2ADD)
    }
    const __m256d sa = _mm256_set1_pd(sa1);
    LC_MX_REP4(LC_MX_H2DONE)
}

static void lc_mx_table_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, char *ws) {
    const lc_mx_products *P = j->P;
    const int64_t K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, rows = m1 - m0, kct = lc_mx_kct(j);
    const int64_t ps = lc_mx_pstride(P->R16);
    const int np = P->nparts, ns = (nc + LC_MX_SW - 1) / LC_MX_SW;
    double *Pw = (double *)ws;
    float *yt = (float *)(ws + lc_mx_al((size_t)kct * ps * 8));
    double *sp = (double *)((char *)yt + lc_mx_al((size_t)j->rows_per * LC_MX_NB * 4));
    uint16_t used[LC_MX_KCT];
    double sbv[LC_MX_NB];
    memset(yt, 0, (size_t)rows * LC_MX_NB * sizeof(float));
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t k0 = b * bk, k1 = lc_mx_min(k0 + bk, K);
        lc_mx_sb(sbv, j, b, n0, nc);
        for (int64_t c0 = k0; c0 < k1; c0 += kct) {
            const int64_t c1 = lc_mx_min(c0 + kct, k1);
            lc_mx_used(used, j->A + m0 * Kp + c0, Kp, rows, c1 - c0, P->rep_mask);
            lc_mx_build(Pw, j, used, c0, c1 - c0, n0, nc);
            for (int64_t r = 0; r < rows; r++) {
                const uint8_t *a = j->A + (m0 + r) * Kp + c0;
                const double sa = P->scale[j->SA[(m0 + r) * nblk + b]];
                double *s_ = sp + r * LC_MX_NB * np;
                if (np == 1)
                    lc_mx_table_1(a, sa, Pw, c1 - c0, ps, P->rep, P->afac, sbv, yt + r * LC_MX_NB, s_, c0 == k0,
                                  c1 == k1);
                else
                    for (int s = 0; s < ns; s++)
                        lc_mx_table_2(a, sa, Pw + s * LC_MX_SW, c1 - c0, ps, P->rep, P->afac, P->split,
                                      sbv + s * LC_MX_SW, yt + r * LC_MX_NB + s * LC_MX_SW, s_ + s * LC_MX_SW,
                                      c0 == k0, c1 == k1);
            }
        }
    }
    lc_mx_store(j, yt, m0, rows, n0, nc);
}

/* ------------------------------------------------------------------ narrow mode */
/* The register's step, 4 lanes: acc + p rounded to odd (TwoSum), then to mbits + 1 bits in
 * float32's exponent range, nearest even or toward zero (TZ), overflowing to +-inf or the maximum;
 * a non-finite acc + p passes (IEEE); zeros +0 — job.h's lc_mx_add_odd and lc_mx_narrow, lane for
 * lane.  The quantum 2^q (q = max(e, -126) - mbits) from the sum's exponent bits (2^e, 0 for a
 * zero) by a max and an exact scaling (qm = 2^-mbits), 2^-q from its bits: scalings by 2^-q and
 * 2^q are exact, the integer rounding between them the only rounding. */
LC_AI __m256d lc_mx_step4(__m256d acc, __m256d p, __m256d qm, __m256d lim, __m256d mx, const int TZ) {
    const __m256d expm = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FF0000000000000ll));
    const __m256d absm = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
    const __m256d emin = _mm256_set1_pd(0x1p-126);
    const __m256i two = _mm256_set1_epi64x(2046ll << 52);
    __m256d s = _mm256_add_pd(acc, p), u = lc_mx_odd4(acc, p);
    __m256d back = _mm256_mul_pd(_mm256_max_pd(_mm256_and_pd(u, expm), emin), qm);          /* 2^q */
    __m256d down = _mm256_castsi256_pd(_mm256_sub_epi64(two, _mm256_castpd_si256(back)));   /* 2^-q */
    __m256d r = _mm256_mul_pd(lc_mx_round4(_mm256_mul_pd(u, down), TZ), back);
    __m256d ovf = _mm256_cmp_pd(_mm256_and_pd(r, absm), mx, _CMP_GT_OQ);
    r = _mm256_blendv_pd(r, _mm256_or_pd(_mm256_andnot_pd(absm, u), lim), ovf);
    return _mm256_add_pd(_mm256_blendv_pd(s, r, lc_mx_finite4(s)), _mm256_setzero_pd());
}

static size_t lc_mx_narrow_ws(const lc_mx_job *j) {
    return lc_mx_al((size_t)lc_mx_kct(j) * lc_mx_pstride(j->P->R16) * 8) +
           lc_mx_al((size_t)j->rows_per * LC_MX_NB * 4) + lc_mx_al((size_t)j->rows_per * LC_MX_NB * 8);
}

#ifndef LC_MX_NR
#define LC_MX_NR 2          /* rows per narrow tile: 16 register chains of 4 lanes (the steps' latency hidden) */
#endif
#define LC_MX_NSTEP1(r, i)                                                                              \
    c##r##i = lc_mx_step4(c##r##i, _mm256_mul_pd(_mm256_mul_pd(_mm256_load_pd(p##r + 4 * i), s##r),    \
                                                 _mm256_loadu_pd(sbv + 4 * i)), qm, lim, mx, TZ);
#define LC_MX_NFLUSH1(r, i)                                                                             \
    _mm_storeu_ps(yt + r * LC_MX_NB + 4 * i,                                                            \
                  _mm_add_ps(_mm_loadu_ps(yt + r * LC_MX_NB + 4 * i), _mm256_cvtpd_ps(c##r##i)));       \
    c##r##i = _mm256_setzero_pd();
#define LC_MX_NSTORE1(r, i) _mm256_store_pd(ac + r * LC_MX_NB + 4 * i, c##r##i);
#define LC_MX_NROWS(X, r)                                                                               \
    if (r < R) { X(r, 0) X(r, 1) X(r, 2) X(r, 3) X(r, 4) X(r, 5) X(r, 6) X(r, 7) }
#define LC_MX_NDECL(r)                                                                                  \
    __m256d c##r##0, c##r##1, c##r##2, c##r##3, c##r##4, c##r##5, c##r##6, c##r##7;                     \
    if (r < R) { LC_MX_NROWS(LC_MX_NDECL2, r) }
#define LC_MX_NDECL2(r, i) c##r##i = _mm256_load_pd(ac + r * LC_MX_NB + 4 * i);
#define LC_MX_NROW(r)                                                                                   \
    if (r < R) {                                                                                        \
        const unsigned c_ = A[r * Kp + kk];                                                             \
        const double *p##r = Pk + (int64_t)P->rep[c_] * LC_MX_NB;                                       \
        const __m256d s##r = _mm256_set1_pd(P->afac[c_] * sa[r]);                                       \
        LC_MX_NROWS(LC_MX_NSTEP1, r)                                                                    \
    }
#define LC_MX_NFLUSH(r) LC_MX_NROWS(LC_MX_NFLUSH1, r)
#define LC_MX_NSTORE(r) LC_MX_NROWS(LC_MX_NSTORE1, r)
#define LC_MX_NREP(X) X(0) X(1)

/* R rows (A at the chunk, Kp apart; sa their 2^xa) x 32 columns over k = kg0 + kk, kk < kc, of one
 * chunk of block b: the registers from and back to ac (R x 32 float64), promoted into yt (R x 32
 * float32) where k's count says so (nf: the next k that promotes) */
LC_AI void lc_mx_narrow_tile(const lc_mx_job *j, const uint8_t *A, const double *sa, const double *Pw, int64_t kg0,
                             int64_t kc, const double *sbv, float *yt, double *ac, const int R, const int TZ) {
    const lc_mx_products *P = j->P;
    const int64_t ps = lc_mx_pstride(P->R16), pr = j->promote, K = j->K, Kp = j->Kp;
    const __m256d qm = _mm256_set1_pd(lc_mx_pow2(-j->mbits));
    const double mxd = (2.0 - lc_mx_pow2(-j->mbits)) * lc_mx_pow2(127);
    const __m256d mx = _mm256_set1_pd(mxd), lim = _mm256_set1_pd(TZ ? mxd : INFINITY);
    int64_t nf = pr > 0 ? lc_mx_min((kg0 / pr + 1) * pr - 1, K - 1) : K - 1;
    LC_MX_NREP(LC_MX_NDECL)
    for (int64_t kk = 0; kk < kc; kk++) {
        const double *Pk = Pw + kk * ps;
        LC_MX_NREP(LC_MX_NROW)
        if (kg0 + kk == nf) {                                     /* y = fl32(y + acc), acc = 0 */
            LC_MX_NREP(LC_MX_NFLUSH)
            nf = pr > 0 ? lc_mx_min(nf + pr, K - 1) : K - 1;
        }
    }
    LC_MX_NREP(LC_MX_NSTORE)
}

typedef void (*lc_mx_narrow_fn)(const lc_mx_job *, const uint8_t *, const double *, const double *, int64_t,
                                int64_t, const double *, float *, double *);
#define LC_MX_NDEF(R, TZ)                                                                               \
    static void lc_mx_narrow_##R##_##TZ(const lc_mx_job *j, const uint8_t *A, const double *sa,           \
                                        const double *Pw, int64_t kg0, int64_t kc, const double *sbv,    \
                                        float *yt, double *ac) {                                        \
        lc_mx_narrow_tile(j, A, sa, Pw, kg0, kc, sbv, yt, ac, R, TZ);                                   \
    }
LC_MX_NDEF(1, 0) LC_MX_NDEF(2, 0) LC_MX_NDEF(1, 1) LC_MX_NDEF(2, 1)
/* [toward zero][rows] */
static const lc_mx_narrow_fn lc_mx_narrow_tiles[2][3] = {{0, lc_mx_narrow_1_0, lc_mx_narrow_2_0},
                                                         {0, lc_mx_narrow_1_1, lc_mx_narrow_2_1}};

static void lc_mx_narrow_unit(const lc_mx_job *j, int64_t m0, int64_t m1, int64_t n0, int nc, char *ws) {
    const lc_mx_products *P = j->P;
    const int64_t K = j->K, Kp = j->Kp, bk = j->bk, nblk = j->nblk, rows = m1 - m0, kct = lc_mx_kct(j);
    double *Pw = (double *)ws;
    float *yt = (float *)(ws + lc_mx_al((size_t)kct * lc_mx_pstride(P->R16) * 8));
    double *ac = (double *)((char *)yt + lc_mx_al((size_t)j->rows_per * LC_MX_NB * 4));
    const lc_mx_narrow_fn *tiles = lc_mx_narrow_tiles[j->tz != 0];
    uint16_t used[LC_MX_KCT];
    double sbv[LC_MX_NB], sa[LC_MX_NR];
    memset(yt, 0, (size_t)rows * LC_MX_NB * sizeof(float));
    memset(ac, 0, (size_t)rows * LC_MX_NB * sizeof(double));
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t k0 = b * bk, k1 = lc_mx_min(k0 + bk, K);
        lc_mx_sb(sbv, j, b, n0, nc);
        for (int64_t c0 = k0; c0 < k1; c0 += kct) {
            const int64_t c1 = lc_mx_min(c0 + kct, k1);
            lc_mx_used(used, j->A + m0 * Kp + c0, Kp, rows, c1 - c0, P->rep_mask);
            lc_mx_build(Pw, j, used, c0, c1 - c0, n0, nc);
            for (int64_t r = 0; r < rows; r += LC_MX_NR) {
                int R = (int)lc_mx_min(LC_MX_NR, rows - r);
                for (int i = 0; i < R; i++) sa[i] = P->scale[j->SA[(m0 + r + i) * nblk + b]];
                tiles[R](j, j->A + (m0 + r) * Kp + c0, sa, Pw, c0, c1 - c0, sbv, yt + r * LC_MX_NB,
                         ac + r * LC_MX_NB);
            }
        }
    }
    lc_mx_store(j, yt, m0, rows, n0, nc);
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
