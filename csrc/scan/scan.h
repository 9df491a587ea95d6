/* csrc/scan/scan.h — selective scan (S6), forward and backward.
 *
 * Contract (docs/DESIGN.md): dt = softplus(delta + delta_bias) (optional),
 * Abar = exp(dt A), Bbar = dt B ("simplified") or dt phi1(dt A) B ("zoh",
 * phi1(x) = expm1(x)/x), h_t = Abar h_{t-1} + Bbar u_t, y_t = C_t . h_t + D u_t,
 * then y * silu(z).
 *
 * The algorithm lives in scan_impl.h and is instantiated here for generic
 * float, generic double and AVX2 float (8-lane vectors, two per 16-channel
 * unit), and in csrc/scan/x86/avx512.c for AVX-512 float (one zmm per unit; its own
 * translation unit, scan/x86.h), all with the same bits.  Memory: the backward never holds the
 * (B, L, D, N) states — the forward saves the state at the start of every
 * chunk of T steps (hs, O(B D N L / T)) and the backward recomputes a chunk at
 * a time.  Threads split (batch, channel-block) units; the channel-reduced
 * gradients dB, dC go through per-(batch, channel-group) partials of fixed
 * size (LC_SCAN_GROUP_UNITS units of 16 channels) and dA, dD, ddelta_bias through per-batch
 * partials, all summed in a fixed order — the same bits at any thread count.
 */
#ifndef LUTCORE_SCAN_H
#define LUTCORE_SCAN_H

#include "core/common.h"
#include "core/dispatch.h"
#include "mathfn/mathfn.h"

#define LC_SCAN_GROUP_UNITS 4    /* backward work item: 4 units of 16 lanes = 64 channels */
#define LC_SCAN_TB 64            /* forward time block: its dt, u, y rows stay in L1 */
#define LC_SCAN_PAD 16           /* elements between the backward's (T, 16) row blocks: breaks 4 KiB set aliasing */
#define LC_SCAN_PF 4             /* rows are prefetched this many steps ahead (forward and backward) */
#define LC_SCAN_SPAN 8           /* forward work item: 8 units of 16 channels, time blocks outer */

/* ---------------- generic vocabulary: an 8-lane struct, scalar loops ---- */
/* max(m, |a|) for m >= 0 with NaN above everything and sticky (as lc_maxabs_ps) */
#define LC_DEF_MAXABS(T)                                                                             \
    static inline T lc_maxabs_##T(T m, T a) {                                                        \
        T aa = a < 0 ? -a : a;                                                                       \
        return m != m ? m : ((aa != aa || aa > m) ? aa : m);                                         \
    }
