/* csrc/models/decode.h — one token through llama-family layers (decoding): a model
 * built from the kernel families (it includes their headers), not a kernel family.
 *
 * A layer is RMSNorm -> qkv linear -> RoPE -> GQA attention against the KV
 * cache -> o linear -> residual -> RMSNorm -> gate|up linear -> SiLU(gate) * up
 * -> down linear -> residual.  Every step performs the float32 operations of
 * the stage's numpy path (lutcore/pipeline/stage.py, T = 1) in the same order
 * and calls the same kernels (the sgemm's GEMV chains, the Q8 quantizer and the
 * block-scaled tiles, lutcore's exp/silu), so decoding keeps the bits of a full
 * recompute.
 *
 * Threads: a token is a chain of small steps (a 512-wide GEMV is tens of
 * microseconds).  `lc_dec_layers` runs each layer as a chain of jobs on lutcore's
 * team (core/team.h): the caller does the short row steps (norms, residual adds,
 * activation quantization) and hands the team only the products — each linear's
 * output panels in units of about 512 KiB of weights, at least one a thread (every
 * output element is computed whole by one unit, so the split does not show in the
 * bits), and the KV heads one a unit, each computing its own columns of qkv first
 * when the heads split evenly between the threads: four (or five) jobs a layer, one
 * wherever a product must be complete.  A job returns when its units are done, never
 * waiting for a thread to arrive (an OpenMP barrier waited for every thread, so a
 * thread whose core another process held stalled the token); between jobs the
 * workers spin briefly, so the next job finds them awake.  With one thread, or for
 * linears through an arbitrary table (whose kernel keeps per-thread scratch), the
 * same steps run on the caller's thread with each kernel using its own threads.
 */
#ifndef LUTCORE_DECODE_H
#define LUTCORE_DECODE_H

#include <math.h>
#include "core/common.h"
#include "mathfn/mathfn.h"
#include "softmax/softmax.h"
#include "norm/norm.h"
#include "attn/attn.h"
#include "gemm/gemm.h"
#include "sgemm/sgemm.h"

enum { LC_DLIN_FLOAT = 0, LC_DLIN_EXACT = 1, LC_DLIN_TABLE = 2 };

/* y (1, N) = x (1, K) @ W (+ bias): W float32 panels (kind FLOAT), exact Q8
 * panels (EXACT: bp, sbp; ap the packed-row buffer), or Q8 through a table
 * (TABLE: qb, sb, T32, twork).  qa, sa: the quantized row (Q8 kinds). */
typedef struct {
    int kind;
    int64_t K, N, nblk, bk, bkp;
    const float *panels;
    const int8_t *bp;
    const float *sbp;
    int16_t *ap;
    int8_t *qa;
    float *sa;
    const int8_t *qb;
    const float *sb;
    const int32_t *T32;
    int32_t *twork;
    const float *bias;
} lc_dlin;

typedef struct {
    lc_dlin qkv, o, up, down;
    const float *n1w, *n2w;
    float *Kc, *Vc;            /* (KV, cap, hd) each; row pos is written */
    int64_t cap, window;
    float scale;
} lc_dlayer;

/* shapes and scratch rows shared by a stage's layers */
typedef struct {
    int64_t C, H, KV, hd, inter, smax;
    float eps;
    float *h, *qkvb, *rq, *att, *ob, *upb, *sc, *kt;
} lc_dctx;

/* ------------------------------------------------------------ row steps */

/* One head rotated (rotate-half): x1 c - x2 s | x2 c + x1 s, each product rounded before the sum. */
static inline void lc_dec_rope_head(float *dst, const float *src, const float *cs, const float *sn, int64_t half) {
    for (int64_t i = 0; i < half; i++) {
        float a = src[i] * cs[i], b = src[half + i] * sn[i];
        float c = src[half + i] * cs[i], d = src[i] * sn[i];
        dst[i] = a - b;
        dst[half + i] = c + d;
    }
}

/* ------------------------------------------------------------ linears */

/* Quantize (and for the exact kernel pack) the input row into qa, sa, ap: 0, or -1
 * on a non-finite value. */
static int lc_dlin_prep(const lc_dlin *L, const float *x, int8_t *qa, float *sa, int16_t *ap, int isa) {
    if (L->kind == LC_DLIN_FLOAT) return 0;
    if (lc_quantize_row(qa, sa, x, L->K, L->bk, L->nblk, isa)) return -1;
    if (L->kind == LC_DLIN_EXACT)
        lc_pack_a16_row(ap, qa, L->nblk * L->bk, L->bk, L->bkp, L->nblk * L->bkp);
    return 0;
}

