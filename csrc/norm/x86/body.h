/* csrc/norm/x86/body.h — the norms' SIMD bodies, written once over csrc/core/vec.h for a vector
 * of NB_W = LC_VF_W floats and included by csrc/norm/x86/avx2.c (LC_VEC_W 8, ymm) and
 * csrc/norm/x86/avx512.c (LC_VEC_W 16, zmm; its SIMDe twin for the tests), each of which
 * first includes the vocabulary at its width and defines VTR, its in-register transpose.
 *
 * Design: norm.h's contract makes each row's sums one in-order chain over the row
 * (s = s + t, j = 0..C-1), so a row's reduction cannot be split across lanes without
 * changing its bits.  These bodies vectorise across rows instead: a group of NB_W rows,
 * each column block of NB_W read as one vector per row and transposed (lane r = row r),
 * so one vector add advances all NB_W chains by one column, in column order; tail
 * columns continue each chain in scalar code.  Element-wise steps (squares, products,
 * normalise and scale, dx) run across the row, a vector per NB_W columns and the same
 * scalar operations on the tail.  Every float is the generic body's (the same basic
 * IEEE operations in the same order; -ffp-contract=off).
 *
 *   norm_rms      y (nr, C), rstd (nr) or NULL   <- x (nr, C), w (C)              nr <= NB_W
 *   norm_rms_bwd  dx (nr, C), part (C) +=        <- dy, x (nr, C), w (C), rstd (nr)
 *   norm_ln       y, xhat (nr, C), rstd (nr)     <- x (nr, C), w, b (C)
 *   norm_ln_bwd   dx (nr, C), pw, pb (C) +=      <- dy, xhat (nr, C), w (C), rstd (nr)
 * Rows are C floats apart; part/pw/pb take the rows' terms in row order (norm.h's chunks).
 *
 * Needs: csrc/core/vec.h at the width (LC_VF, LC_VF_W, LC_VF_LOADU, ...), VTR(v)
 * (transpose NB_W vectors in place: v[c] lane r <- v[r] lane c), LC_BODY(name).
 */

/* chain[r] (r < nr) continued over the row's columns j = 0..C-1 with the terms BLK(r, j)
 * (a vector of columns j..j+LC_VF_W-1) and SCL(r, j) (one column, the tail) */
#define NB_ROWSUMS(chain, nr, C, BLK, SCL)                                        \
    do {                                                                          \
        LC_VF s_ = LC_VF_ZERO();                                                           \
        int64_t j_ = 0;                                                           \
        for (; j_ + LC_VF_W <= (C); j_ += LC_VF_W) {                                    \
            LC_VF v_[LC_VF_W];                                                           \
            _Pragma("GCC unroll 16")                                              \
            for (int r_ = 0; r_ < LC_VF_W; r_++) v_[r_] = r_ < (nr) ? BLK(r_, j_) : LC_VF_ZERO(); \
            VTR(v_);                                                              \
            _Pragma("GCC unroll 16")                                              \
            for (int c_ = 0; c_ < LC_VF_W; c_++) s_ = LC_VF_ADD(s_, v_[c_]);              \
        }                                                                         \
        LC_VF_STOREU(chain, s_);                                                           \
        for (; j_ < (C); j_++)                                                    \
            for (int r_ = 0; r_ < (nr); r_++) chain[r_] = chain[r_] + SCL(r_, j_); \
    } while (0)

