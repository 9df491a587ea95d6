/* lutcore/scan_impl.h — the selective-scan algorithm, written once.
 *
 * Included by scan.h three times (generic float, generic double, AVX2 float)
 * with the LC_V_* vector vocabulary defined, so every body performs the same
 * operations in the same order: generic float32 and AVX2 give the same bits.
 *
 * Unit of work: one batch row b and one block of 8 channels ("lanes"); a
 * partial block is zero-padded (padding lanes contribute exact zeros).  State
 * index n is the outer loop, time the inner one: the 8-lane state lives in a
 * register, and y accumulates over n in a fixed order (n = 0..N-1).
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

/* gather 8 lanes of a (.., D) row into a contiguous block, zero padding */
LC_V_TARGET static inline void LC_V_NAME(lanes_in)(LC_ST *dst, const LC_ST *src, int nl) {
    int i = 0;
    for (; i < nl; i++) dst[i] = src[i];
    for (; i < 8; i++) dst[i] = 0;
}
/* 8 lanes of a row as a vector (zero-padded past nl) */
#define LC_LANES(src, nl, tmp) ((nl) == 8 ? LC_VLOAD(src) : (LC_V_NAME(lanes_in)(tmp, src, nl), LC_VLOAD(tmp)))
/* store the first nl lanes */
#define LC_LANES_OUT(dst, v, nl, tmp)                                                        \
    do {                                                                                     \
        if ((nl) == 8) LC_VSTORE(dst, v);                                                    \
        else { LC_VSTORE(tmp, v); for (int i_ = 0; i_ < (nl); i_++) (dst)[i_] = (tmp)[i_]; } \
    } while (0)