/* Output panels [q0, q1) of a prepared row (x for float weights, ap and sa for Q8),
 * bias included. */
static void lc_dlin_panels(const lc_dlin *L, float *y, const float *x, const int16_t *ap, const float *sa,
                           int64_t q0, int64_t q1, int isa) {
    const int64_t N = L->N;
    if (q0 >= q1) return;
    if (L->kind == LC_DLIN_FLOAT) {
        lc_sgemv_panels(y, x, L->panels, L->K, N, q0, q1, 0, isa);
    } else {
        const int64_t Kp = L->nblk * L->bkp, P = Kp / 2, pb = L->bkp / 2;
        const lc_gemm_ebody *xb = lc_gemm_exact_pick(isa);
        const int64_t c1 = q1 * LC_NR < N ? q1 * LC_NR : N;
        int64_t qe = q1;
        /* an x86 body's unit takes the whole share at once: the row is converted once
           (not once per panel), and its tiles stream the panels (same fold, same bits) */
        if (xb->qmatmul_exact_unit &&
            xb->qmatmul_exact_unit(y + q0 * LC_NR, N, ap, Kp, sa, L->bp + q0 * P * 2 * LC_NR,
                                   L->sbp + q0 * L->nblk * LC_NR, L->nblk, L->bkp, 1, c1 - q0 * LC_NR) == 0)
            qe = q0;
        for (int64_t q = q0; q < qe; q++) {
            float ytile[LC_NR];
            lc_qexact_tile(ytile, ap, Kp, L->bp + q * P * 2 * LC_NR, sa, L->nblk, L->sbp + q * L->nblk * LC_NR,
                           pb, 1, isa);
            int64_t nc = N - q * LC_NR < LC_NR ? N - q * LC_NR : LC_NR;
            memcpy(y + q * LC_NR, ytile, (size_t)nc * sizeof(float));
        }
    }
    if (L->bias) {
        int64_t c1 = q1 * LC_NR < N ? q1 * LC_NR : N;
        for (int64_t c = q0 * LC_NR; c < c1; c++) y[c] = y[c] + L->bias[c];
    }
}

/* A linear's team units: about this many weight bytes each (~10 µs streamed: a unit costs
 * a claim and a completion, cache lines moved between cores, and a job ~1 µs), but at least
 * one per thread; below LC_DEC_PAR_BYTES of weights it is one unit (the caller's). */
#define LC_DEC_UNIT_BYTES (512 << 10)
#define LC_DEC_PAR_BYTES (64 << 10)

/* Panels per team unit of a linear's np panels on nt threads: float panels in whole
 * groups of the GEMV body's streams. */
static int64_t lc_dlin_unit_panels(const lc_dlin *L, int64_t np, int nt, int isa) {
    const int64_t pb = L->kind == LC_DLIN_FLOAT ? L->K * LC_NR * (int64_t)sizeof(float) : L->nblk * L->bkp * LC_NR;
    const int64_t g = L->kind == LC_DLIN_FLOAT ? lc_sgemm_pick(isa)->gemv_group : 1, ng = (np + g - 1) / g;
    const int64_t bytes = np * pb;
    int64_t nu = bytes / LC_DEC_UNIT_BYTES;
    if (bytes >= LC_DEC_PAR_BYTES && nu < nt) nu = nt;
    if (nu > ng) nu = ng;
    if (nu < 1) nu = 1;
    return (ng + nu - 1) / nu * g;
}

/* The whole product on the caller's thread, each kernel with nt threads of its own. */
static void lc_dlin_whole(const lc_dlin *L, float *y, const float *x, int isa, int nt) {
    if (L->kind == LC_DLIN_FLOAT) {
        lc_sgemm(y, L->N, L->N, x, 0, L->K, 1, L->panels, 0, 0, 0, 1, 1, L->N, L->K, 0, NULL, L->panels, isa, nt);
    } else if (L->kind == LC_DLIN_EXACT && nt <= 1) {
        lc_dlin_panels(L, y, x, L->ap, L->sa, 0, (L->N + LC_NR - 1) / LC_NR, isa);   /* bias included */
        return;
    } else if (L->kind == LC_DLIN_EXACT) {
        lc_qmatmul_exact_packed(y, L->N, L->ap, L->sa, L->bp, L->sbp, 1, L->N, L->nblk, L->bkp, isa, nt);
    } else {
        lc_qmatmul_table(y, L->N, L->qa, L->sa, L->qb, L->sb, L->T32, L->T32 + 65536, 1, L->N, L->nblk, L->bk, L->twork, isa, nt);
    }
    if (L->bias)
        for (int64_t c = 0; c < L->N; c++) y[c] = y[c] + L->bias[c];
}