LC_DEF_MAXABS(float)
LC_DEF_MAXABS(double)
#define LC_DEF_V8(T, NAME, EXPF, EXP2F, SPF, SIGF, SILUF, PHIF, DPHIF, SPEF, DSPEF, FMAF)                               \
    typedef struct { T v[8]; } NAME;                                                                 \
    static inline NAME NAME##_load(const T *p) { NAME r; for (int i = 0; i < 8; i++) r.v[i] = p[i]; return r; } \
    static inline void NAME##_store(T *p, NAME a) { for (int i = 0; i < 8; i++) p[i] = a.v[i]; }     \
    static inline NAME NAME##_set1(T s) { NAME r; for (int i = 0; i < 8; i++) r.v[i] = s; return r; } \
    static inline NAME NAME##_add(NAME a, NAME b) { for (int i = 0; i < 8; i++) a.v[i] = a.v[i] + b.v[i]; return a; } \
    static inline NAME NAME##_sub(NAME a, NAME b) { for (int i = 0; i < 8; i++) a.v[i] = a.v[i] - b.v[i]; return a; } \
    static inline NAME NAME##_mul(NAME a, NAME b) { for (int i = 0; i < 8; i++) a.v[i] = a.v[i] * b.v[i]; return a; } \
    static inline NAME NAME##_fma(NAME a, NAME b, NAME c) { for (int i = 0; i < 8; i++) a.v[i] = FMAF(a.v[i], b.v[i], c.v[i]); return a; } \
    static inline NAME NAME##_exp(NAME a) { for (int i = 0; i < 8; i++) a.v[i] = EXPF(a.v[i]); return a; } \
    static inline NAME NAME##_exp2(NAME a) { for (int i = 0; i < 8; i++) a.v[i] = EXP2F(a.v[i]); return a; } \
    static inline NAME NAME##_maxabs(NAME m, NAME a) {   /* max(m, |a|), NaN sticky */                 \
        for (int i = 0; i < 8; i++) m.v[i] = lc_maxabs_##T(m.v[i], a.v[i]);                           \
        return m;                                                                                    \
    }                                                                                                \
    static inline NAME NAME##_softplus(NAME a) { for (int i = 0; i < 8; i++) a.v[i] = SPF(a.v[i]); return a; } \
    static inline NAME NAME##_sigmoid(NAME a) { for (int i = 0; i < 8; i++) a.v[i] = SIGF(a.v[i]); return a; } \
    static inline NAME NAME##_silu(NAME a) { for (int i = 0; i < 8; i++) a.v[i] = SILUF(a.v[i]); return a; } \
    static inline NAME NAME##_softplus_e(NAME a, NAME *e) { for (int i = 0; i < 8; i++) a.v[i] = SPEF(a.v[i], &e->v[i]); return a; } \
    static inline NAME NAME##_dsoftplus_e(NAME a, NAME e) { for (int i = 0; i < 8; i++) a.v[i] = DSPEF(a.v[i], e.v[i]); return a; } \
    static inline NAME NAME##_phi1(NAME x, NAME e) { for (int i = 0; i < 8; i++) x.v[i] = PHIF(x.v[i], e.v[i]); return x; } \
    static inline NAME NAME##_dphi1(NAME x, NAME e, NAME p) { for (int i = 0; i < 8; i++) x.v[i] = DPHIF(x.v[i], e.v[i], p.v[i]); return x; } \
    static inline T NAME##_hsum(NAME a) {   /* pairwise, as the AVX2 hadd tree */                  \
        return ((a.v[0] + a.v[1]) + (a.v[2] + a.v[3])) + ((a.v[4] + a.v[5]) + (a.v[6] + a.v[7]));     \
    }                                                                                                \
    static inline void NAME##_hsum8(T *out, const T *rows) {   /* 8 contiguous 8-lane rows */        \
        for (int j = 0; j < 8; j++) out[j] = NAME##_hsum(NAME##_load(rows + 8 * j));                  \
    }

LC_DEF_V8(float, lc_v8f, lc_expf, lc_exp2f, lc_softplusf, lc_sigmoidf, lc_siluf, lc_phi1f, lc_dphi1f, lc_softplus_ef,
          lc_dsoftplus_ef, fmaf)
LC_DEF_V8(double, lc_v8d, exp, exp2, lc_softplus_d, lc_sigmoid_d, lc_silu_d, lc_phi1_d, lc_dphi1_d, lc_softplus_e_d,
          lc_dsoftplus_e_d, fma)

/* instantiate: generic float */
#define LC_ST float
#define LC_VT lc_v8f
#define LC_VL 8
#define LC_V_TARGET
#define LC_V_NAME(x) lc_##x##_gf
#define LC_VZERO lc_v8f_set1(0.0f)
#define LC_VLOAD lc_v8f_load
#define LC_VSTORE lc_v8f_store
#define LC_VSET1 lc_v8f_set1
#define LC_VADD lc_v8f_add
#define LC_VSUB lc_v8f_sub
#define LC_VMUL lc_v8f_mul
#define LC_VFMA lc_v8f_fma
#define LC_VEXP lc_v8f_exp
#define LC_VEXP_FAST lc_v8f_exp
#define LC_VEXP2 lc_v8f_exp2
#define LC_VEXP2_FAST lc_v8f_exp2
#define LC_LOG2E_ST LC_LOG2E
#define LC_VMAXABS lc_v8f_maxabs
#define LC_SMAXABS lc_maxabs_float
#define LC_VSOFTPLUS lc_v8f_softplus
#define LC_VSIGMOID lc_v8f_sigmoid
#define LC_VSILU lc_v8f_silu
#define LC_VSOFTPLUS_E lc_v8f_softplus_e
#define LC_VDSOFTPLUS_E lc_v8f_dsoftplus_e
#define LC_VPHI1 lc_v8f_phi1
#define LC_VDPHI1 lc_v8f_dphi1
#define LC_VHSUM(p) lc_v8f_hsum(lc_v8f_load(p))
#define LC_VHSUM8 lc_v8f_hsum8
#include "scan_impl.h"   /* undefines the LC_V* vocabulary at its end */

