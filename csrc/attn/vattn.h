/* csrc/attn/vattn.h — decode attention's vector bodies over csrc/core/vec.h, written ONCE:
 * included (no include guard: once per width) with the vocabulary set (core/vec.h) and
 *   LC_VR_NAME(n)  a body's name     LC_VR_FN  its linkage/attributes
 *   LC_VA_TR(v)    the W x W transpose of W vectors in place (core/transpose.h)
 * by attn.h at 8 lanes (lc_attn_*_avx2, AVX2 target) and by csrc/attn/x86/avx512.c at 16
 * (LC_BODY(attn_*)).  Every output is attn.h's in-order fused multiply-add chain from zero,
 * whatever the blocking, so both widths give the generic body's bits:
 *   attn_scores  W keys at a time: the transpose puts key j in lane j of kt's row i, then up
 *                to 8 query rows run their chains over i in order
 *   attn_values  W dims a vector: 8W dims of 2 rows, 4W of 4 rows or W of 8 rows of running
 *                chains over j (each V row loaded once for those rows); the last dims (< W)
 *                one masked vector (lanes past hd read as 0, never stored)
 *   sc  (R, lds) OUT   q (R, ldq) IN   K (S, hd) IN   kt  hd * W floats of scratch
 *   out (R, ldo) OUT   p (R, ldp) IN   V (S, hd) IN
 */
#if !defined(LC_VF_NAME) || !defined(LC_VR_NAME) || !defined(LC_VR_FN) || !defined(LC_VA_TR)
#error "csrc/attn/vattn.h: include core/vec.h and define LC_VR_NAME, LC_VR_FN, LC_VA_TR first"
#endif

#if LC_X86
LC_VR_FN void LC_VR_NAME(attn_scores)(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R,
                                      const float *K, int64_t S, int64_t hd, float *kt) {
    enum { W = LC_VF_W };
    for (int64_t j0 = 0; j0 < S; j0 += W) {
        const int64_t nj = S - j0 < W ? S - j0 : W;
        int64_t i0 = 0;
        for (; i0 + W <= hd; i0 += W) {            /* kt[i][jj] = K[j0 + jj][i]: W x W at a time */
            LC_VF v[W];
            for (int jj = 0; jj < W; jj++) v[jj] = jj < nj ? LC_VF_LOADU(K + (j0 + jj) * hd + i0) : LC_VF_ZERO();
            LC_VA_TR(v);
            for (int c = 0; c < W; c++) LC_VF_STOREU(kt + (i0 + c) * W, v[c]);
        }
        for (; i0 < hd; i0++)
            for (int jj = 0; jj < W; jj++) kt[i0 * W + jj] = jj < nj ? K[(j0 + jj) * hd + i0] : 0.0f;
        for (int64_t r0 = 0; r0 < R; r0 += 8) {     /* up to 8 query rows: independent chains overlap */
            const int64_t nr = R - r0 < 8 ? R - r0 : 8;
            LC_VF a[8];
            for (int k = 0; k < 8; k++) a[k] = LC_VF_ZERO();
            for (int64_t i = 0; i < hd; i++) {
                const LC_VF kv = LC_VF_LOADU(kt + i * W);
                for (int k = 0; k < nr; k++) a[k] = LC_VF_FMA(LC_VF_SET1(q[(r0 + k) * ldq + i]), kv, a[k]);
            }
            for (int k = 0; k < nr; k++) {
                float *dst = sc + (r0 + k) * lds + j0;
                if (nj == W) LC_VF_STOREU(dst, a[k]);
                else LC_VF_STOREN(dst, a[k], (int)nj);
            }
        }
    }
}

/* rows [0, nr) (nr <= RB), dims [d0, d0 + W NV) — NV < W lanes when n < W (NV = 1) */
LC_VF_FN void LC_VR_NAME(attn_vblk)(float *out, int64_t ldo, const float *p, int64_t ldp, int nr,
                                    const float *V, int64_t S, int64_t hd, int64_t d0, const int NV,
                                    const int RB, const int n) {
    LC_VF a[8][8];
    for (int r = 0; r < RB; r++)
        for (int v = 0; v < NV; v++) a[r][v] = LC_VF_ZERO();
    for (int64_t j = 0; j < S; j++) {
        const float *vr = V + j * hd + d0;
        LC_VF vv[8];
        for (int v = 0; v < NV; v++) vv[v] = n < LC_VF_W ? LC_VF_LOADN(vr, n) : LC_VF_LOADU(vr + LC_VF_W * v);
        for (int r = 0; r < RB; r++)
            if (r < nr) {
                const LC_VF pj = LC_VF_SET1(p[r * ldp + j]);
                for (int v = 0; v < NV; v++) a[r][v] = LC_VF_FMA(pj, vv[v], a[r][v]);
            }
    }
    for (int r = 0; r < RB; r++)
        if (r < nr)
            for (int v = 0; v < NV; v++) {
                float *o = out + r * ldo + d0 + LC_VF_W * v;
                if (n < LC_VF_W) LC_VF_STOREN(o, a[r][v], n);
                else LC_VF_STOREU(o, a[r][v]);
            }
}

LC_VR_FN void LC_VR_NAME(attn_values)(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R,
                                      const float *V, int64_t S, int64_t hd) {
    enum { W = LC_VF_W };
    int64_t d0 = 0;
    for (; d0 + 8 * W <= hd; d0 += 8 * W)
        for (int64_t r0 = 0; r0 < R; r0 += 2)
            LC_VR_NAME(attn_vblk)(out + r0 * ldo, ldo, p + r0 * ldp, ldp, (int)(R - r0 < 2 ? R - r0 : 2), V, S,
                                  hd, d0, 8, 2, W);
    if (d0 + 4 * W <= hd) {
        for (int64_t r0 = 0; r0 < R; r0 += 4)
            LC_VR_NAME(attn_vblk)(out + r0 * ldo, ldo, p + r0 * ldp, ldp, (int)(R - r0 < 4 ? R - r0 : 4), V, S,
                                  hd, d0, 4, 4, W);
        d0 += 4 * W;
    }
    for (; d0 < hd; d0 += W) {                     /* W dims (the last: fewer, masked) of 8 rows */
        const int n = hd - d0 < W ? (int)(hd - d0) : W;
        for (int64_t r0 = 0; r0 < R; r0 += 8)
            LC_VR_NAME(attn_vblk)(out + r0 * ldo, ldo, p + r0 * ldp, ldp, (int)(R - r0 < 8 ? R - r0 : 8), V, S,
                                  hd, d0, 1, 8, n);
    }
}
#endif /* LC_X86 */
