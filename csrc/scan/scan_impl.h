/* csrc/scan/scan_impl.h — the selective-scan algorithm, written once.
 *
 * Included by scan.h three times (generic float, generic double, AVX2 float)
 * and by csrc/scan/x86/avx512.c (AVX-512 float) with the LC_V_* vector vocabulary
 * defined, so every body performs the same operations in the same order:
 * generic float32, AVX2 and AVX-512 give the same bits.
 *
 * Unit of work: one batch row b and one block of 16 channels ("lanes"); a
 * partial block is zero-padded (padding lanes contribute exact zeros).  A unit
 * is LC_VN = 16 / LC_VL vectors of LC_VL lanes (the vocabulary's width: 8 lanes,
 * two "halves" side by side; or 16, one zmm); every lane's operations are the
 * same at either width.  State index n is the outer loop, time the inner one:
 * the unit's state lives in registers, and y accumulates over n in a fixed
 * order (n = 0..N-1).
 *
 * Buffers (row-major, contiguous):
 *   u, delta, z, y, ypre      (B, L, D)        IN / OUT
 *   A                         (D, N)           IN
 *   Bm, Cm                    (B, L, N)        IN
 *   Dv, dbias                 (D,)             IN, optional (NULL)
 *   h0, hlast                 (B, D, N)        IN / OUT, optional
 *   hs                        (B, nck, D, N)   OUT (forward, optional): the state
 *                             before each chunk of T steps, for the backward
 */

/* vectors per 16-lane unit; a statement over each of them (a literal count: unrolled) */
#define LC_VN (16 / LC_VL)
#if defined(__GNUC__) && !defined(__clang__)
#define LC_EACH(i) _Pragma("GCC unroll 2") for (int i = 0; i < LC_VN; i++)
#else
#define LC_EACH(i) for (int i = 0; i < LC_VN; i++)
#endif
/* store at p the 8-lane sum (lanes i + lanes i + 8) of a unit's vectors v[] */
#if LC_VL == 8
#define LC_FOLD8(p, v) LC_VSTORE(p, LC_VADD((v)[0], (v)[1]))
#else
#define LC_FOLD8(p, v) LC_VFOLD8(p, (v)[0])
#endif

/* gather LC_VL lanes of a (.., D) row into a contiguous block, zero padding */
LC_V_TARGET static inline void LC_V_NAME(lanes_in)(LC_ST *dst, const LC_ST *src, int nl) {
    int i = 0;
    for (; i < nl; i++) dst[i] = src[i];
    for (; i < LC_VL; i++) dst[i] = 0;
}
/* LC_VL lanes of a row as a vector (zero-padded past nl) */
#define LC_LANES(src, nl, tmp) ((nl) == LC_VL ? LC_VLOAD(src) : (LC_V_NAME(lanes_in)(tmp, src, nl), LC_VLOAD(tmp)))
/* store the first nl lanes */
#define LC_LANES_OUT(dst, v, nl, tmp)                                                        \
    do {                                                                                     \
        if ((nl) == LC_VL) LC_VSTORE(dst, v);                                                \
        else { LC_VSTORE(tmp, v); for (int i_ = 0; i_ < (nl); i_++) (dst)[i_] = (tmp)[i_]; } \
    } while (0)
/* the lanes of vector k (lanes LC_VL k ..) of a 16-lane unit holding nl lanes */
#define LC_PART(nl, k) ((nl) - LC_VL * (k) >= LC_VL ? LC_VL : ((nl) - LC_VL * (k) > 0 ? (nl) - LC_VL * (k) : 0))
/* the lanes of unit k (16 channels each) in a run of dw channels */
#define LC_UNIT_NL(dw, k) ((int)((dw) - (k) * 16 < 16 ? (dw) - (k) * 16 : 16))

/* Ask for the lines of p[0 .. n): one row's run of channels, a few rows ahead
 * of its use (rows are D apart, a page or more: the prefetchers do not follow). */
static inline void LC_V_NAME(fetch_run)(const LC_ST *p, int64_t n) {
    if (!p || n <= 0) return;
    for (int64_t c = 0; c < n; c += 64 / (int64_t)sizeof(LC_ST)) __builtin_prefetch(p + c, 0, 3);
    __builtin_prefetch(p + n - 1, 0, 3);
}

/* One time step of a unit's vectors, from its dt and dt u rows dr, wr: the
 * decays a = exp(x) ("zoh", Ar = A) or 2^x ("simplified", Ar = A log2 e),
 * x = dt Ar, and the input factor w = dt u, times phi1(x) for zoh (kept in p when
 * p is not NULL).  Written once for the forward and the backward's recompute, so
 * both make the same operations; inlined with literal zoh and fast.  fast: the
 * caller proved |x| <= LC_EXP_FAST_ABS on every lane, so exp needs no range check
 * (the same bits as the checked one there). */