/* instantiate: generic double */
#define LC_ST double
#define LC_V_TARGET
#define LC_VT lc_v8d
#define LC_VL 8
#define LC_V_NAME(x) lc_##x##_gd
#define LC_VZERO lc_v8d_set1(0.0)
#define LC_VLOAD lc_v8d_load
#define LC_VSTORE lc_v8d_store
#define LC_VSET1 lc_v8d_set1
#define LC_VADD lc_v8d_add
#define LC_VSUB lc_v8d_sub
#define LC_VMUL lc_v8d_mul
#define LC_VFMA lc_v8d_fma
#define LC_VEXP lc_v8d_exp
#define LC_VEXP_FAST lc_v8d_exp
#define LC_VEXP2 lc_v8d_exp2
#define LC_VEXP2_FAST lc_v8d_exp2
#define LC_LOG2E_ST 1.4426950408889634
#define LC_VMAXABS lc_v8d_maxabs
#define LC_SMAXABS lc_maxabs_double
#define LC_VSOFTPLUS lc_v8d_softplus
#define LC_VSIGMOID lc_v8d_sigmoid
#define LC_VSILU lc_v8d_silu
#define LC_VSOFTPLUS_E lc_v8d_softplus_e
#define LC_VDSOFTPLUS_E lc_v8d_dsoftplus_e
#define LC_VPHI1 lc_v8d_phi1
#define LC_VDPHI1 lc_v8d_dphi1
#define LC_VHSUM(p) lc_v8d_hsum(lc_v8d_load(p))
#define LC_VHSUM8 lc_v8d_hsum8
#include "scan_impl.h"   /* undefines the LC_V* vocabulary at its end */

#if LC_X86
/* ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), the generic order */
LC_TARGET_AVX2 static inline float lc_hsum_ps(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}
/* the lane sums of 8 contiguous 8-lane rows at once (a transposing hadd tree),
 * each in the order of lc_hsum_ps */
LC_TARGET_AVX2 static inline void lc_hsum8_ps(float *out, const float *rows) {
    __m256 s01 = _mm256_hadd_ps(_mm256_loadu_ps(rows), _mm256_loadu_ps(rows + 8));
    __m256 s23 = _mm256_hadd_ps(_mm256_loadu_ps(rows + 16), _mm256_loadu_ps(rows + 24));
    __m256 s45 = _mm256_hadd_ps(_mm256_loadu_ps(rows + 32), _mm256_loadu_ps(rows + 40));
    __m256 s67 = _mm256_hadd_ps(_mm256_loadu_ps(rows + 48), _mm256_loadu_ps(rows + 56));
    __m256 q0 = _mm256_hadd_ps(s01, s23), q1 = _mm256_hadd_ps(s45, s67);
    __m256 lo = _mm256_permute2f128_ps(q0, q1, 0x20), hi = _mm256_permute2f128_ps(q0, q1, 0x31);
    _mm256_storeu_ps(out, _mm256_add_ps(lo, hi));
}
/* the vocabulary: csrc/core/vec.h at 8 lanes through vfloat.h */
#define LC_VEC_W 8
#include "core/vec.h"
#undef LC_VEC_W
#define LC_V_TARGET LC_TARGET_AVX2
#define LC_V_NAME(x) lc_##x##_avx2
#include "scan/vfloat.h"
#define LC_VHSUM(p) lc_hsum_ps(_mm256_loadu_ps(p))
#define LC_VHSUM8 lc_hsum8_ps
#include "scan_impl.h"   /* undefines the LC_V* vocabulary at its end */
#endif

/* ------------------------------------------------------------- drivers */