/* ------------------------------------------------------------ a layer */


/* KV head kv: RoPE of its query heads (scaled) and of its key head, the cache row,
 * the scores, softmax, and the weighted values into att. */
static void lc_dec_head(const lc_dlayer *L, lc_dctx *c, int64_t kv, int64_t pos, const float *cs,
                        const float *sn, int isa) {
    const int64_t H = c->H, KV = c->KV, hd = c->hd, g = H / KV, S = pos + 1, half = hd / 2;
    const int64_t Q = H * hd, KVd = KV * hd;
    float *q = c->rq;
    for (int64_t hh = kv * g; hh < (kv + 1) * g; hh++) {
        lc_dec_rope_head(q + hh * hd, c->qkvb + hh * hd, cs, sn, half);
        if (L->scale != 1.0f)
            for (int64_t i = hh * hd; i < (hh + 1) * hd; i++) q[i] = q[i] * L->scale;
    }
    lc_dec_rope_head(c->rq + Q + kv * hd, c->qkvb + Q + kv * hd, cs, sn, half);
    memcpy(L->Kc + (kv * L->cap + pos) * hd, c->rq + Q + kv * hd, (size_t)hd * sizeof(float));
    memcpy(L->Vc + (kv * L->cap + pos) * hd, c->qkvb + Q + KVd + kv * hd, (size_t)hd * sizeof(float));
    /* scores (g, S) = q (g, hd) @ K^T: the sgemm's chains (csrc/attn/attn.h) */
    lc_attn_scores(c->sc + kv * g * S, S, q + kv * g * hd, hd, g, L->Kc + kv * L->cap * hd, S, hd,
                   c->kt + kv * LC_ATTN_KT(hd), isa);
    for (int64_t r = kv * g; r < (kv + 1) * g; r++) lc_softmax_row(c->sc + r * S, S, pos, L->window, isa);
    /* att (g, hd) = p (g, S) @ V (S, hd); (KV, g) row order is head order */
    lc_attn_values(c->att + kv * g * hd, hd, c->sc + kv * g * S, S, g, L->Vc + kv * L->cap * hd, S, hd, isa);
}

/* A job's n units on nt threads of the team, thread t taking those of its static share
 * first (units [n t / T, n (t + 1) / T), ascending), then any left, the others' from their
 * shares' ends: token after token a thread streams the same weights (its caches keep them),
 * and a thread that comes late still leaves its share to the others.  A unit of the team is
 * a ticket: it claims a unit by its flag, so each unit runs once (its bits do not depend on
 * the thread). */
#define LC_DEC_AFF_MAX 256
typedef struct {
    lc_unit_fn fn;
    void *ctx;
    int64_t n;
    int nt;
    int taken[LC_DEC_AFF_MAX];
} lc_dec_aff_job;

static void lc_dec_aff_unit(void *p, int64_t u, int tid) {
    lc_dec_aff_job *a = (lc_dec_aff_job *)p;
    const int64_t n = a->n, u0 = n * tid / a->nt, u1 = n * (tid + 1) / a->nt;
    (void)u;
    for (int64_t k = 0; k < n; k++) {
        const int64_t v = k < u1 - u0 ? u0 + k : (u0 + n - 1 - (k - (u1 - u0))) % n;   /* own, then back from u0 - 1 */
        if (__atomic_load_n(&a->taken[v], __ATOMIC_RELAXED) || __atomic_exchange_n(&a->taken[v], 1, __ATOMIC_ACQ_REL))
            continue;
        a->fn(a->ctx, v, tid);
        return;
    }
}

static void lc_dec_team_for(int nt, int64_t n, lc_unit_fn fn, void *ctx) {
    if (nt <= 1 || n <= 1 || n > LC_DEC_AFF_MAX) {
        lc_team_for(nt, n, fn, ctx);
        return;
    }
    lc_dec_aff_job a;
    a.fn = fn, a.ctx = ctx, a.n = n, a.nt = nt < n ? nt : (int)n;
    memset(a.taken, 0, (size_t)n * sizeof(int));
    lc_team_for(a.nt, n, lc_dec_aff_unit, &a);
}