LC_V_TARGET static inline __attribute__((always_inline)) void LC_V_NAME(scan_step)(
    LC_VT *a, LC_VT *w, LC_VT *p, const LC_ST *dr, const LC_ST *wr, const LC_VT *Ar, const int zoh,
    const int fast) {
    /* the halves side by side (statement by statement), not one after the other:
       their exp chains overlap (a whole step per half was ~8% slower in the forward) */
    LC_VT x[LC_VN];
    LC_EACH(i) x[i] = LC_VMUL(LC_VLOAD(dr + LC_VL * i), Ar[i]);
    if (zoh) {
        LC_EACH(i) a[i] = fast ? LC_VEXP_FAST(x[i]) : LC_VEXP(x[i]);
    } else {
        LC_EACH(i) a[i] = fast ? LC_VEXP2_FAST(x[i]) : LC_VEXP2(x[i]);
    }
    LC_EACH(i) w[i] = LC_VLOAD(wr + LC_VL * i);
    if (zoh) {                                            /* Bbar u = (phi1(x) dt u) B */
        LC_VT ph[LC_VN];
        LC_EACH(i) ph[i] = LC_VPHI1(x[i], a[i]);
        if (p) {
            LC_EACH(i) p[i] = ph[i];
        }
        LC_EACH(i) w[i] = LC_VMUL(ph[i], w[i]);
    }
}

/* One state n over nt time steps for a 16-lane unit: one recurrence per
 * vector (two independent ones at 8 lanes) sharing the B/C broadcasts.
 * dtb/wb/yb are (nt, 16) lane rows, wb = dt * u.  Inlined with literal zoh and
 * fast so the branches go. */
LC_V_TARGET static inline __attribute__((always_inline)) void LC_V_NAME(scan_fwd_run)(
    LC_VT *hp, const LC_VT *Ar, const LC_ST *dtb, const LC_ST *wb, LC_ST *yb,
    const LC_ST *Bn, const LC_ST *Cn, int64_t N, int64_t nt, const int zoh, const int fast) {
    LC_VT h[LC_VN];
    LC_EACH(i) h[i] = hp[i];
    for (int64_t t = 0; t < nt; t++) {
        LC_ST *yr = yb + t * 16;
        LC_VT Bt = LC_VSET1(Bn[t * N]), Ct = LC_VSET1(Cn[t * N]);
        LC_VT a[LC_VN], w[LC_VN];
        LC_V_NAME(scan_step)(a, w, NULL, dtb + t * 16, wb + t * 16, Ar, zoh, fast);
        LC_EACH(i) h[i] = LC_VFMA(a[i], h[i], LC_VMUL(w[i], Bt));   /* one rounding: a h + (dt u) B */
        LC_EACH(i) LC_VSTORE(yr + LC_VL * i, LC_VFMA(Ct, h[i], LC_VLOAD(yr + LC_VL * i)));
    }
    LC_EACH(i) hp[i] = h[i];
}

/* A's rows for one unit, times scale (1, or log2 e for the decays as powers of 2),
 * as (N, 16) lane rows (zero past nl) and, per state, max |scale A| over them */
static inline void LC_V_NAME(a_lanes)(LC_ST *ak, LC_ST *amx, const LC_ST *A, int64_t d0, int nl, int64_t N,
                                      LC_ST scale) {
    for (int64_t n = 0; n < N; n++) {
        amx[n] = 0;
        for (int i = 0; i < 16; i++) {
            ak[n * 16 + i] = i < nl ? A[(d0 + i) * N + n] * scale : 0;
            amx[n] = LC_SMAXABS(amx[n], ak[n * 16 + i]);
        }
    }
}

/* per unit, max |dt| over its lane maxima (NaN sticky) */
LC_V_TARGET static inline void LC_V_NAME(unit_max)(LC_ST *dmx, const LC_VT *mx, int64_t ns) {
    LC_ST tmp[LC_VL];
    for (int64_t k = 0; k < ns; k++) {
        LC_VSTORE(tmp, mx[k]);
        dmx[k] = 0;
        for (int i = 0; i < LC_VL; i++) dmx[k] = LC_SMAXABS(dmx[k], tmp[i]);
    }
}

/* Forward of a span of units [k0, k1) (16 channels each, the last one
 * possibly partial: lanes past nl are zero-padded and contribute exact zeros)
 * of batch row b.  Time goes in blocks of LC_SCAN_TB steps.  Per block:
 *   gather  row by row, the span's channels of u and delta (contiguous runs of
 *           up to 512 bytes, so the hardware streams them) into per-unit lane
 *           rows dt, w = dt u, and zeroed y;
 *   run     unit by unit, every state n over the block (n outer, so y
 *           accumulates n = 0, 1, 2, ... in order) from its saved state;
 *   finish  row by row, y + D u, the silu(z) gate, the stores.
 * Every unit runs its own recurrence: the bits do not depend on the span. */