/* per-thread forward scratch, in elements: (span, TB, 16) dt, w, y; (span, N, 16) h, A;
 * (span, 16) bias and D lanes; (span, N) max |A|; (span,) max |dt| */
static inline size_t lc_scan_fwd_work(int64_t N) {
    return (size_t)LC_SCAN_SPAN * (3 * LC_SCAN_TB * 16 + 2 * N * 16 + 2 * 16 + N + 1);
}
/* per-thread backward scratch, in elements: per unit of a group 10 (T, 16) row
 * buffers, 4 (N, 16), 4 x 16 lanes, (2 N + 1) maxima; shared 3 (T, 16) + 2 (T, 8);
 * LC_SCAN_PAD after each unit's row block and each buffer (scan_impl.h) */
static inline size_t lc_scan_bwd_work(int64_t T, int64_t N) {
    return (size_t)LC_SCAN_GROUP_UNITS * (10 * T * 16 + 4 * N * 16 + 4 * 16 + 2 * N + 1) + (size_t)3 * T * 16 +
           (size_t)2 * T * 8 + (size_t)(10 * (LC_SCAN_GROUP_UNITS + 1) + 5) * LC_SCAN_PAD;
}

/* The drivers run on the team (core/team.h): the units are those the bits are defined on,
 * (batch, span) in the forward and (batch, channel group) in the backward, whichever thread
 * computes them.  Each thread's scratch is allocated at its first unit (slot tid of works;
 * freed after the job); a failed allocation sets the call's fail flag (an atomic or) and
 * the thread's units are skipped.  The backward's fixed-order reductions of the partials
 * (dB and dC per (batch, step), dA per (channel, state), dD and ddelta_bias per channel)
 * are one second job after the first, each output summed whole in its fixed order by one
 * unit of about LC_SCAN_RED_ADDS additions (skipped when fail is set). */
#define LC_SCAN_RED_ADDS 8192

/* thread tid's scratch of `bytes`, allocated at its first unit; NULL (fail set) when out of memory */
static inline void *lc_scan_scratch(void **works, int tid, size_t bytes, int *fail) {
    if (!works[tid]) {
        works[tid] = malloc(bytes);
        if (!works[tid]) __atomic_fetch_or(fail, 1, __ATOMIC_RELAXED);
    }
    return works[tid];
}
/* slots for nthreads threads' scratch (NULL when out of memory) and their release */
static inline void **lc_scan_works(int nthreads) {
    return (void **)calloc((size_t)(nthreads > 1 ? nthreads : 1), sizeof(void *));
}
static inline void lc_scan_works_free(void **works, int nthreads) {
    for (int t = 0; t < (nthreads > 1 ? nthreads : 1); t++) free(works[t]);
    free(works);
}
/* items per reduction unit: about LC_SCAN_RED_ADDS additions (an item costs `adds`) */
static inline int64_t lc_scan_red_per(int64_t adds) {
    return adds >= LC_SCAN_RED_ADDS ? 1 : LC_SCAN_RED_ADDS / (adds > 0 ? adds : 1);
}

