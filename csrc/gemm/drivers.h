/* csrc/gemm/drivers.h — the threaded exact drivers (plain and block-scaled) over the exact body
 * table (gemm/body.h).  Part of the gemm family (gemm.h includes every part; a part includes
 * the parts it uses). */
#ifndef LUTCORE_GEMM_DRIVERS_H
#define LUTCORE_GEMM_DRIVERS_H

#include "gemm/pack.h"
#include "gemm/body.h"

/* ------------------------------------------------------ exact drivers */

#define LC_MC 48   /* rows per work unit (8 register tiles) */
#define LC_NC 128  /* columns per work unit (8 panels) */
/* Work units go to threads dynamically: every output tile is computed whole by
 * one thread, so the bits do not depend on who takes which (and ragged unit
 * counts, e.g. 3 row blocks x 4 column blocks on 2 threads, stay balanced). */

/* A body's whole call (gemm/x86/x86.h): its conversions, then its units, on the team;
 * 0 = done, -1 = not taken (the caller runs the per-unit loop). */
typedef struct { const lc_gemm_ebody *xb; lc_gemm_x_call *x; } lc_gemm_x_job;

static void lc_gemm_x_conv_unit(void *p, int64_t i, int tid) {
    const lc_gemm_x_job *j = (const lc_gemm_x_job *)p;
    (void)tid;
    j->xb->x_conv(j->x, i);
}

static void lc_gemm_x_unit(void *p, int64_t u, int tid) {
    const lc_gemm_x_job *j = (const lc_gemm_x_job *)p;
    j->xb->x_unit(j->x, u, tid);
}

static int lc_gemm_x_whole(const lc_gemm_ebody *xb, lc_gemm_x_call *x, int nthreads) {
    x->nthreads = nthreads;
    if (!xb->x_begin || xb->x_begin(x) != 0) return -1;
    lc_gemm_x_job j = {xb, x};
    lc_team_for(nthreads, x->nconv, lc_gemm_x_conv_unit, &j);
    lc_team_for(nthreads, x->nunits, lc_gemm_x_unit, &j);
    xb->x_end(x);
    return 0;
}

/* B's form for the exact whole calls, made once (a PackedB keeps it): a header naming the body
 * and (Kp, N), then the body's x_bform bytes.  A call given a form that does not match its body
 * and shape ignores it (converts B itself: the same bytes, the same bits). */
#define LC_BFORM_MAGIC 0x31304d524f464243ULL   /* "CBFORM01" little-endian; gemm/pack.h's header, extra 0 */
#define LC_BFORM_HDR LC_FORM_HDR

/* The body's id for isa (1: VNNI), or 0 when it takes no B form. */
static inline int64_t lc_bform_body(int isa) { return lc_gemm_exact_pick(isa)->x_bform ? 1 : 0; }

/* Bytes of B (Kp, N)'s form for isa's exact body (header included); 0 when it has none. */
static inline size_t lc_gemm_exact_bform_size(int64_t Kp, int64_t N, int isa) {
    if (lc_bform_body(isa) && Kp > 0 && N > 0) return LC_BFORM_HDR + lc_gemm_exact_pick(isa)->x_bform_bytes(Kp, N);
    return 0;
}

/* Bf (lc_gemm_exact_bform_size bytes, 64-byte aligned) <- the form of packed Bp; -1 (nothing
 * written) when isa's body has none. */
/* Pairs of panels are independent (each writes its own bytes): ranges of at least ~64 KB of B. */
typedef struct { const lc_gemm_ebody *xb; uint8_t *Bf; const int8_t *Bp; int64_t Kp, N; } lc_bform_job;

static void lc_bform_range(void *p, int64_t j0, int64_t j1, int tid) {
    const lc_bform_job *j = (const lc_bform_job *)p;
    (void)tid;
    for (int64_t i = j0; i < j1; i++) j->xb->x_bform(j->Bf, j->Bp, j->Kp, j->N, i);
}