LC_V_TARGET static void LC_V_NAME(scan_fwd_span)(
    LC_ST *y, LC_ST *ypre, LC_ST *hs, LC_ST *hlast,
    const LC_ST *u, const LC_ST *delta, const LC_ST *A, const LC_ST *Bm, const LC_ST *Cm,
    const LC_ST *Dv, const LC_ST *z, const LC_ST *dbias, const LC_ST *h0,
    int64_t b, int64_t k0, int64_t k1, int64_t L, int64_t D, int64_t N, int64_t T,
    int softplus, int zoh, LC_ST *work /* lc_scan_fwd_work(N) */) {
    const int64_t BS = LC_SCAN_TB * 16;                      /* one unit's block of lane rows */
    LC_ST *dtb = work, *wb = dtb + LC_SCAN_SPAN * BS, *yb = wb + LC_SCAN_SPAN * BS;   /* (span, TB, 16) */
    LC_ST *hst = yb + LC_SCAN_SPAN * BS;                     /* (span, N, 16): h between time blocks */
    LC_ST *Ast = hst + LC_SCAN_SPAN * N * 16;                /* (span, N, 16): A, lane rows */
    LC_ST *vb = Ast + LC_SCAN_SPAN * N * 16, *vd = vb + LC_SCAN_SPAN * 16;   /* (span, 16): bias, D (0 if none) */
    LC_ST *amx = vd + LC_SCAN_SPAN * 16;                     /* (span, N): max |A| over the unit's lanes */
    LC_ST *dmx = amx + LC_SCAN_SPAN * N;                     /* (span,): max |dt| over the block, NaN sticky */
    LC_ST tmp[16];
    const int64_t nck = (L + T - 1) / T, ns = k1 - k0;
    const int64_t d0s = k0 * 16, dw = (k1 * 16 < D ? k1 * 16 : D) - d0s;   /* the span's channels */
    for (int64_t k = 0; k < ns; k++) {
        const int64_t d0 = d0s + k * 16;
        const int nl = LC_UNIT_NL(dw, k);
        LC_ST *hk = hst + k * N * 16, *ak = Ast + k * N * 16;
        LC_V_NAME(a_lanes)(ak, amx + k * N, A, d0, nl, N, zoh ? (LC_ST)1 : (LC_ST)LC_LOG2E_ST);
        for (int64_t n = 0; n < N; n++)
            for (int i = 0; i < 16; i++) hk[n * 16 + i] = (h0 && i < nl) ? h0[(b * D + d0 + i) * N + n] : 0;
        for (int i = 0; i < 16; i++) {
            vb[k * 16 + i] = (dbias && i < nl) ? dbias[d0 + i] : 0;
            vd[k * 16 + i] = (Dv && i < nl) ? Dv[d0 + i] : 0;
        }
    }
    for (int64_t tb = 0; tb < L; tb += LC_SCAN_TB) {
        const int64_t te = tb + LC_SCAN_TB < L ? tb + LC_SCAN_TB : L;
        LC_VT mx[LC_SCAN_SPAN];
        for (int64_t k = 0; k < ns; k++) mx[k] = LC_VZERO;
        for (int64_t t = tb; t < te; t++) {
            const int64_t row = (b * L + t) * D + d0s, r = (t - tb) * 16;
            if (t + LC_SCAN_PF < L) {
                LC_V_NAME(fetch_run)(u + row + LC_SCAN_PF * D, dw);
                LC_V_NAME(fetch_run)(delta + row + LC_SCAN_PF * D, dw);
            }
            for (int64_t j = 0; j < LC_VN * ns; j++) {      /* vector j: unit j / LC_VN, part j % LC_VN */
                const int64_t k = j / LC_VN, o = k * BS + r + LC_VL * (j % LC_VN), c = row + LC_VL * j;
                const int nh = LC_PART(LC_UNIT_NL(dw, k), (int)(j % LC_VN));
                LC_VT uu = LC_LANES(u + c, nh, tmp), v = LC_LANES(delta + c, nh, tmp);
                if (dbias) v = LC_VADD(v, LC_VLOAD(vb + LC_VL * j));
                if (softplus) v = LC_VSOFTPLUS(v);
                mx[k] = LC_VMAXABS(mx[k], v);
                LC_VSTORE(dtb + o, v);
                LC_VSTORE(wb + o, LC_VMUL(v, uu));
                LC_VSTORE(yb + o, LC_VZERO);
            }
        }
        LC_V_NAME(unit_max)(dmx, mx, ns);
        for (int64_t k = 0; k < ns; k++) {
            const int64_t d0 = d0s + k * 16;
            const int nl = LC_UNIT_NL(dw, k);
            LC_ST *hk = hst + k * N * 16;
            const LC_ST *ak = Ast + k * N * 16;
            for (int64_t n = 0; n < N; n++) {
                LC_VT Ar[LC_VN], h[LC_VN];
                LC_EACH(i) Ar[i] = LC_VLOAD(ak + n * 16 + LC_VL * i);
                LC_EACH(i) h[i] = LC_VLOAD(hk + n * 16 + LC_VL * i);
                const LC_ST *Bn = Bm + b * L * N + n, *Cn = Cm + b * L * N + n;
                /* |dt A| <= max|dt| max|A| (rounding is monotonic); NaN fails the test */
                const int fast = dmx[k] * amx[k * N + n] <= (zoh ? (LC_ST)LC_EXP_FAST_ABS : (LC_ST)LC_EXP2_FAST_ABS);
                for (int64_t t = tb; t < te;) {
                    const int64_t se = (t / T + 1) * T < te ? (t / T + 1) * T : te;   /* chunk-aligned segment */
                    if (hs && t % T == 0) {
                        LC_EACH(i) LC_VSTORE(tmp + LC_VL * i, h[i]);
                        LC_ST *dst = hs + ((b * nck + t / T) * D + d0) * N + n;
                        for (int i = 0; i < nl; i++) dst[i * N] = tmp[i];
                    }
                    const int64_t o = k * BS + (t - tb) * 16;
                    const LC_ST *dr = dtb + o, *wr = wb + o, *Bt = Bn + t * N, *Ct = Cn + t * N;
                    LC_ST *yr = yb + o;
                    /* literal flags, so each inlined copy loses its branches */
#define LC_RUN(Z, F) LC_V_NAME(scan_fwd_run)(h, Ar, dr, wr, yr, Bt, Ct, N, se - t, Z, F)
                    if (zoh) { if (fast) LC_RUN(1, 1); else LC_RUN(1, 0); }
                    else { if (fast) LC_RUN(0, 1); else LC_RUN(0, 0); }
#undef LC_RUN
                    t = se;
                }
                LC_EACH(i) LC_VSTORE(hk + n * 16 + LC_VL * i, h[i]);
            }
        }
        for (int64_t t = tb; t < te; t++) {
            const int64_t row = (b * L + t) * D + d0s, r = (t - tb) * 16;
            if (z && t + LC_SCAN_PF < L) LC_V_NAME(fetch_run)(z + row + LC_SCAN_PF * D, dw);
            for (int64_t j = 0; j < LC_VN * ns; j++) {
                const int64_t c = row + LC_VL * j;
                const int nh = LC_PART(LC_UNIT_NL(dw, j / LC_VN), (int)(j % LC_VN));
                if (!nh) continue;
                LC_VT yt = LC_VLOAD(yb + (j / LC_VN) * BS + r + LC_VL * (j % LC_VN));
                if (Dv) yt = LC_VADD(yt, LC_VMUL(LC_VLOAD(vd + LC_VL * j), LC_LANES(u + c, nh, tmp)));
                if (z) {
                    if (ypre) LC_LANES_OUT(ypre + c, yt, nh, tmp);
                    yt = LC_VMUL(yt, LC_VSILU(LC_LANES(z + c, nh, tmp)));
                }
                LC_LANES_OUT(y + c, yt, nh, tmp);
            }
        }
    }
    if (hlast)
        for (int64_t k = 0; k < ns; k++) {
            const int nl = LC_UNIT_NL(dw, k);
            for (int64_t n = 0; n < N; n++)
                for (int i = 0; i < nl; i++) hlast[(b * D + d0s + k * 16 + i) * N + n] = hst[(k * N + n) * 16 + i];
        }
}