/* A layer's job on the team (lc_dec_layers; lc_dec_layer's heads): a linear's panels
 * [u ppu, (u + 1) ppu) of np (fused: those of gate and of up, pa apart, then SiLU(gate) * up
 * of their columns), or KV head u. */
typedef struct {
    const lc_dlayer *L;
    lc_dctx *c;
    const lc_dlin *lin;
    float *y;
    const float *x, *sa, *cs, *sn;
    const int16_t *ap;
    int64_t np, ppu, pa, pos;
    int isa;
} lc_dec_job;

static void lc_dec_lin_unit(void *p, int64_t u, int tid) {
    const lc_dec_job *j = (const lc_dec_job *)p;
    const int64_t q0 = u * j->ppu, q1 = q0 + j->ppu < j->np ? q0 + j->ppu : j->np;
    (void)tid;
    lc_dlin_panels(j->lin, j->y, j->x, j->ap, j->sa, q0, q1, j->isa);
}

static void lc_dec_head_unit(void *p, int64_t kv, int tid) {
    const lc_dec_job *j = (const lc_dec_job *)p;
    (void)tid;
    lc_dec_head(j->L, j->c, kv, j->pos, j->cs, j->sn, j->isa);
}

/* A linear on the caller's thread, each kernel with nt threads of its own.
 * Returns -1 when the row could not be quantized. */
static int lc_dec_linear(const lc_dlin *L, float *y, const float *x, int nt, int isa) {
    if (lc_dlin_prep(L, x, L->qa, L->sa, L->ap, isa)) return -1;
    lc_dlin_whole(L, y, x, isa, nt);
    return 0;
}

/* One layer on x (1, C), updated in place, on the caller's thread (kernels with nt
 * threads).  Returns 0, or -1 on a non-finite activation. */
static int lc_dec_layer(const lc_dlayer *L, lc_dctx *c, float *x, int64_t pos, const float *cs, const float *sn,
                        int nt, int isa) {
    const int64_t C = c->C, KV = c->KV, NI = c->inter;
    lc_rmsnorm_row(c->h, x, L->n1w, C, c->eps);
    if (lc_dec_linear(&L->qkv, c->qkvb, c->h, nt, isa)) return -1;
    if (nt > 1 && KV > 1) {
        lc_dec_job j = {.L = L, .c = c, .cs = cs, .sn = sn, .pos = pos, .isa = isa};
        lc_dec_team_for(nt, KV, lc_dec_head_unit, &j);
    } else {
        for (int64_t kv = 0; kv < KV; kv++) lc_dec_head(L, c, kv, pos, cs, sn, isa);
    }
    if (lc_dec_linear(&L->o, c->ob, c->att, nt, isa)) return -1;
    for (int64_t i = 0; i < C; i++) x[i] = x[i] + c->ob[i];
    lc_rmsnorm_row(c->h, x, L->n2w, C, c->eps);
    if (lc_dec_linear(&L->up, c->upb, c->h, nt, isa)) return -1;
    lc_mathfn_row(c->upb, c->upb, NI, LC_FN_SILU, isa);
    for (int64_t i = 0; i < NI; i++) c->upb[i] = c->upb[i] * c->upb[NI + i];
    if (lc_dec_linear(&L->down, c->ob, c->upb, nt, isa)) return -1;
    for (int64_t i = 0; i < C; i++) x[i] = x[i] + c->ob[i];
    return 0;
}

/* The team path's rows (the caller's): the residual stream x and the normed row h
 * (C each), and the quantized, packed input row of the Q8 linears. */
typedef struct {
    float *x, *h, *sa;
    int8_t *qa;
    int16_t *ap;
} lc_dpriv;

/* SiLU(gate) * up over elements [i0, i1) of the gate|up row u (NI each), in place */
static void lc_dec_swiglu(float *u, int64_t NI, int64_t i0, int64_t i1, int isa) {
    if (i0 >= i1) return;
    lc_mathfn_row(u + i0, u + i0, i1 - i0, LC_FN_SILU, isa);
    for (int64_t i = i0; i < i1; i++) u[i] = u[i] * u[NI + i];
}

