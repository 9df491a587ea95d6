/* csrc/netlist/accum.h — dot products accumulated in a declared register (lutcore/units/accumulator.py:
 * the contract; lutcore/ops/accum.py the room): width W, wrap or saturate, addends of C products,
 * and the adder exact or a gate netlist evaluated bit-sliced by the netlist family's bodies.
 *
 *   lc_acc_run(out, cnt, src, L, K, spec, gates, G, outputs, isa, nthreads)
 *     out[l] = the register after the last addend of lane l's products p_0 .. p_{K-1};
 *     cnt[l] = its overflow events (cnt may be NULL)
 *   the products of lane l (lc_acc_src):
 *     stream  P (L, K) int64: p_k = P[l K + k]
 *     table   A (M, K), B (K, N) uint16 codes, tab int32: l = m N + n, p_k = tab[(A[m K + k] & am) << bb
 *             | (B[k N + n] & bm)]   (L = M N)
 * Returns 0, -1 for an adder netlist lc_nl_check refuses, -2 when an allocation failed.
 *
 * A step (the contract): an addend d (a chunk's exact sum, brought into [lo, hi] by the policy
 * first: one event) enters the register r; the exact adder gives s = r + d, a netlist its output
 * o on the W-bit patterns of r (operand a) and d (operand b): W + 1 bits read signed or not, or
 * W bits (signed: the overflow flag of a two's-complement adder).  An overflowing step keeps o's
 * low W bits (wrap) or the bound on s's side (saturate).
 *
 * Layout.  Lanes in tiles of T = 64 words (the body's pass) lanes; a tile's register as W bit
 * planes (netlist) or int64 lanes (exact), its counts as 40 bit planes incremented by each step's
 * overflow word.  Per step: the addends of the tile's lanes (gathered, summed over the chunk,
 * brought in range), their W-bit patterns into planes (the body's `planes`), one pass of the
 * adder (`run`), then per word the overflow mask and the new planes.  Tiles are dealt
 * dynamically to the threads; a lane's whole sum is made by one task, in k order: the same bits
 * at any thread count and on every body.
 */
#ifndef LUTCORE_NETLIST_ACCUM_H
#define LUTCORE_NETLIST_ACCUM_H

typedef struct {
    int W, sgn, sat;            /* register width 2..32, signed, saturate (else wrap) */
    int64_t chunk;              /* products an addend, >= 1 */
    int out_bits;               /* the adder netlist's outputs: W or W + 1; 0 the exact adder */
} lc_acc_spec;

typedef struct {
    const int64_t *P;           /* stream (L, K), or NULL: table */
    const uint16_t *A, *B;      /* table: A (M, K), B (K, N) */
    const int32_t *tab;
    int64_t N;
    int bb;                     /* b's index bits */
    uint16_t am, bm;            /* index masks */
} lc_acc_src;

/* addend j of lanes l0 .. l0 + n - 1 (n <= T) into d (int64), lanes past n 0 */
static void lc_acc_addends(const lc_acc_src *S, int64_t K, int64_t l0, int64_t n, int64_t k0, int64_t k1,
                           int64_t *d, int64_t T) {
    for (int64_t l = 0; l < T; l++) d[l] = 0;
    if (S->P) {
        for (int64_t l = 0; l < n; l++) {
            const int64_t *p = S->P + (l0 + l) * K;
            int64_t s = 0;
            for (int64_t k = k0; k < k1; k++) s += p[k];
            d[l] = s;
        }
        return;
    }
    const int64_t N = S->N;
    const int bb = S->bb;
    const uint16_t am = S->am, bm = S->bm;
    int64_t l = 0;
    while (l < n) {                       /* runs of one row m */
        const int64_t m = (l0 + l) / N, nn = (l0 + l) % N;
        const int64_t run = N - nn < n - l ? N - nn : n - l;
        const uint16_t *a = S->A + m * K;
        for (int64_t k = k0; k < k1; k++) {
            const int32_t *row = S->tab + ((int64_t)(a[k] & am) << bb);
            const uint16_t *b = S->B + k * N + nn;
            int64_t *dl = d + l;
            for (int64_t i = 0; i < run; i++) dl[i] += row[b[i] & bm];
        }
        l += run;
    }
}