/* The backward's recompute of one state n over one chunk, a unit's vectors:
 * the forward's recurrence (scan_step) from the saved chunk start, storing each
 * step's state (hb), decay (ab) and, zoh, phi1 (pb) as (nt, 16) rows.  Inlined with
 * literal zoh and fast, so the loop carries no branches. */
LC_V_TARGET static inline __attribute__((always_inline)) void LC_V_NAME(scan_rec_run)(
    LC_VT *h, const LC_VT *Ae, const LC_ST *dtb, const LC_ST *wb, LC_ST *hb, LC_ST *ab, LC_ST *pb,
    const LC_ST *Bn, int64_t N, int64_t nt, const int zoh, const int fast) {
    LC_VT hv[LC_VN];
    LC_EACH(i) hv[i] = h[i];
    for (int64_t t = 0; t < nt; t++) {
        const int64_t r = t * 16;
        LC_VT Bt = LC_VSET1(Bn[t * N]);
        LC_VT a[LC_VN], w[LC_VN], p[LC_VN];
        LC_V_NAME(scan_step)(a, w, p, dtb + r, wb + r, Ae, zoh, fast);
        if (zoh) {
            LC_EACH(i) LC_VSTORE(pb + r + LC_VL * i, p[i]);
        }
        LC_EACH(i) hv[i] = LC_VFMA(a[i], hv[i], LC_VMUL(w[i], Bt));
        LC_EACH(i) LC_VSTORE(hb + r + LC_VL * i, hv[i]);
        LC_EACH(i) LC_VSTORE(ab + r + LC_VL * i, a[i]);
    }
    LC_EACH(i) h[i] = hv[i];
}