void LC_BODY(norm_rms)(float *y, float *rstd, const float *x, const float *w, int nr, int64_t C, float eps) {
    float ss[LC_VF_W];
#define BLK(r, j) LC_VF_MUL(LC_VF_LOADU(x + (r) * C + (j)), LC_VF_LOADU(x + (r) * C + (j)))
#define SCL(r, j) (x[(r) * C + (j)] * x[(r) * C + (j)])
    NB_ROWSUMS(ss, nr, C, BLK, SCL);
#undef BLK
#undef SCL
    for (int r = 0; r < nr; r++) {
        const float ms = ss[r] / (float)C, q = 1.0f / sqrtf(ms + eps);
        const float *xr = x + r * C;
        float *yr = y + r * C;
        const LC_VF qv = LC_VF_SET1(q);
        int64_t j = 0;
        for (; j + LC_VF_W <= C; j += LC_VF_W) LC_VF_STOREU(yr + j, LC_VF_MUL(LC_VF_MUL(LC_VF_LOADU(xr + j), qv), LC_VF_LOADU(w + j)));
        for (; j < C; j++) yr[j] = (xr[j] * q) * w[j];
        if (rstd) rstd[r] = q;
    }
}

void LC_BODY(norm_rms_bwd)(float *dx, float *part, const float *dy, const float *x, const float *w, const float *rstd,
                      int nr, int64_t C) {
    float dot[LC_VF_W];
#define BLK(r, j) LC_VF_MUL(LC_VF_MUL(LC_VF_LOADU(dy + (r) * C + (j)), LC_VF_LOADU(w + (j))), LC_VF_LOADU(x + (r) * C + (j)))
#define SCL(r, j) ((dy[(r) * C + (j)] * w[j]) * x[(r) * C + (j)])
    NB_ROWSUMS(dot, nr, C, BLK, SCL);
#undef BLK
#undef SCL
    const float fC = (float)C;
    for (int r = 0; r < nr; r++) {
        const float *dyr = dy + r * C, *xr = x + r * C;
        float *dxr = dx + r * C;
        const float q = rstd[r], q3 = (q * q) * q, d = dot[r];
        const LC_VF qv = LC_VF_SET1(q), q3v = LC_VF_SET1(q3), dv = LC_VF_SET1(d), cv = LC_VF_SET1(fC);
        int64_t j = 0;
        for (; j + LC_VF_W <= C; j += LC_VF_W) {
            LC_VF dyv = LC_VF_LOADU(dyr + j), xv = LC_VF_LOADU(xr + j);
            LC_VF a = LC_VF_MUL(qv, LC_VF_MUL(dyv, LC_VF_LOADU(w + j))), b = LC_VF_DIV(LC_VF_MUL(LC_VF_MUL(xv, q3v), dv), cv);
            LC_VF_STOREU(dxr + j, LC_VF_SUB(a, b));
            LC_VF_STOREU(part + j, LC_VF_ADD(LC_VF_LOADU(part + j), LC_VF_MUL(LC_VF_MUL(dyv, xv), qv)));
        }
        for (; j < C; j++) {
            float g = dyr[j] * w[j];
            float a = q * g, b = ((xr[j] * q3) * d) / fC;
            dxr[j] = a - b;
            float t = (dyr[j] * xr[j]) * q;
            part[j] = part[j] + t;
        }
    }
}