/* addends outside [lo, hi] brought in by the policy; returns nothing, marks events in ev (0/1) */
static inline void lc_acc_bring_in(int64_t *d, uint8_t *ev, int64_t n, int64_t lo, int64_t hi, int W, int sat) {
    const uint64_t mask = W >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << W) - 1;
    for (int64_t l = 0; l < n; l++) {
        const int64_t v = d[l];
        const int over = v < lo || v > hi;
        ev[l] = (uint8_t)over;
        if (over) d[l] = sat ? (v > hi ? hi : lo) : (int64_t)(((uint64_t)(v - lo)) & mask) + lo;
    }
}

/* the counters += the events ev[l] (0/1) of lanes l < n */
static inline void lc_acc_count_bytes(uint64_t *CP, int64_t TW, const uint8_t *ev, int64_t n) {
    for (int64_t w = 0; w * 64 < n; w++) {
        uint64_t m = 0;
        const int64_t l1 = n - 64 * w < 64 ? n - 64 * w : 64;
        for (int64_t i = 0; i < l1; i++) m |= (uint64_t)ev[64 * w + i] << i;
        if (m) lc_acc_count(CP, TW, w, m);
    }
}

#define LC_ACC_EXACT_T 1024             /* the exact adder's tile: lanes */

/* one step through the adder netlist: the addends' W-bit patterns x into planes D, one pass, post */
static inline void lc_acc_step(const lc_nl_body *Bd, const lc_nl_plan *P, uint64_t *nets, const uint16_t *x,
                               uint64_t *R, uint64_t *D, uint64_t *O, uint64_t *CP, int64_t TW, int W,
                               const lc_acc_spec *sp, int count) {
    Bd->planes(D, TW, x, 64 * TW, W);
    Bd->run(P, nets, R, TW, D, TW, NULL, NULL, O, TW);
    Bd->post(O, R, D, CP, TW, W, sp->out_bits, sp->sgn, sp->sat, count);
}

/* A thread's scratch (allocated by its thread at its first tile, freed after the job): addends d
 * (T int64), register r (exact: T int64), events (T bytes), patterns (T uint16); netlist: nets,
 * register planes R (W TW), addend planes D (W TW), outputs O ((W+1) TW); counts: planes (40 TW). */
typedef struct {
    int64_t *d;
    uint64_t *pl, *nets;
    int failed;
} lc_acc_scratch;

typedef struct {
    int64_t *out, *cnt;
    const lc_acc_src *S;
    const lc_acc_spec *sp;
    const lc_nl_body *Bd;
    const lc_nl_plan *P;            /* NULL: the exact adder */
    const uint16_t *tab16;
    int64_t L, K, lo, hi, nsteps, TW, T;
    uint64_t wmask;
    lc_acc_scratch *scratch;        /* one per thread */
    int rc;
} lc_acc_job;