LC_V_TARGET static void LC_V_NAME(scan_fwd_unit)(
    LC_ST *y, LC_ST *ypre, LC_ST *hs, LC_ST *hlast,
    const LC_ST *u, const LC_ST *delta, const LC_ST *A, const LC_ST *Bm, const LC_ST *Cm,
    const LC_ST *Dv, const LC_ST *z, const LC_ST *dbias, const LC_ST *h0,
    int64_t b, int64_t d0, int nl, int64_t L, int64_t D, int64_t N, int64_t T,
    int softplus, int zoh, LC_ST *work /* 3 * L * 8 + N * 8 */) {
    LC_ST *dtb = work, *ub = work + L * 8, *yb = work + 2 * L * 8;
    LC_ST tmp[8];
    LC_VT bias = LC_VZERO;
    if (dbias) { LC_V_NAME(lanes_in)(tmp, dbias + d0, nl); bias = LC_VLOAD(tmp); }
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = (b * L + t) * D + d0;
        LC_VSTORE(ub + t * 8, LC_LANES(u + row, nl, tmp));
        LC_VT v = LC_LANES(delta + row, nl, tmp);
        if (dbias) v = LC_VADD(v, bias);
        if (softplus) v = LC_VSOFTPLUS(v);
        LC_VSTORE(dtb + t * 8, v);
        LC_VSTORE(yb + t * 8, LC_VZERO);
    }
    const int64_t nck = (L + T - 1) / T;
    /* Time in blocks of LC_SCAN_TB steps so the block's dt, u and y rows stay in
     * L1; inside a block, two states per pass (two independent recurrences share
     * the loads of dt and u).  Each state's h is carried between blocks in hst,
     * and y still accumulates n = 0, 1, 2, ... in order for every t. */
    LC_ST *hst = work + 3 * L * 8;                                 /* (N, 8) */
    for (int64_t n = 0; n < N; n++) {
        for (int i = 0; i < 8; i++) tmp[i] = (h0 && i < nl) ? h0[(b * D + d0 + i) * N + n] : 0;
        LC_VSTORE(hst + n * 8, LC_VLOAD(tmp));
    }
    for (int64_t tb = 0; tb < L; tb += LC_SCAN_TB) {
        const int64_t te = tb + LC_SCAN_TB < L ? tb + LC_SCAN_TB : L;
        for (int64_t n = 0; n < N; n += 2) {
            const int two = n + 1 < N;
            const int np = two ? 2 : 1;
            LC_VT An[2], h[2];
            for (int j = 0; j < 2; j++) {
                int64_t nn = two ? n + j : n;
                for (int i = 0; i < 8; i++) tmp[i] = i < nl ? A[(d0 + i) * N + nn] : 0;
                An[j] = LC_VLOAD(tmp);
                h[j] = LC_VLOAD(hst + nn * 8);
            }
            const LC_ST *Bn = Bm + b * L * N + n, *Cn = Cm + b * L * N + n;
            for (int64_t t = tb; t < te; t++) {
                if (hs && t % T == 0) {
                    for (int j = 0; j < np; j++) {
                        LC_VSTORE(tmp, h[j]);
                        LC_ST *dst = hs + ((b * nck + t / T) * D + d0) * N + n + j;
                        for (int i = 0; i < nl; i++) dst[i * N] = tmp[i];
                    }
                }
                LC_VT dt = LC_VLOAD(dtb + t * 8);
                LC_VT uu = LC_VLOAD(ub + t * 8);
                LC_VT yt = LC_VLOAD(yb + t * 8);
                for (int j = 0; j < 2; j++) {
                    if (j == 1 && !two) break;
                    LC_VT x = LC_VMUL(dt, An[j]);
                    LC_VT a = LC_VEXP(x);
                    LC_VT f = zoh ? LC_VMUL(dt, LC_VPHI1(x, a)) : dt;
                    LC_VT bb = LC_VMUL(f, LC_VSET1(Bn[t * N + j]));
                    h[j] = LC_VFMA(a, h[j], LC_VMUL(bb, uu));        /* one rounding: a h + (bb u) */
                    yt = LC_VFMA(LC_VSET1(Cn[t * N + j]), h[j], yt);
                }
                LC_VSTORE(yb + t * 8, yt);
            }
            for (int j = 0; j < np; j++) LC_VSTORE(hst + (n + j) * 8, h[j]);
        }
    }
    if (hlast) {
        for (int64_t n = 0; n < N; n++) {
            LC_VSTORE(tmp, LC_VLOAD(hst + n * 8));
            for (int i = 0; i < nl; i++) hlast[(b * D + d0 + i) * N + n] = tmp[i];
        }
    }
    LC_VT Dl = LC_VZERO;
    if (Dv) { LC_V_NAME(lanes_in)(tmp, Dv + d0, nl); Dl = LC_VLOAD(tmp); }
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = (b * L + t) * D + d0;
        LC_VT yt = LC_VLOAD(yb + t * 8);
        if (Dv) yt = LC_VADD(yt, LC_VMUL(Dl, LC_VLOAD(ub + t * 8)));
        if (z) {
            if (ypre) LC_LANES_OUT(ypre + row, yt, nl, tmp);
            yt = LC_VMUL(yt, LC_VSILU(LC_LANES(z + row, nl, tmp)));
        }
        LC_LANES_OUT(y + row, yt, nl, tmp);
    }
}

/* Backward of one unit.  Gradients of per-unit channels are written directly;
 * dB/dC (reduced over channels) are added into this unit's partial rows
 * dBp/dCp (L, N) — lanes summed with LC_VHSUM — and dA/dD/ddelta_bias go to
 * per-batch partials (B, D, N) / (B, D).  The caller reduces partials in a
 * fixed order. */