/* Reverse pass of one state n over one chunk, a unit's vectors at once (at 8
 * lanes, two independent carry chains share the B/C broadcasts and overlap
 * their latencies).  hb/ab/pb: the chunk's recomputed states, Abar and
 * (zoh) phi1 rows, (nt, 16); hp0: the state before the chunk.  Accumulates sdw
 * (sum over n of d(dt u)), sdx (sum over n of dx A), dA (dx dt over t); writes
 * the per-step dC/dB products, lanes 0..7 + lanes 8..15, into pcv/pbv (nt, 8).  An
 * inlined literal zoh removes the branch. */
LC_V_TARGET static inline __attribute__((always_inline)) void LC_V_NAME(scan_bwd_rev)(
    LC_VT *carry, LC_VT *dAacc, const LC_VT *An, const LC_VT *hp0, const LC_ST *hb, const LC_ST *ab,
    const LC_ST *pb, const LC_ST *dtb, const LC_ST *wb, const LC_ST *dyb, LC_ST *sdw, LC_ST *sdx,
    LC_ST *pcv, LC_ST *pbv, const LC_ST *Bn, const LC_ST *Cn, int64_t N, int64_t nt, const int zoh) {
    LC_VT cv[LC_VN], dAv[LC_VN];
    LC_EACH(i) cv[i] = carry[i];
    LC_EACH(i) dAv[i] = dAacc[i];
    for (int64_t t = nt - 1; t >= 0; t--) {
        const int64_t r = t * 16;
        LC_VT Bt = LC_VSET1(Bn[t * N]), Ct = LC_VSET1(Cn[t * N]);
        LC_VT cprod[LC_VN], bprod[LC_VN];
#define LC_REV_HALF(k, cr, dA)                                                                    \
        {                                                                                         \
            const int64_t o = r + LC_VL * (k);                                                    \
            LC_VT dyy = LC_VLOAD(dyb + o), a = LC_VLOAD(ab + o), w = LC_VLOAD(wb + o);            \
            LC_VT hp = t > 0 ? LC_VLOAD(hb + o - 16) : hp0[k];                                    \
            LC_VT g = LC_VFMA(dyy, Ct, cr);                              /* dL/dh_t */            \
            cprod[k] = LC_VMUL(dyy, LC_VLOAD(hb + o));                                            \
            LC_VT dq = LC_VMUL(g, Bt);                                   /* d(Bbar u) / dB = q */ \
            LC_VT dx = LC_VMUL(LC_VMUL(g, hp), a);                       /* through Abar = exp(x) */ \
            LC_VT q = w, dw = dq;                                                                 \
            if (zoh) {                                                                            \
                LC_VT p = LC_VLOAD(pb + o), x = LC_VMUL(LC_VLOAD(dtb + o), An[k]);                \
                q = LC_VMUL(p, w);                                                                \
                dw = LC_VMUL(dq, p);                                                              \
                dx = LC_VFMA(LC_VMUL(dq, w), LC_VDPHI1(x, a, p), dx);                             \
            }                                                                                     \
            bprod[k] = LC_VMUL(g, q);                                                             \
            LC_VSTORE(sdw + o, LC_VADD(LC_VLOAD(sdw + o), dw));                                   \
            LC_VSTORE(sdx + o, LC_VFMA(dx, An[k], LC_VLOAD(sdx + o)));                            \
            dA = LC_VFMA(dx, LC_VLOAD(dtb + o), dA);                                              \
            cr = LC_VMUL(a, g);                                                                   \
        }
        LC_EACH(i) LC_REV_HALF(i, cv[i], dAv[i])        /* each vector's whole step, in turn */
#undef LC_REV_HALF
        LC_FOLD8(pcv + t * 8, cprod);
        LC_FOLD8(pbv + t * 8, bprod);
    }
    LC_EACH(i) carry[i] = cv[i];
    LC_EACH(i) dAacc[i] = dAv[i];
}

/* Backward of a group of units [k0, k1) (16 channels each, the last one
 * possibly partial) of batch row b.  Chunks of T steps in reverse, the outer
 * loop; per chunk:
 *   gather  row by row over the group's channels (contiguous runs): dt (and
 *           softplus' from its exp), w = dt u, dy gated by silu(z), into
 *           per-unit lane rows;
 *   states  unit by unit, for every state n: recompute the chunk's states from
 *           the saved chunk start (exactly as the forward), then the reverse
 *           pass;
 *   finish  row by row, du, ddelta, dz.
 * dB/dC (reduced over channels) are added into the group partials dBp/dCp,
 * laid out (N, L); the per-step lane sums (LC_FOLD8's 8 lanes, in the hadd
 * tree's order) of 8 steps at a time go through LC_VHSUM8, units in order.  dA/dD/ddelta_bias go to per-batch partials.  The
 * caller reduces partials in a fixed order. */