/* tile t (T lanes from l0 = t T): every lane's whole sum, in k order, by one thread */
static void lc_acc_tile(void *p, int64_t t, int tid) {
    lc_acc_job *j = (lc_acc_job *)p;
    const lc_acc_src *S = j->S;
    const lc_acc_spec *sp = j->sp;
    const lc_nl_body *Bd = j->Bd;
    const int W = sp->W;
    const int64_t L = j->L, K = j->K, lo = j->lo, hi = j->hi, nsteps = j->nsteps, TW = j->TW, T = j->T;
    const int64_t C = sp->chunk;
    const uint64_t wmask = j->wmask;
    const uint16_t *tab16 = j->tab16;
    int64_t *out = j->out, *cnt = j->cnt;
    lc_acc_scratch *sc = &j->scratch[tid];
    const int64_t np = sp->out_bits ? (int64_t)(3 * W + 1) * TW : 0;
    if (sc->failed) return;
    if (!sc->d) {
        sc->d = (int64_t *)lc_aligned_alloc(sizeof(int64_t) * (size_t)(2 * T) + T * 3 + 64);
        sc->pl = (uint64_t *)lc_aligned_alloc(sizeof(uint64_t) * (size_t)(np + LC_ACC_CNT_BITS * TW + 8));
        sc->nets = j->P ? lc_nl_nets(j->P, TW, 0) : NULL;
        if (!sc->d || !sc->pl || (j->P && !sc->nets)) {
            sc->failed = 1;
            __atomic_store_n(&j->rc, -2, __ATOMIC_RELAXED);
            return;
        }
    }
    int64_t *d = sc->d;
    uint64_t *pl = sc->pl, *nets = sc->nets;
    const lc_nl_plan *Pp = j->P;
    const int64_t l0 = t * T, n = L - l0 < T ? L - l0 : T;
    int64_t *r = d + T;
    uint8_t *ev = (uint8_t *)(d + 2 * T);
    uint16_t *x = (uint16_t *)(ev + T + 32);
    uint64_t *R = pl, *D = pl + (int64_t)W * TW, *O = pl + (int64_t)2 * W * TW;
    uint64_t *CP = pl + np;
    memset(CP, 0, sizeof(uint64_t) * (size_t)(LC_ACC_CNT_BITS * TW));
    if (sp->out_bits)
        memset(R, 0, sizeof(uint64_t) * (size_t)(W * TW));
    else
        for (int64_t l = 0; l < T; l++) r[l] = 0;
    if (tab16 && sp->out_bits && C == 1) {     /* a table's products as patterns, one k a step */
        for (int64_t k = 0; k < K; k++) {
            for (int64_t l = 0; l < n;) {          /* runs of one row m */
                const int64_t m = (l0 + l) / S->N, nn = (l0 + l) % S->N;
                const int64_t run = S->N - nn < n - l ? S->N - nn : n - l;
                Bd->gather(x + l, tab16 + ((int64_t)(S->A[m * K + k] & S->am) << 8), S->B + k * S->N + nn,
                           run, S->bm);
                l += run;
            }
            for (int64_t l = n; l < T; l++) x[l] = 0;
            lc_acc_step(Bd, Pp, nets, x, R, D, O, CP, TW, W, sp, cnt != NULL);
        }
    } else
    for (int64_t step = 0; step < nsteps; step++) {
        const int64_t k0 = step * C, k1 = k0 + C < K ? k0 + C : K;
        lc_acc_addends(S, K, l0, n, k0, k1, d, T);
        if (C > 1) {
            lc_acc_bring_in(d, ev, n, lo, hi, W, sp->sat);
            if (cnt) lc_acc_count_bytes(CP, TW, ev, n);
        }
        if (!sp->out_bits) {                  /* the exact adder */
            if (cnt) {
                for (int64_t l = 0; l < n; l++) {
                    const int64_t s = r[l] + d[l];
                    ev[l] = (uint8_t)(s < lo || s > hi);
                }
                lc_acc_count_bytes(CP, TW, ev, n);
            }
            if (sp->sat)
                for (int64_t l = 0; l < T; l++) {
                    const int64_t s = r[l] + d[l];
                    r[l] = s > hi ? hi : s < lo ? lo : s;
                }
            else
                for (int64_t l = 0; l < T; l++)
                    r[l] = (int64_t)(((uint64_t)(r[l] + d[l] - lo)) & wmask) + lo;
            continue;
        }
        /* the adder netlist: addend patterns into planes, one pass, the overflow words */
        for (int64_t l = 0; l < T; l++) x[l] = (uint16_t)((uint64_t)d[l] & wmask);
        lc_acc_step(Bd, Pp, nets, x, R, D, O, CP, TW, W, sp, cnt != NULL);
    }
    if (sp->out_bits)
        Bd->values(out + l0, R, TW, n, W, sp->sgn);
    else
        memcpy(out + l0, r, sizeof(int64_t) * (size_t)n);
    if (cnt) Bd->values(cnt + l0, CP, TW, n, LC_ACC_CNT_BITS, 0);
}