static int lc_gemm_exact_bform(uint8_t *Bf, const int8_t *Bp, int64_t Kp, int64_t N, int isa, int nthreads) {
    if (!lc_gemm_exact_bform_size(Kp, N, isa)) return -1;
    const lc_gemm_ebody *xb = lc_gemm_exact_pick(isa);
    lc_form_header_write(Bf, LC_BFORM_MAGIC, lc_bform_body(isa), Kp, N, 0);
    const int64_t npair = (N + 2 * LC_NR - 1) / (2 * LC_NR), pair_bytes = Kp * 2 * LC_NR;
    lc_bform_job j = {xb, Bf + LC_BFORM_HDR, Bp, Kp, N};
    lc_team_range(nthreads, npair, ((int64_t)1 << 16) / (pair_bytes > 0 ? pair_bytes : 1) + 1, lc_bform_range, &j);
    return 0;
}

/* Bf's bytes past the header when it is isa's form of a (Kp, N) B, else NULL. */
static inline const uint8_t *lc_bform_use(const uint8_t *Bf, int64_t Kp, int64_t N, int isa) {
    return Bf && lc_form_header_ok(Bf, LC_BFORM_MAGIC, lc_bform_body(isa), Kp, N, 0) ? Bf + LC_BFORM_HDR : NULL;
}

/* The per-unit loop (a body without whole calls): unit u = (row block mu, column block nu),
 * computed whole by one thread. */
typedef struct {
    const lc_gemm_ebody *xb;
    int32_t *C;
    float *Y;
    int64_t ldc, Kp, P, pb, nblk, bkp, M, N, nnu;
    const int16_t *Ap;
    const int8_t *Bp;
    const float *sa, *sbp;
    int isa;
} lc_exact_unit_job;

static void lc_gemm_exact_unit(void *p, int64_t u, int tid) {
    const lc_exact_unit_job *j = (const lc_exact_unit_job *)p;
    const lc_gemm_ebody *xb = j->xb;
    int32_t *C = j->C;
    const int16_t *Ap = j->Ap;
    const int8_t *Bp = j->Bp;
    const int64_t ldc = j->ldc, Kp = j->Kp, P = j->P, M = j->M, N = j->N;
    int64_t mu = u / j->nnu, nu = u % j->nnu;
    int32_t tile[LC_MR * LC_NR];
    int64_t n_end = (nu + 1) * LC_NC < N ? (nu + 1) * LC_NC : N;
    int64_t m_end = (mu + 1) * LC_MC < M ? (mu + 1) * LC_MC : M;
    (void)tid;
    if (xb->gemm_exact_unit &&
        xb->gemm_exact_unit(C + mu * LC_MC * ldc + nu * LC_NC, ldc, Ap + mu * LC_MC * Kp, Kp,
                            Bp + (nu * LC_NC / LC_NR) * P * 2 * LC_NR, m_end - mu * LC_MC, n_end - nu * LC_NC) == 0)
        return;
    for (int64_t n0 = nu * LC_NC; n0 < n_end; n0 += LC_NR) {
        const int8_t *Bpan = Bp + (n0 / LC_NR) * P * 2 * LC_NR;
        int nc = (int)(n_end - n0 < LC_NR ? n_end - n0 : LC_NR);
        for (int64_t m0 = mu * LC_MC; m0 < m_end; m0 += LC_MR) {
            int R = (int)(m_end - m0 < LC_MR ? m_end - m0 : LC_MR);
            xb->mk_exact(tile, Ap + m0 * Kp, Kp, Bpan, 0, P, R);
            for (int r = 0; r < R; r++)
                memcpy(C + (m0 + r) * ldc + n0, tile + r * LC_NR, (size_t)nc * sizeof(int32_t));
        }
    }
}