#define LC_SCAN_DRIVERS(ST, SUF, DISPATCH_FWD, DISPATCH_BWD)                                          \
typedef struct {                                                                                     \
    ST *y, *ypre, *hs, *hlast;                                                                       \
    const ST *u, *delta, *A, *Bm, *Cm, *Dv, *z, *dbias, *h0;                                          \
    int64_t L, D, N, T, nblk, nsp;                                                                   \
    int softplus, zoh, isa, fail;                                                                    \
    void **works;                                                                                    \
} lc_scan_fwd_job_##SUF;                                                                             \
static void lc_scan_fwd_unit_##SUF(void *p, int64_t w, int tid) {                                    \
    lc_scan_fwd_job_##SUF *j = (lc_scan_fwd_job_##SUF *)p;                                            \
    const int isa = j->isa;                                                                          \
    ST *work = (ST *)lc_scan_scratch(j->works, tid, lc_scan_fwd_work(j->N) * sizeof(ST), &j->fail);  \
    (void)isa;                                                                                       \
    if (!work) return;                                                                               \
    int64_t b = w / j->nsp, k0 = (w % j->nsp) * LC_SCAN_SPAN;                                         \
    int64_t k1 = k0 + LC_SCAN_SPAN < j->nblk ? k0 + LC_SCAN_SPAN : j->nblk;                          \
    DISPATCH_FWD(j->y, j->ypre, j->hs, j->hlast, j->u, j->delta, j->A, j->Bm, j->Cm, j->Dv, j->z,     \
                 j->dbias, j->h0, b, k0, k1, j->L, j->D, j->N, j->T, j->softplus, j->zoh, work);     \
}                                                                                                    \
static int lc_scan_fwd_##SUF(ST *y, ST *ypre, ST *hs, ST *hlast, const ST *u, const ST *delta,       \
        const ST *A, const ST *Bm, const ST *Cm, const ST *Dv, const ST *z, const ST *dbias,          \
        const ST *h0, int64_t Bsz, int64_t L, int64_t D, int64_t N, int64_t T, int softplus, int zoh, \
        int isa, int nthreads) {                                                                     \
    int64_t nblk = (D + 15) / 16, nsp = (nblk + LC_SCAN_SPAN - 1) / LC_SCAN_SPAN, units = Bsz * nsp; \
    if (nthreads < 1) nthreads = 1;                                                                  \
    void **works = lc_scan_works(nthreads);                                                          \
    if (!works) return 1;                                                                            \
    lc_scan_fwd_job_##SUF j = {y, ypre, hs, hlast, u, delta, A, Bm, Cm, Dv, z, dbias, h0, L, D, N, T, \
                               nblk, nsp, softplus, zoh, isa, 0, works};                             \
    lc_team_for(nthreads, units, lc_scan_fwd_unit_##SUF, &j);                                        \
    lc_scan_works_free(works, nthreads);                                                             \
    return j.fail;                                                                                   \
}                                                                                                    \
typedef struct {                                                                                     \
    ST *du, *ddelta, *dA, *dB, *dC, *dD, *dz, *ddb, *dh0, *dAp, *dBp, *dCp, *dDp, *ddbp;               \
    const ST *dout, *u, *delta, *A, *Bm, *Cm, *Dv, *z, *dbias, *hs, *ypre;                            \
    int64_t Bsz, L, D, N, T, nun, ng;                                                                \
    int softplus, zoh, isa, fail;                                                                    \
    void **works;                                                                                    \
    int64_t per1, per2, per3, nu1, nu2, nu3;   /* the reductions' items a unit and units */          \
} lc_scan_bwd_job_##SUF;                                                                             \
static void lc_scan_bwd_unit_##SUF(void *p, int64_t w, int tid) {                                    \
    lc_scan_bwd_job_##SUF *j = (lc_scan_bwd_job_##SUF *)p;                                            \
    const int isa = j->isa;                                                                          \
    const int64_t L = j->L, N = j->N, ng = j->ng, nun = j->nun;                                      \
    ST *work = (ST *)lc_scan_scratch(j->works, tid, lc_scan_bwd_work(j->T, N) * sizeof(ST), &j->fail); \
    (void)isa;                                                                                       \
    if (!work) return;                                                                               \
    int64_t b = w / ng, g = w % ng;                                                                  \
    ST *dBg = j->dBp + (b * ng + g) * L * N, *dCg = j->dCp + (b * ng + g) * L * N;                    \
    memset(dBg, 0, (size_t)(L * N) * sizeof(ST));                                                    \
    memset(dCg, 0, (size_t)(L * N) * sizeof(ST));                                                    \
    int64_t k0 = g * LC_SCAN_GROUP_UNITS;                                                             \
    int64_t k1 = k0 + LC_SCAN_GROUP_UNITS < nun ? k0 + LC_SCAN_GROUP_UNITS : nun;                     \
    DISPATCH_BWD(j->du, j->ddelta, j->dAp, dBg, dCg, j->Dv ? j->dDp : NULL, j->dz,                    \
                 j->dbias ? j->ddbp : NULL, j->dh0, j->dout, j->u, j->delta, j->A, j->Bm, j->Cm,      \
                 j->Dv, j->z, j->dbias, j->hs, j->ypre, b, k0, k1, L, j->D, N, j->T, j->softplus,     \
                 j->zoh, work);                                                                      \
}                                                                                                    \
/* the fixed-order reductions: units [0, nu1) dB/dC rows (b, t), then [nu1, nu1 + nu2) dA's      \
 * (channel, state) entries, then dD / ddelta_bias's channels */                                    \