LC_V_TARGET static void LC_V_NAME(scan_bwd_group)(
    LC_ST *du, LC_ST *ddelta, LC_ST *dAp, LC_ST *dBp, LC_ST *dCp, LC_ST *dDp, LC_ST *dz,
    LC_ST *ddbp, LC_ST *dh0,
    const LC_ST *dout, const LC_ST *u, const LC_ST *delta, const LC_ST *A, const LC_ST *Bm,
    const LC_ST *Cm, const LC_ST *Dv, const LC_ST *z, const LC_ST *dbias, const LC_ST *hs,
    const LC_ST *ypre,
    int64_t b, int64_t k0, int64_t k1, int64_t L, int64_t D, int64_t N, int64_t T,
    int softplus, int zoh, LC_ST *work /* lc_scan_bwd_work(T, N) */) {
    const int64_t T16 = T * 16, G = LC_SCAN_GROUP_UNITS, ns = k1 - k0;
    /* (T, 16) blocks are 4 KiB (float, T 64): blocks a multiple of 4 KiB apart share
     * their L1 sets, and the loops below walk ten of them side by side, so each unit's
     * block (TU) and each buffer (BU) starts LC_SCAN_PAD elements further on */
    const int64_t TU = T16 + LC_SCAN_PAD, BU = G * TU + LC_SCAN_PAD;
    /* per unit, (G, T, 16) each: filled by the gather, read by the states and the finish */
    LC_ST *dtb = work, *ub = dtb + BU, *wb = ub + BU, *dyb = wb + BU;
    LC_ST *sdw = dyb + BU, *sdx = sdw + BU, *dspb = sdx + BU;                  /* softplus' */
    LC_ST *zb = dspb + BU, *sgb = zb + BU, *gob = sgb + BU;                    /* z, sigmoid(z), dout */
    /* per state, shared: the chunk's states, Abar, phi1 (T, 16); per-step lane products (T, 8) */
    LC_ST *hb = gob + BU, *ab = hb + TU, *pb = ab + TU, *pcv = pb + TU, *pbv = pcv + T * 8 + LC_SCAN_PAD;
    /* per unit, kept across chunks: carry, dA accumulators, A lane rows (G, N, 16) */
    LC_ST *carr = pbv + T * 8 + LC_SCAN_PAD, *dAa = carr + G * N * 16, *Ast = dAa + G * N * 16;
    LC_ST *vb = Ast + G * N * 16, *vd = vb + G * 16;        /* (G, 16): bias, D lanes (0 if none) */
    LC_ST *dDs = vd + G * 16, *dbs = dDs + G * 16;           /* (G, 16): dD, d delta_bias sums */
    LC_ST *amx = dbs + G * 16, *dmx = amx + G * N;           /* (G, N) max |A|; (G,) max |dt| */
    LC_ST *A2st = dmx + G, *amx2 = A2st + G * N * 16;        /* "simplified": A log2 e rows, their max */
    LC_ST tmp[16], sums[8];
    const int64_t d0s = k0 * 16, dw = (k1 * 16 < D ? k1 * 16 : D) - d0s;   /* the group's channels */
    for (int64_t k = 0; k < ns; k++) {
        const int64_t d0 = d0s + k * 16;
        const int nl = LC_UNIT_NL(dw, k);
        LC_V_NAME(a_lanes)(Ast + k * N * 16, amx + k * N, A, d0, nl, N, (LC_ST)1);
        if (!zoh) LC_V_NAME(a_lanes)(A2st + k * N * 16, amx2 + k * N, A, d0, nl, N, (LC_ST)LC_LOG2E_ST);
        for (int64_t q = k * N * 16; q < (k + 1) * N * 16; q++) carr[q] = dAa[q] = 0;
        for (int i = 0; i < 16; i++) {
            vb[k * 16 + i] = (dbias && i < nl) ? dbias[d0 + i] : 0;
            vd[k * 16 + i] = (Dv && i < nl) ? Dv[d0 + i] : 0;
            dDs[k * 16 + i] = dbs[k * 16 + i] = 0;
        }
    }
    const int64_t nck = (L + T - 1) / T;
    for (int64_t c = nck - 1; c >= 0; c--) {
        const int64_t t0 = c * T, nt = (t0 + T < L ? t0 + T : L) - t0;
        LC_VT mx[LC_SCAN_GROUP_UNITS];
        for (int64_t k = 0; k < ns; k++) mx[k] = LC_VZERO;
        /* gather the chunk's rows; rows are prefetched LC_SCAN_PF steps ahead, in
         * the direction the chunks go (the chunk before this one comes next) */
        for (int64_t t = 0; t < nt; t++) {
            const int64_t row = (b * L + t0 + t) * D + d0s, r = t * 16;
            const int64_t tp = t + LC_SCAN_PF < nt ? t + LC_SCAN_PF : t + LC_SCAN_PF - nt - T;
            if (t0 + tp >= 0 && t0 + tp < L) {
                const int64_t pr = (b * L + t0 + tp) * D + d0s;
                LC_V_NAME(fetch_run)(u + pr, dw);
                LC_V_NAME(fetch_run)(delta + pr, dw);
                LC_V_NAME(fetch_run)(dout + pr, dw);
                LC_V_NAME(fetch_run)(z ? z + pr : NULL, dw);
            }
            for (int64_t j = 0; j < LC_VN * ns; j++) {      /* vector j: unit j / LC_VN, part j % LC_VN */
                const int64_t k = j / LC_VN, o = k * TU + r + LC_VL * (j % LC_VN), cc = row + LC_VL * j;
                const int nh = LC_PART(LC_UNIT_NL(dw, k), (int)(j % LC_VN));
                LC_VT uu = LC_LANES(u + cc, nh, tmp);
                LC_VT v = LC_LANES(delta + cc, nh, tmp);
                if (dbias) v = LC_VADD(v, LC_VLOAD(vb + LC_VL * j));
                if (softplus) {                     /* dt exactly as the forward; softplus' from its exp */
                    LC_VT e;
                    LC_VT sp = LC_VSOFTPLUS_E(v, &e);
                    LC_VSTORE(dspb + o, LC_VDSOFTPLUS_E(v, e));
                    v = sp;
                }
                mx[k] = LC_VMAXABS(mx[k], v);
                LC_VT go = LC_LANES(dout + cc, nh, tmp), g = go;
                if (z) {                            /* one sigmoid serves silu(z) here and silu'(z) below */
                    LC_VT zz = LC_LANES(z + cc, nh, tmp);
                    LC_VT sg = LC_VSIGMOID(zz);
                    g = LC_VMUL(go, LC_VMUL(zz, sg));
                    LC_VSTORE(zb + o, zz);
                    LC_VSTORE(sgb + o, sg);
                    LC_VSTORE(gob + o, go);
                }
                LC_VSTORE(ub + o, uu);
                LC_VSTORE(dtb + o, v);
                LC_VSTORE(wb + o, LC_VMUL(v, uu));
                LC_VSTORE(dyb + o, g);
                LC_VSTORE(sdw + o, LC_VZERO);
                LC_VSTORE(sdx + o, LC_VZERO);
            }
        }
        LC_V_NAME(unit_max)(dmx, mx, ns);
        for (int64_t k = 0; k < ns; k++) {
            const int64_t d0 = d0s + k * 16, ko = k * TU;
            const int nl = LC_UNIT_NL(dw, k);
            for (int64_t n = 0; n < N; n++) {
                const LC_ST *Bn = Bm + (b * L + t0) * N + n, *Cn = Cm + (b * L + t0) * N + n;
                const int64_t q = (k * N + n) * 16;
                LC_VT An[LC_VN], Ae[LC_VN];
                LC_EACH(i) An[i] = LC_VLOAD(Ast + q + LC_VL * i);
                /* the forward's decay factors: exp(dt A) ("zoh"), 2^(dt (A log2 e)) ("simplified") */
                LC_EACH(i) Ae[i] = zoh ? An[i] : LC_VLOAD(A2st + q + LC_VL * i);
                /* |dt A| <= max|dt| max|A|: exp needs no range check (NaN fails the test) */
                const int fast = zoh ? dmx[k] * amx[k * N + n] <= (LC_ST)LC_EXP_FAST_ABS
                                     : dmx[k] * amx2[k * N + n] <= (LC_ST)LC_EXP2_FAST_ABS;
                const LC_ST *src = hs + ((b * nck + c) * D + d0) * N + n;
                for (int i = 0; i < 16; i++) tmp[i] = i < nl ? src[i * N] : 0;
                LC_VT hp0[LC_VN], h[LC_VN];
                LC_EACH(i) hp0[i] = LC_VLOAD(tmp + LC_VL * i);
                /* recompute the chunk's states exactly as the forward does */
                LC_EACH(i) h[i] = hp0[i];
#define LC_REC(Z, F) LC_V_NAME(scan_rec_run)(h, Ae, dtb + ko, wb + ko, hb, ab, pb, Bn, N, nt, Z, F)
                if (zoh) { if (fast) LC_REC(1, 1); else LC_REC(1, 0); }
                else { if (fast) LC_REC(0, 1); else LC_REC(0, 0); }
#undef LC_REC
                {
                    LC_VT cr[LC_VN], dA[LC_VN];
                    LC_EACH(i) cr[i] = LC_VLOAD(carr + q + LC_VL * i);
                    LC_EACH(i) dA[i] = LC_VLOAD(dAa + q + LC_VL * i);
                    if (zoh)
                        LC_V_NAME(scan_bwd_rev)(cr, dA, An, hp0, hb, ab, pb, dtb + ko, wb + ko, dyb + ko,
                                                sdw + ko, sdx + ko, pcv, pbv, Bn, Cn, N, nt, 1);
                    else
                        LC_V_NAME(scan_bwd_rev)(cr, dA, An, hp0, hb, ab, pb, dtb + ko, wb + ko, dyb + ko,
                                                sdw + ko, sdx + ko, pcv, pbv, Bn, Cn, N, nt, 0);
                    LC_EACH(i) LC_VSTORE(carr + q + LC_VL * i, cr[i]);
                    LC_EACH(i) LC_VSTORE(dAa + q + LC_VL * i, dA[i]);
                }
                /* lane sums of the per-step products, 8 steps at a time, into the (N, L) partials */
                LC_ST *dCr = dCp + n * L + t0, *dBr = dBp + n * L + t0;
                int64_t t = 0;
                for (; t + 8 <= nt; t += 8) {
                    LC_VHSUM8(sums, pcv + t * 8);
                    for (int i = 0; i < 8; i++) dCr[t + i] += sums[i];
                    LC_VHSUM8(sums, pbv + t * 8);
                    for (int i = 0; i < 8; i++) dBr[t + i] += sums[i];
                }
                for (; t < nt; t++) {
                    dCr[t] += LC_VHSUM(pcv + t * 8);
                    dBr[t] += LC_VHSUM(pbv + t * 8);
                }
            }
        }
        /* the chunk's per-step outputs */
        for (int64_t t = 0; t < nt; t++) {
            const int64_t row = (b * L + t0 + t) * D + d0s, r = t * 16;
            const int64_t tp = t + LC_SCAN_PF < nt ? t + LC_SCAN_PF : t + LC_SCAN_PF - nt - T;
            if (ypre && t0 + tp >= 0 && t0 + tp < L) LC_V_NAME(fetch_run)(ypre + (b * L + t0 + tp) * D + d0s, dw);
            for (int64_t j = 0; j < LC_VN * ns; j++) {
                const int64_t k = j / LC_VN, o = k * TU + r + LC_VL * (j % LC_VN), cc = row + LC_VL * j;
                const int nh = LC_PART(LC_UNIT_NL(dw, k), (int)(j % LC_VN));
                if (!nh) continue;
                LC_VT dyy = LC_VLOAD(dyb + o), uu = LC_VLOAD(ub + o), sw = LC_VLOAD(sdw + o);
                LC_VT duv = LC_VMUL(LC_VLOAD(dtb + o), sw);                       /* d(dt u)/du = dt */
                if (Dv) {
                    duv = LC_VFMA(dyy, LC_VLOAD(vd + LC_VL * j), duv);
                    LC_VSTORE(dDs + LC_VL * j, LC_VFMA(dyy, uu, LC_VLOAD(dDs + LC_VL * j)));
                }
                LC_VT gd = LC_VFMA(uu, sw, LC_VLOAD(sdx + o));                   /* d/d dt */
                if (softplus) gd = LC_VMUL(gd, LC_VLOAD(dspb + o));
                LC_VSTORE(dbs + LC_VL * j, LC_VADD(LC_VLOAD(dbs + LC_VL * j), gd));
                LC_LANES_OUT(du + cc, duv, nh, tmp);
                LC_LANES_OUT(ddelta + cc, gd, nh, tmp);
                if (z) {
                    /* dz = dout * ypre * silu'(z),  silu'(z) = s (1 + z (1 - s)) */
                    LC_VT zz = LC_VLOAD(zb + o), go = LC_VLOAD(gob + o), sg = LC_VLOAD(sgb + o);
                    LC_VT yp = LC_LANES(ypre + cc, nh, tmp);
                    LC_VT one = LC_VSET1((LC_ST)1);
                    LC_VT ds = LC_VMUL(sg, LC_VADD(one, LC_VMUL(zz, LC_VSUB(one, sg))));
                    LC_LANES_OUT(dz + cc, LC_VMUL(LC_VMUL(go, yp), ds), nh, tmp);
                }
            }
        }
    }
    for (int64_t k = 0; k < ns; k++) {
        const int64_t d0 = d0s + k * 16;
        const int nl = LC_UNIT_NL(dw, k);
        for (int64_t n = 0; n < N; n++)
            for (int i = 0; i < nl; i++) {
                dAp[(b * D + d0 + i) * N + n] = dAa[(k * N + n) * 16 + i];
                if (dh0) dh0[(b * D + d0 + i) * N + n] = carr[(k * N + n) * 16 + i];
            }
        for (int i = 0; i < nl; i++) {
            if (dDp) dDp[b * D + d0 + i] = dDs[k * 16 + i];
            if (ddbp) ddbp[b * D + d0 + i] = dbs[k * 16 + i];
        }
    }
}

/* the vocabulary belongs to one instantiation */
#undef LC_FOLD8
#undef LC_VFOLD8
#undef LC_VL
#undef LC_ST
#undef LC_VT
#undef LC_V_NAME
#undef LC_VZERO
#undef LC_VLOAD
#undef LC_VSTORE
#undef LC_VSET1
#undef LC_VADD
#undef LC_VSUB
#undef LC_VMUL
#undef LC_VFMA
#undef LC_VEXP
#undef LC_VEXP_FAST
#undef LC_VEXP2
#undef LC_VEXP2_FAST
#undef LC_LOG2E_ST
#undef LC_VMAXABS
#undef LC_SMAXABS
#undef LC_VSOFTPLUS
#undef LC_VSIGMOID
#undef LC_VSILU
#undef LC_VSOFTPLUS_E
#undef LC_VDSOFTPLUS_E
#undef LC_VPHI1
#undef LC_VDPHI1
#undef LC_VHSUM
#undef LC_VHSUM8
#undef LC_V_TARGET