/* fused gate|up: the same panels of gate and of up, then SiLU(gate) * up of their columns */
static void lc_dec_up_unit(void *p, int64_t u, int tid) {
    const lc_dec_job *j = (const lc_dec_job *)p;
    const int64_t q0 = u * j->ppu, q1 = q0 + j->ppu < j->pa ? q0 + j->ppu : j->pa;
    (void)tid;
    lc_dlin_panels(j->lin, j->y, j->x, j->ap, j->sa, q0, q1, j->isa);
    lc_dlin_panels(j->lin, j->y, j->x, j->ap, j->sa, q0 + j->pa, q1 + j->pa, j->isa);
    lc_dec_swiglu(j->y, j->c->inter, q0 * LC_NR, q1 * LC_NR, j->isa);
}

/* qkv and attention fused: KV head kv's columns of qkv (its query heads', its key's and its
 * value's panels; hd a whole number of panels), then the head (lc_dec_head reads only
 * those columns) */
static void lc_dec_qkv_head_unit(void *p, int64_t kv, int tid) {
    const lc_dec_job *j = (const lc_dec_job *)p;
    const lc_dctx *c = j->c;
    const int64_t hd = c->hd, g = c->H / c->KV, Q = c->H * hd, KVd = c->KV * hd;
    const int64_t c0[3] = {kv * g * hd, Q + kv * hd, Q + KVd + kv * hd}, w[3] = {g * hd, hd, hd};
    (void)tid;
    for (int i = 0; i < 3; i++)
        lc_dlin_panels(&j->L->qkv, c->qkvb, j->x, j->ap, j->sa, c0[i] / LC_NR, (c0[i] + w[i]) / LC_NR, j->isa);
    lc_dec_head(j->L, j->c, kv, j->pos, j->cs, j->sn, j->isa);
}

static void lc_dec_swiglu_range(void *p, int64_t i0, int64_t i1, int tid) {
    const lc_dec_job *j = (const lc_dec_job *)p;
    (void)tid;
    lc_dec_swiglu(j->y, j->c->inter, i0, i1, j->isa);
}

/* y = lin(x) (prepared into p) on nt threads of the team, bias included */
static void lc_dec_lin_team(const lc_dlin *lin, float *y, const float *x, const lc_dpriv *p, int nt, int isa) {
    lc_dec_job j = {.lin = lin, .y = y, .x = x, .ap = p->ap, .sa = p->sa, .isa = isa};
    j.np = (lin->N + LC_NR - 1) / LC_NR;
    j.ppu = lc_dlin_unit_panels(lin, j.np, nt, isa);
    lc_dec_team_for(nt, (j.np + j.ppu - 1) / j.ppu, lc_dec_lin_unit, &j);
}

/* Elements of SiLU(gate) * up per team range, at least */
#define LC_DEC_SWIGLU_GRAIN 2048

/* One layer with the team's nt threads: the row steps (norms, residual adds, activation
 * quantization) on the caller's thread into its rows p, the products as jobs — after qkv
 * and attention (one job when the KV heads split evenly between the threads), o, gate|up
 * and down each is complete.  With NI a whole number of panels a
 * unit takes the same panels of gate and of up and applies SiLU(gate) * up to its own
 * columns.  Returns -1 on a non-finite activation. */