static void lc_scan_red_unit_##SUF(void *p, int64_t w, int tid) {                                    \
    const lc_scan_bwd_job_##SUF *j = (const lc_scan_bwd_job_##SUF *)p;                                \
    const int64_t Bsz = j->Bsz, L = j->L, D = j->D, N = j->N, ng = j->ng;                             \
    const ST *dBp = j->dBp, *dCp = j->dCp, *dAp = j->dAp, *dDp = j->dDp, *ddbp = j->ddbp;             \
    (void)tid;                                                                                       \
    if (w < j->nu1) {                                                                                \
        const int64_t r1 = (w + 1) * j->per1 < Bsz * L ? (w + 1) * j->per1 : Bsz * L;                 \
        for (int64_t r = w * j->per1; r < r1; r++) {                                                 \
            int64_t b = r / L, t = r % L;                                                            \
            for (int64_t n = 0; n < N; n++) {                                                        \
                ST sb = 0, sc = 0;                                                                   \
                for (int64_t g = 0; g < ng; g++) {                                                   \
                    sb = sb + dBp[((b * ng + g) * N + n) * L + t];                                   \
                    sc = sc + dCp[((b * ng + g) * N + n) * L + t];                                   \
                }                                                                                    \
                j->dB[r * N + n] = sb;                                                               \
                j->dC[r * N + n] = sc;                                                               \
            }                                                                                        \
        }                                                                                            \
        return;                                                                                      \
    }                                                                                                \
    w -= j->nu1;                                                                                     \
    if (w < j->nu2) {                                                                                \
        const int64_t i1 = (w + 1) * j->per2 < D * N ? (w + 1) * j->per2 : D * N;                     \
        for (int64_t i = w * j->per2; i < i1; i++) {                                                 \
            ST s = 0;                                                                                \
            for (int64_t b = 0; b < Bsz; b++) s = s + dAp[b * D * N + i];                            \
            j->dA[i] = s;                                                                            \
        }                                                                                            \
        return;                                                                                      \
    }                                                                                                \
    w -= j->nu2;                                                                                     \
    const int64_t d1 = (w + 1) * j->per3 < D ? (w + 1) * j->per3 : D;                                 \
    for (int64_t d = w * j->per3; d < d1; d++) {                                                     \
        ST s1 = 0, s2 = 0;                                                                           \
        for (int64_t b = 0; b < Bsz; b++) {                                                          \
            if (j->Dv) s1 = s1 + dDp[b * D + d];                                                     \
            if (j->dbias) s2 = s2 + ddbp[b * D + d];                                                 \
        }                                                                                            \
        if (j->Dv) j->dD[d] = s1;                                                                    \
        if (j->dbias) j->ddb[d] = s2;                                                                \
    }                                                                                                \
}                                                                                                    \
/* dBp, dCp: (B, ngroups, N, L) scratch; dAp: (B, D, N); dDp, ddbp: (B, D) scratch. */                \
static int lc_scan_bwd_##SUF(ST *du, ST *ddelta, ST *dA, ST *dB, ST *dC, ST *dD, ST *dz, ST *ddb,     \
        ST *dh0, ST *dAp, ST *dBp, ST *dCp, ST *dDp, ST *ddbp,                                       \
        const ST *dout, const ST *u, const ST *delta, const ST *A, const ST *Bm, const ST *Cm,        \
        const ST *Dv, const ST *z, const ST *dbias, const ST *hs, const ST *ypre,                     \
        int64_t Bsz, int64_t L, int64_t D, int64_t N, int64_t T, int softplus, int zoh,              \
        int isa, int nthreads) {                                                                     \
    int64_t nun = (D + 15) / 16;                                                                     \
    int64_t ng = (nun + LC_SCAN_GROUP_UNITS - 1) / LC_SCAN_GROUP_UNITS, units = Bsz * ng;            \
    if (nthreads < 1) nthreads = 1;                                                                  \
    void **works = lc_scan_works(nthreads);                                                          \
    if (!works) return 1;                                                                            \
    lc_scan_bwd_job_##SUF j = {du, ddelta, dA, dB, dC, dD, dz, ddb, dh0, dAp, dBp, dCp, dDp, ddbp,     \
                               dout, u, delta, A, Bm, Cm, Dv, z, dbias, hs, ypre,                    \
                               Bsz, L, D, N, T, nun, ng, softplus, zoh, isa, 0, works,               \
                               0, 0, 0, 0, 0, 0};                                                    \
    lc_team_for(nthreads, units, lc_scan_bwd_unit_##SUF, &j);                                        \
    lc_scan_works_free(works, nthreads);                                                             \
    j.per1 = lc_scan_red_per(2 * N * ng);                                                            \
    j.per2 = lc_scan_red_per(Bsz);                                                                   \
    j.per3 = lc_scan_red_per(2 * Bsz);                                                               \
    j.nu1 = (Bsz * L + j.per1 - 1) / j.per1;                                                         \
    j.nu2 = (D * N + j.per2 - 1) / j.per2;                                                           \
    j.nu3 = Dv || dbias ? (D + j.per3 - 1) / j.per3 : 0;                                             \
    if (!j.fail) lc_team_for(nthreads, j.nu1 + j.nu2 + j.nu3, lc_scan_red_unit_##SUF, &j);           \
    return j.fail;                                                                                   \
}

/* ------------------------------------------------------------ the float32 body table
 * The AVX-512 body lives in its own translation unit (scan/x86/x86.h, csrc/scan/x86/avx512.c);
 * LC_SCAN_SIMDE (setup.py: 1 in the test twin's build) binds its SIMDe copy.  float64 runs
 * the generic body (_gd) always. */
#include "scan/x86/x86.h"
#ifndef LC_SCAN_SIMDE
#define LC_SCAN_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    void (*fwd_span)(float *, float *, float *, float *, const float *, const float *, const float *, const float *,
                     const float *, const float *, const float *, const float *, const float *, int64_t, int64_t,
                     int64_t, int64_t, int64_t, int64_t, int64_t, int, int, float *);
    void (*bwd_group)(float *, float *, float *, float *, float *, float *, float *, float *, float *, const float *,
                      const float *, const float *, const float *, const float *, const float *, const float *,
                      const float *, const float *, const float *, const float *, int64_t, int64_t, int64_t,
                      int64_t, int64_t, int64_t, int64_t, int, int, float *);
} lc_scan_body;
static const lc_scan_body lc_scan_bodies[] = {
#if LC_X86_BODIES
    {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_SCAN_SIMDE, avx512, scan_fwd_span),
     LC_XBODY(LC_SCAN_SIMDE, avx512, scan_bwd_group)},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, lc_scan_fwd_span_avx2, lc_scan_bwd_group_avx2},
#endif
    {{"generic", LC_ISA_GENERIC}, lc_scan_fwd_span_gf, lc_scan_bwd_group_gf},
};
LC_BODY_TABLE(lc_scan_body, lc_scan, lc_scan_bodies)   /* lc_scan_pick(isa), lc_scan_body_name(isa) */

#define LC_SCAN_FWD_F32(...) lc_scan_pick(isa)->fwd_span(__VA_ARGS__)
#define LC_SCAN_BWD_F32(...) lc_scan_pick(isa)->bwd_group(__VA_ARGS__)
#define LC_SCAN_FWD_F64(...) lc_scan_fwd_span_gd(__VA_ARGS__)
#define LC_SCAN_BWD_F64(...) lc_scan_bwd_group_gd(__VA_ARGS__)

LC_SCAN_DRIVERS(float, f32, LC_SCAN_FWD_F32, LC_SCAN_BWD_F32)
LC_SCAN_DRIVERS(double, f64, LC_SCAN_FWD_F64, LC_SCAN_BWD_F64)

#endif /* LUTCORE_SCAN_H */