void LC_BODY(norm_ln)(float *y, float *xhat, float *rstd, const float *x, const float *w, const float *b, int nr,
                 int64_t C, float eps) {
    float su[LC_VF_W], sv[LC_VF_W];
    const float fC = (float)C;
#define BLK(r, j) LC_VF_LOADU(x + (r) * C + (j))
#define SCL(r, j) x[(r) * C + (j)]
    NB_ROWSUMS(su, nr, C, BLK, SCL);
#undef BLK
#undef SCL
    for (int r = 0; r < nr; r++) {                 /* xhat <- x - mu */
        const float mu = su[r] / fC;
        const float *xr = x + r * C;
        float *xh = xhat + r * C;
        const LC_VF mv = LC_VF_SET1(mu);
        int64_t j = 0;
        for (; j + LC_VF_W <= C; j += LC_VF_W) LC_VF_STOREU(xh + j, LC_VF_SUB(LC_VF_LOADU(xr + j), mv));
        for (; j < C; j++) xh[j] = xr[j] - mu;
    }
#define BLK(r, j) LC_VF_MUL(LC_VF_LOADU(xhat + (r) * C + (j)), LC_VF_LOADU(xhat + (r) * C + (j)))
#define SCL(r, j) (xhat[(r) * C + (j)] * xhat[(r) * C + (j)])
    NB_ROWSUMS(sv, nr, C, BLK, SCL);
#undef BLK
#undef SCL
    for (int r = 0; r < nr; r++) {
        const float var = sv[r] / fC, q = 1.0f / sqrtf(var + eps);
        float *xh = xhat + r * C, *yr = y + r * C;
        const LC_VF qv = LC_VF_SET1(q);
        int64_t j = 0;
        for (; j + LC_VF_W <= C; j += LC_VF_W) {
            LC_VF h = LC_VF_MUL(LC_VF_LOADU(xh + j), qv);
            LC_VF_STOREU(xh + j, h);
            LC_VF_STOREU(yr + j, LC_VF_ADD(LC_VF_MUL(h, LC_VF_LOADU(w + j)), LC_VF_LOADU(b + j)));
        }
        for (; j < C; j++) {
            xh[j] = xh[j] * q;
            float t = xh[j] * w[j];
            yr[j] = t + b[j];
        }
        rstd[r] = q;
    }
}

void LC_BODY(norm_ln_bwd)(float *dx, float *pw, float *pb, const float *dy, const float *xhat, const float *w,
                     const float *rstd, int nr, int64_t C) {
    float s1[LC_VF_W], s2[LC_VF_W];
#define BLK(r, j) LC_VF_MUL(LC_VF_LOADU(dy + (r) * C + (j)), LC_VF_LOADU(w + (j)))
#define SCL(r, j) (dy[(r) * C + (j)] * w[j])
    NB_ROWSUMS(s1, nr, C, BLK, SCL);
#undef BLK
#undef SCL
#define BLK(r, j) LC_VF_MUL(LC_VF_MUL(LC_VF_LOADU(dy + (r) * C + (j)), LC_VF_LOADU(w + (j))), LC_VF_LOADU(xhat + (r) * C + (j)))
#define SCL(r, j) ((dy[(r) * C + (j)] * w[j]) * xhat[(r) * C + (j)])
    NB_ROWSUMS(s2, nr, C, BLK, SCL);
#undef BLK
#undef SCL
    const float fC = (float)C;
    for (int r = 0; r < nr; r++) {
        const float *dyr = dy + r * C, *xh = xhat + r * C;
        float *dxr = dx + r * C;
        const float m1 = s1[r] / fC, m2 = s2[r] / fC, q = rstd[r];
        const LC_VF m1v = LC_VF_SET1(m1), m2v = LC_VF_SET1(m2), qv = LC_VF_SET1(q);
        int64_t j = 0;
        for (; j + LC_VF_W <= C; j += LC_VF_W) {
            LC_VF dyv = LC_VF_LOADU(dyr + j), hv = LC_VF_LOADU(xh + j);
            LC_VF g = LC_VF_MUL(dyv, LC_VF_LOADU(w + j));
            LC_VF_STOREU(dxr + j, LC_VF_MUL(qv, LC_VF_SUB(LC_VF_SUB(g, m1v), LC_VF_MUL(hv, m2v))));
            LC_VF_STOREU(pw + j, LC_VF_ADD(LC_VF_LOADU(pw + j), LC_VF_MUL(dyv, hv)));
            LC_VF_STOREU(pb + j, LC_VF_ADD(LC_VF_LOADU(pb + j), dyv));
        }
        for (; j < C; j++) {
            float g = dyr[j] * w[j];
            float u = g - m1, v = xh[j] * m2;
            dxr[j] = q * (u - v);
            float t = dyr[j] * xh[j];
            pw[j] = pw[j] + t;
            pb[j] = pb[j] + dyr[j];
        }
    }
}