static int lc_acc_run(int64_t *out, int64_t *cnt, const lc_acc_src *S, int64_t L, int64_t K, const lc_acc_spec *sp,
                      const int32_t *gates, int64_t G, const int32_t *outputs, int isa, int nthreads) {
    const int W = sp->W;
    if (sp->out_bits && lc_nl_check(gates, G, outputs, W, W, sp->out_bits)) return -1;
    if (L <= 0) return 0;
    const int64_t lo = sp->sgn ? -((int64_t)1 << (W - 1)) : 0;
    const int64_t hi = sp->sgn ? ((int64_t)1 << (W - 1)) - 1 : ((int64_t)1 << W) - 1;
    const int64_t C = sp->chunk, nsteps = (K + C - 1) / C;
    const uint64_t wmask = (UINT64_C(1) << W) - 1;
    const lc_nl_body *Bd = lc_nl_pick(isa);
    lc_nl_plan P;
    int haveplan = 0, rc = 0;
    if (sp->out_bits) {
        if (lc_nl_plan_make(&P, gates, G, outputs, W, W, sp->out_bits, 0)) return -2;
        haveplan = 1;
    }
    const int64_t TW = sp->out_bits ? Bd->words : LC_ACC_EXACT_T / 64, T = 64 * TW;
    /* a table's products as W-bit patterns, rows of 256 (b's index bits masked at the lookup) */
    uint16_t *tab16 = NULL;
    if (!S->P && sp->out_bits && C == 1) {
        const int64_t rows = (int64_t)S->am + 1, cols = (int64_t)S->bm + 1;
        tab16 = (uint16_t *)lc_aligned_alloc(sizeof(uint16_t) * (size_t)(rows * 256));
        if (!tab16) {
            if (haveplan) lc_nl_plan_free(&P);
            return -2;
        }
        memset(tab16, 0, sizeof(uint16_t) * (size_t)(rows * 256));
        for (int64_t ia = 0; ia < rows; ia++)
            for (int64_t ib = 0; ib < cols; ib++)
                tab16[ia * 256 + ib] = (uint16_t)((uint64_t)(int64_t)S->tab[(ia << S->bb) | ib] & wmask);
    }
    const int64_t ntile = (L + T - 1) / T;
    const int nt = ntile < nthreads ? (int)ntile : (nthreads > 0 ? nthreads : 1);
    lc_acc_job j = {.out = out, .cnt = cnt, .S = S, .sp = sp, .Bd = Bd, .P = haveplan ? &P : NULL, .tab16 = tab16,
                    .L = L, .K = K, .lo = lo, .hi = hi, .nsteps = nsteps, .TW = TW, .T = T, .wmask = wmask,
                    .scratch = (lc_acc_scratch *)calloc((size_t)nt, sizeof(lc_acc_scratch)), .rc = 0};
    if (!j.scratch)
        rc = -2;
    else {
        lc_team_for(nt, ntile, lc_acc_tile, &j);
        rc = j.rc;
        for (int i = 0; i < nt; i++) {
            lc_aligned_free(j.scratch[i].d);
            lc_aligned_free(j.scratch[i].pl);
            lc_aligned_free(j.scratch[i].nets);
        }
        free(j.scratch);
    }
    if (haveplan) lc_nl_plan_free(&P);
    lc_aligned_free(tab16);
    return rc;
}

#endif /* LUTCORE_NETLIST_ACCUM_H */