/* C (M,N) int32 = packed Ap x packed Bp over all Kp (exact table); Bf: B's form
 * (lc_gemm_exact_bform) or NULL. */
static void lc_gemm_exact_packed(int32_t *C, int64_t ldc, const int16_t *Ap, const int8_t *Bp, const uint8_t *Bf,
                                 int64_t M, int64_t N, int64_t Kp, int isa, int nthreads) {
    int64_t P = Kp / 2;
    int64_t nmu = (M + LC_MC - 1) / LC_MC, nnu = (N + LC_NC - 1) / LC_NC;
    int64_t units = nmu * nnu;
    const lc_gemm_ebody *xb = lc_gemm_exact_pick(isa);
    lc_gemm_x_call x = {.C = C, .ldc = ldc, .Ap = Ap, .Kp = Kp, .Bp = Bp, .bq_in = lc_bform_use(Bf, Kp, N, isa),
                        .nblk = 1, .bkp = Kp, .M = M, .N = N};
    if (lc_gemm_x_whole(xb, &x, nthreads) == 0) return;
    lc_exact_unit_job j = {.xb = xb, .C = C, .ldc = ldc, .Kp = Kp, .P = P, .M = M, .N = N, .nnu = nnu, .Ap = Ap,
                           .Bp = Bp, .isa = isa};
    lc_team_for(nthreads, units, lc_gemm_exact_unit, &j);
}

/* C (M,N) int32 = A's int8 rows (M, K, lda apart) x packed Bp (Kp = K rounded up to even),
 * when the body takes whole calls from int8 rows (no int16 copy of A): 0 = done, -1 = not
 * taken (the caller packs A and runs lc_gemm_exact_packed: same bits). */
static int lc_gemm_exact_a8(int32_t *C, int64_t ldc, const int8_t *A, int64_t lda, const int8_t *Bp,
                            const uint8_t *Bf, int64_t M, int64_t N, int64_t K, int64_t Kp, int isa, int nthreads) {
    lc_gemm_x_call x = {.C = C, .ldc = ldc, .Kp = Kp, .A8 = A, .lda8 = lda, .K = K, .Bp = Bp,
                        .bq_in = lc_bform_use(Bf, Kp, N, isa), .nblk = 1, .bkp = Kp, .M = M, .N = N};
    return lc_gemm_x_whole(lc_gemm_exact_pick(isa), &x, nthreads);
}

/* One register tile of the block-scaled product: R <= LC_MR packed rows (sa's
 * rows lds apart) against one packed panel, y (R x LC_NR) from zero, blocks in order. */
static inline void lc_qexact_tile(float *y, const int16_t *Ap, int64_t Kp, const int8_t *Bpan, const float *sa,
                                  int64_t nblk, const float *sbpan, int64_t pb, int R, int isa) {
    const lc_gemm_ebody *xb = lc_gemm_exact_pick(isa);
    if (xb->qmatmul_exact_unit &&
        xb->qmatmul_exact_unit(y, LC_NR, Ap, Kp, sa, Bpan, sbpan, nblk, 2 * pb, R, LC_NR) == 0)
        return;
    memset(y, 0, (size_t)R * LC_NR * sizeof(float));           /* the rows in use */
    if (xb->qmk_exact) {
        xb->qmk_exact(y, Ap, Kp, Bpan, sa, nblk, sbpan, nblk, pb, R);
        return;
    }
    int32_t tile[LC_MR * LC_NR];
    for (int64_t b = 0; b < nblk; b++) {
        xb->mk_exact(tile, Ap, Kp, Bpan, b * pb, (b + 1) * pb, R);
        lc_fold_generic(y, tile, sa + b, nblk, sbpan + b * LC_NR, R);
    }
}