LC_V_TARGET static void LC_V_NAME(scan_bwd_unit)(
    LC_ST *du, LC_ST *ddelta, LC_ST *dAp, LC_ST *dBp, LC_ST *dCp, LC_ST *dDp, LC_ST *dz,
    LC_ST *ddbp, LC_ST *dh0,
    const LC_ST *dout, const LC_ST *u, const LC_ST *delta, const LC_ST *A, const LC_ST *Bm,
    const LC_ST *Cm, const LC_ST *Dv, const LC_ST *z, const LC_ST *dbias, const LC_ST *hs,
    const LC_ST *ypre,
    int64_t b, int64_t d0, int nl, int64_t L, int64_t D, int64_t N, int64_t T,
    int softplus, int zoh, LC_ST *work /* 5 * L * 8 + 3 * T * 8 */) {
    LC_ST *dtb = work, *ub = dtb + L * 8, *dyb = ub + L * 8, *ddt = dyb + L * 8, *dua = ddt + L * 8;
    LC_ST *hb = dua + L * 8, *ab = hb + T * 8, *fb = ab + T * 8;
    LC_ST tmp[8], tmp2[8];
    LC_VT bias = LC_VZERO;
    if (dbias) { LC_V_NAME(lanes_in)(tmp, dbias + d0, nl); bias = LC_VLOAD(tmp); }
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = (b * L + t) * D + d0;
        LC_VSTORE(ub + t * 8, LC_LANES(u + row, nl, tmp));
        LC_VT v = LC_LANES(delta + row, nl, tmp);
        if (dbias) v = LC_VADD(v, bias);
        if (softplus) v = LC_VSOFTPLUS(v);
        LC_VSTORE(dtb + t * 8, v);
        LC_V_NAME(lanes_in)(tmp, dout + row, nl);
        LC_VT g = LC_VLOAD(tmp);
        if (z) {
            LC_V_NAME(lanes_in)(tmp2, z + row, nl);
            g = LC_VMUL(g, LC_VSILU(LC_VLOAD(tmp2)));
        }
        LC_VSTORE(dyb + t * 8, g);
        LC_VSTORE(ddt + t * 8, LC_VZERO);
        LC_VSTORE(dua + t * 8, LC_VZERO);
    }
    const int64_t nck = (L + T - 1) / T;
    for (int64_t n = 0; n < N; n++) {
        for (int i = 0; i < 8; i++) tmp[i] = i < nl ? A[(d0 + i) * N + n] : 0;
        LC_VT An = LC_VLOAD(tmp);
        LC_VT carry = LC_VZERO, dAacc = LC_VZERO;
        const LC_ST *Bn = Bm + b * L * N + n, *Cn = Cm + b * L * N + n;
        for (int64_t c = nck - 1; c >= 0; c--) {
            const int64_t t0 = c * T, t1 = (t0 + T < L) ? t0 + T : L;
            /* recompute the states of this chunk from its saved start */
            const LC_ST *src = hs + ((b * nck + c) * D + d0) * N + n;
            for (int i = 0; i < 8; i++) tmp[i] = i < nl ? src[i * N] : 0;
            LC_VT h = LC_VLOAD(tmp);
            LC_VT hprev_chunk = h;
            for (int64_t t = t0; t < t1; t++) {
                LC_VT dt = LC_VLOAD(dtb + t * 8);
                LC_VT x = LC_VMUL(dt, An);
                LC_VT a = LC_VEXP(x);
                LC_VT f = zoh ? LC_VMUL(dt, LC_VPHI1(x, a)) : dt;
                LC_VT bb = LC_VMUL(f, LC_VSET1(Bn[t * N]));
                h = LC_VFMA(a, h, LC_VMUL(bb, LC_VLOAD(ub + t * 8)));   /* as the forward */
                LC_VSTORE(hb + (t - t0) * 8, h);
                LC_VSTORE(ab + (t - t0) * 8, a);
                LC_VSTORE(fb + (t - t0) * 8, f);
            }
            for (int64_t t = t1 - 1; t >= t0; t--) {
                LC_VT dyy = LC_VLOAD(dyb + t * 8);
                LC_VT ht = LC_VLOAD(hb + (t - t0) * 8);
                LC_VT hp = t > t0 ? LC_VLOAD(hb + (t - t0 - 1) * 8) : hprev_chunk;
                LC_VT a = LC_VLOAD(ab + (t - t0) * 8);
                LC_VT f = LC_VLOAD(fb + (t - t0) * 8);
                LC_VT dt = LC_VLOAD(dtb + t * 8);
                LC_VT uu = LC_VLOAD(ub + t * 8);
                LC_VT Bt = LC_VSET1(Bn[t * N]);
                LC_VT g = LC_VADD(LC_VMUL(dyy, LC_VSET1(Cn[t * N])), carry);
                dCp[t * N + n] += LC_VHSUM(LC_VMUL(dyy, ht));
                LC_VT dbb = LC_VMUL(g, uu);
                LC_VT bb = LC_VMUL(f, Bt);
                LC_VSTORE(dua + t * 8, LC_VADD(LC_VLOAD(dua + t * 8), LC_VMUL(g, bb)));
                dBp[t * N + n] += LC_VHSUM(LC_VMUL(dbb, f));
                LC_VT df = LC_VMUL(dbb, Bt);
                LC_VT daa = LC_VMUL(LC_VMUL(g, hp), a);          /* dL/dx through Abar = exp(x) */
                LC_VT gdt = LC_VMUL(daa, An);
                LC_VT gA = LC_VMUL(daa, dt);
                if (zoh) {
                    LC_VT x = LC_VMUL(dt, An);
                    LC_VT phi = LC_VPHI1(x, a);
                    gdt = LC_VADD(gdt, LC_VMUL(df, a));
                    gA = LC_VADD(gA, LC_VMUL(df, LC_VMUL(LC_VMUL(dt, dt), LC_VDPHI1(x, a, phi))));
                } else {
                    gdt = LC_VADD(gdt, df);
                }
                LC_VSTORE(ddt + t * 8, LC_VADD(LC_VLOAD(ddt + t * 8), gdt));
                dAacc = LC_VADD(dAacc, gA);
                carry = LC_VMUL(a, g);
            }
        }
        LC_VSTORE(tmp, dAacc);
        for (int i = 0; i < nl; i++) dAp[(b * D + d0 + i) * N + n] = tmp[i];
        if (dh0) {
            LC_VSTORE(tmp, carry);
            for (int i = 0; i < nl; i++) dh0[(b * D + d0 + i) * N + n] = tmp[i];
        }
    }
    /* per-time outputs, and per-batch partials summed over t ascending */
    LC_VT Dl = LC_VZERO, dDacc = LC_VZERO, dbacc = LC_VZERO;
    if (Dv) { LC_V_NAME(lanes_in)(tmp, Dv + d0, nl); Dl = LC_VLOAD(tmp); }
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = (b * L + t) * D + d0;
        LC_VT dyy = LC_VLOAD(dyb + t * 8);
        LC_VT uu = LC_VLOAD(ub + t * 8);
        LC_VT duv = LC_VLOAD(dua + t * 8);
        if (Dv) {
            duv = LC_VADD(duv, LC_VMUL(dyy, Dl));
            dDacc = LC_VADD(dDacc, LC_VMUL(dyy, uu));
        }
        LC_VSTORE(tmp, duv);
        for (int i = 0; i < nl; i++) du[row + i] = tmp[i];
        LC_VT gd = LC_VLOAD(ddt + t * 8);
        if (softplus) {
            LC_V_NAME(lanes_in)(tmp, delta + row, nl);
            LC_VT v = LC_VLOAD(tmp);
            if (dbias) v = LC_VADD(v, bias);
            gd = LC_VMUL(gd, LC_VDSOFTPLUS(v));
        }
        dbacc = LC_VADD(dbacc, gd);
        LC_VSTORE(tmp, gd);
        for (int i = 0; i < nl; i++) ddelta[row + i] = tmp[i];
        if (z) {
            /* dz = dout * ypre * silu'(z),  silu'(z) = s (1 + z (1 - s)) */
            LC_V_NAME(lanes_in)(tmp, z + row, nl);
            LC_VT zz = LC_VLOAD(tmp);
            LC_V_NAME(lanes_in)(tmp, dout + row, nl);
            LC_VT go = LC_VLOAD(tmp);
            LC_V_NAME(lanes_in)(tmp, ypre + row, nl);
            LC_VT yp = LC_VLOAD(tmp);
            LC_VT s = LC_VSIGMOID(zz);
            LC_VT one = LC_VSET1((LC_ST)1);
            LC_VT ds = LC_VMUL(s, LC_VADD(one, LC_VMUL(zz, LC_VSUB(one, s))));
            LC_VSTORE(tmp, LC_VMUL(LC_VMUL(go, yp), ds));
            for (int i = 0; i < nl; i++) dz[row + i] = tmp[i];
        }
    }
    if (dDp) { LC_VSTORE(tmp, dDacc); for (int i = 0; i < nl; i++) dDp[b * D + d0 + i] = tmp[i]; }
    if (ddbp) { LC_VSTORE(tmp, dbacc); for (int i = 0; i < nl; i++) ddbp[b * D + d0 + i] = tmp[i]; }
}

/* the vocabulary belongs to one instantiation */
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
#undef LC_VSOFTPLUS
#undef LC_VSIGMOID
#undef LC_VSILU
#undef LC_VDSOFTPLUS
#undef LC_VPHI1
#undef LC_VDPHI1
#undef LC_VHSUM
#undef LC_V_TARGET