static int lc_dec_layer_team(const lc_dlayer *L, lc_dctx *c, lc_dpriv *p, int64_t pos, const float *cs,
                             const float *sn, int nt, int isa) {
    const int64_t C = c->C, KV = c->KV, NI = c->inter;
    lc_rmsnorm_row(p->h, p->x, L->n1w, C, c->eps);
    if (lc_dlin_prep(&L->qkv, p->h, p->qa, p->sa, p->ap, isa)) return -1;
    lc_dec_job hj = {.L = L, .c = c, .x = p->h, .ap = p->ap, .sa = p->sa, .cs = cs, .sn = sn, .pos = pos,
                     .isa = isa};
    if (c->hd % LC_NR == 0 && KV % nt == 0 && L->qkv.N == (c->H + 2 * KV) * c->hd) {   /* one job */
        lc_dec_team_for(nt, KV, lc_dec_qkv_head_unit, &hj);
    } else {
        lc_dec_lin_team(&L->qkv, c->qkvb, p->h, p, nt, isa);
        lc_dec_team_for(nt, KV, lc_dec_head_unit, &hj);
    }
    if (lc_dlin_prep(&L->o, c->att, p->qa, p->sa, p->ap, isa)) return -1;
    lc_dec_lin_team(&L->o, c->ob, c->att, p, nt, isa);
    for (int64_t i = 0; i < C; i++) p->x[i] = p->x[i] + c->ob[i];
    lc_rmsnorm_row(p->h, p->x, L->n2w, C, c->eps);
    if (lc_dlin_prep(&L->up, p->h, p->qa, p->sa, p->ap, isa)) return -1;
    if (NI % LC_NR == 0) {
        lc_dec_job j = {.c = c, .lin = &L->up, .y = c->upb, .x = p->h, .ap = p->ap, .sa = p->sa, .isa = isa};
        j.pa = NI / LC_NR;
        j.ppu = lc_dlin_unit_panels(&L->up, 2 * j.pa, nt, isa) / 2;   /* of gate's (and up's) panels */
        if (j.ppu < 1) j.ppu = 1;
        lc_dec_team_for(nt, (j.pa + j.ppu - 1) / j.ppu, lc_dec_up_unit, &j);
    } else {
        lc_dec_lin_team(&L->up, c->upb, p->h, p, nt, isa);
        lc_dec_job j = {.c = c, .y = c->upb, .isa = isa};
        lc_team_range(nt, NI, LC_DEC_SWIGLU_GRAIN, lc_dec_swiglu_range, &j);
    }
    if (lc_dlin_prep(&L->down, c->upb, p->qa, p->sa, p->ap, isa)) return -1;
    lc_dec_lin_team(&L->down, c->ob, c->upb, p, nt, isa);
    for (int64_t i = 0; i < C; i++) p->x[i] = p->x[i] + c->ob[i];
    return 0;
}

/* Layers Ls[0..nl) on x (1, C) at position pos.  team: the products on lutcore's team
 * (no linear may be of kind TABLE); else layer by layer on this thread, each kernel with
 * nt threads of its own.  Returns 0, -1 on a non-finite activation, or -2 when memory
 * ran out. */
static int lc_dec_layers(const lc_dlayer *Ls, int64_t nl, lc_dctx *c, float *x, int64_t pos, const float *cs,
                         const float *sn, int isa, int nt, int team) {
    if (!team || nt <= 1) {
        for (int64_t l = 0; l < nl; l++)
            if (lc_dec_layer(&Ls[l], c, x, pos, cs, sn, nt, isa)) return -1;
        return 0;
    }
    /* the caller's rows, in one block: 2 C floats, then for the largest Q8 linear its
       blocks' scales, quantized row and packed rows (LC_MR: the tile's) */
    int64_t qk = 0, nb = 0, kp = 0;
    for (int64_t l = 0; l < nl; l++) {
        const lc_dlin *lins[4] = {&Ls[l].qkv, &Ls[l].o, &Ls[l].up, &Ls[l].down};
        for (int i = 0; i < 4; i++) {
            if (lins[i]->kind == LC_DLIN_FLOAT) continue;
            if (lins[i]->nblk * lins[i]->bk > qk) qk = lins[i]->nblk * lins[i]->bk;
            if (lins[i]->nblk > nb) nb = lins[i]->nblk;
            if (lins[i]->nblk * lins[i]->bkp > kp) kp = lins[i]->nblk * lins[i]->bkp;
        }
    }
    const size_t fl = lc_round_up((size_t)(2 * c->C + nb) * sizeof(float), 64);
    const size_t per = fl + lc_round_up((size_t)qk, 64) + (size_t)LC_MR * (size_t)kp * sizeof(int16_t);
    char *blk = (char *)lc_aligned_alloc(per);
    if (!blk) return -2;
    lc_dpriv p = {(float *)blk, (float *)blk + c->C, (float *)blk + 2 * c->C, (int8_t *)(blk + fl),
                  (int16_t *)(blk + fl + lc_round_up((size_t)qk, 64))};
    memset(p.ap, 0, (size_t)LC_MR * (size_t)kp * sizeof(int16_t));    /* the tile's unused rows */
    memcpy(p.x, x, (size_t)c->C * sizeof(float));
    int rc = 0;
    for (int64_t l = 0; l < nl && !rc; l++) rc = lc_dec_layer_team(&Ls[l], c, &p, pos, cs, sn, nt, isa);
    if (!rc) memcpy(x, p.x, (size_t)c->C * sizeof(float));
    lc_aligned_free(blk);
    return rc;
}

#endif /* LUTCORE_DECODE_H */