static void lc_qmatmul_exact_unit(void *p, int64_t u, int tid) {
    const lc_exact_unit_job *j = (const lc_exact_unit_job *)p;
    const lc_gemm_ebody *xb = j->xb;
    float *Y = j->Y;
    const int16_t *Ap = j->Ap;
    const int8_t *Bp = j->Bp;
    const float *sa = j->sa, *sbp = j->sbp;
    const int64_t ldy = j->ldc, Kp = j->Kp, P = j->P, pb = j->pb, nblk = j->nblk, bkp = j->bkp, M = j->M, N = j->N;
    int64_t mu = u / j->nnu, nu = u % j->nnu;
    float ytile[LC_MR * LC_NR];
    int64_t n_end = (nu + 1) * LC_NC < N ? (nu + 1) * LC_NC : N;
    int64_t m_end = (mu + 1) * LC_MC < M ? (mu + 1) * LC_MC : M;
    (void)tid;
    if (xb->qmatmul_exact_unit &&
        xb->qmatmul_exact_unit(Y + mu * LC_MC * ldy + nu * LC_NC, ldy, Ap + mu * LC_MC * Kp, Kp,
                               sa + mu * LC_MC * nblk, Bp + (nu * LC_NC / LC_NR) * P * 2 * LC_NR,
                               sbp + (nu * LC_NC / LC_NR) * nblk * LC_NR, nblk, bkp, m_end - mu * LC_MC,
                               n_end - nu * LC_NC) == 0)
        return;
    for (int64_t n0 = nu * LC_NC; n0 < n_end; n0 += LC_NR) {
        const int8_t *Bpan = Bp + (n0 / LC_NR) * P * 2 * LC_NR;
        const float *sbpan = sbp + (n0 / LC_NR) * nblk * LC_NR;
        int nc = (int)(n_end - n0 < LC_NR ? n_end - n0 : LC_NR);
        for (int64_t m0 = mu * LC_MC; m0 < m_end; m0 += LC_MR) {
            int R = (int)(m_end - m0 < LC_MR ? m_end - m0 : LC_MR);
            lc_qexact_tile(ytile, Ap + m0 * Kp, Kp, Bpan, sa + m0 * nblk, nblk, sbpan, pb, R, j->isa);
            for (int r = 0; r < R; r++)
                memcpy(Y + (m0 + r) * ldy + n0, ytile + r * LC_NR, (size_t)nc * sizeof(float));
        }
    }
}

/* Y (M,N) float32 = block-scaled matmul on packed operands (exact table).
 * sa (M, nblk) row-major; sbp (Np/16, nblk, 16) packed column scales. */
static void lc_qmatmul_exact_packed(float *Y, int64_t ldy, const int16_t *Ap, const float *sa,
                                    const int8_t *Bp, const float *sbp, int64_t M, int64_t N,
                                    int64_t nblk, int64_t bkp, int isa, int nthreads) {
    int64_t Kp = nblk * bkp, P = Kp / 2, pb = bkp / 2;
    int64_t nmu = (M + LC_MC - 1) / LC_MC, nnu = (N + LC_NC - 1) / LC_NC;
    int64_t units = nmu * nnu;
    const lc_gemm_ebody *xb = lc_gemm_exact_pick(isa);
    lc_gemm_x_call x = {.Y = Y, .ldc = ldy, .Ap = Ap, .Kp = Kp, .Bp = Bp, .sa = sa, .sbp = sbp, .nblk = nblk,
                        .bkp = bkp, .M = M, .N = N};
    if (lc_gemm_x_whole(xb, &x, nthreads) == 0) return;
    lc_exact_unit_job j = {.xb = xb, .Y = Y, .ldc = ldy, .Kp = Kp, .P = P, .pb = pb, .nblk = nblk, .bkp = bkp,
                           .M = M, .N = N, .nnu = nnu, .Ap = Ap, .Bp = Bp, .sa = sa, .sbp = sbp, .isa = isa};
    lc_team_for(nthreads, units, lc_qmatmul_exact_unit, &j);
}


#endif /* LUTCORE_GEMM_DRIVERS_H */
