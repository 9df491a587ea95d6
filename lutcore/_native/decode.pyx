# cython: language_level=3
"""One-token decode of a llama-family layer in one native call.

Design: ``lutcore.pipeline.stage`` builds a ``DecodeLayer`` per layer (kernel-
ready weights, scratch rows) and calls ``run`` once per layer and token.  Every
step performs the same float32 operations, in the same order, as the stage's
numpy path (``Stage._attn_mlp`` with T = 1) and calls the same kernels (the
sgemm, the Q8 quantizer and block-scaled GEMMs, lutcore's exp/silu), so cached
decoding keeps giving the bits of a full recompute.  Python validates; here we
only take pointers, release the GIL and compute.
"""
from cython.parallel cimport prange
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t
from libc.math cimport sqrtf, INFINITY
cimport numpy as cnp
cnp.import_array()

from lutcore._native.csgemm cimport lc_sgemm

cdef extern from "lutcore/gemm.h" nogil:
    void lc_pack_a16(int16_t *Ap, const int8_t *A, int64_t M, int64_t Mp, int64_t K, int64_t lda,
                     int64_t bk, int64_t bkp, int64_t Kp, int nthreads)
    void lc_qmatmul_exact_packed(float *Y, int64_t ldy, const int16_t *Ap, const float *sa,
                                 const int8_t *Bp, const float *sbp, int64_t M, int64_t N,
                                 int64_t nblk, int64_t bkp, int isa, int nthreads)
    void lc_qmatmul_table(float *Y, int64_t ldy, const int8_t *qa, const float *sa, const int8_t *qb,
                          const float *sb, const int32_t *T32, int64_t M, int64_t N, int64_t nblk,
                          int64_t bk, int32_t *work, int isa, int nthreads)
    int64_t lc_quantize_rows(int8_t *q, float *s, const float *x, int64_t R, int64_t K, int64_t ldx,
                             int64_t bk, int64_t nblk, int isa, int nthreads)
    int LC_MR

cdef extern from "lutcore/attn.h" nogil:
    void lc_attn_scores(float *sc, int64_t lds, const float *q, int64_t ldq, int64_t R, const float *K,
                        int64_t S, int64_t hd, float *kt, int isa)
    void lc_attn_values(float *out, int64_t ldo, const float *p, int64_t ldp, int64_t R, const float *V,
                        int64_t S, int64_t hd, int isa)

cdef extern from "lutcore/mathfn.h" nogil:
    void lc_mathfn_f32(float *out, const float *x, int64_t n, int fn, int isa, int nthreads)
    int LC_FN_EXP, LC_FN_SILU

MR = LC_MR

cdef enum:
    KIND_FLOAT = 0
    KIND_EXACT = 1
    KIND_TABLE = 2


cdef inline float* _f(object a):
    return <float *>cnp.PyArray_DATA(<cnp.ndarray>a) if a is not None else NULL


cdef class Linear:
    """y (1, N) = x (1, K) @ W (+ b), W float32 panels or Q8 through the units."""
    cdef int kind
    cdef int64_t K, N, nblk, bk, bkp, Kp
    cdef object keep
    cdef const float *panels
    cdef const int8_t *bp
    cdef const float *sbp
    cdef int16_t *ap
    cdef int8_t *qa
    cdef float *sa
    cdef const int8_t *qb
    cdef const float *sb
    cdef const int32_t *T32
    cdef int32_t *twork
    cdef const float *bias

    def __init__(self, int kind, int64_t K, int64_t N, dict arrays, int64_t bk=0, int64_t bkp=0):
        """arrays: float: panels; exact: bp, sbp, ap, qa, sa; table: qb, sb, T32, twork, qa, sa;
        all: bias (or None).  The caller sizes every buffer."""
        self.kind, self.K, self.N, self.bk, self.bkp = kind, K, N, bk, bkp
        self.keep = dict(arrays)
        g = self.keep.get
        self.bias = _f(g("bias"))
        if kind == KIND_FLOAT:
            self.panels = _f(g("panels"))
        else:
            self.nblk = (K + bk - 1) // bk
            self.Kp = self.nblk * bkp
            self.qa = <int8_t *>cnp.PyArray_DATA(<cnp.ndarray>g("qa"))
            self.sa = _f(g("sa"))
            if kind == KIND_EXACT:
                self.bp = <const int8_t *>cnp.PyArray_DATA(<cnp.ndarray>g("bp"))
                self.sbp = _f(g("sbp"))
                self.ap = <int16_t *>cnp.PyArray_DATA(<cnp.ndarray>g("ap"))
            else:
                self.qb = <const int8_t *>cnp.PyArray_DATA(<cnp.ndarray>g("qb"))
                self.sb = _f(g("sb"))
                self.T32 = <const int32_t *>cnp.PyArray_DATA(<cnp.ndarray>g("T32"))
                self.twork = <int32_t *>cnp.PyArray_DATA(<cnp.ndarray>g("twork"))

    cdef int run(self, float *y, const float *x, int isa, int nt) noexcept nogil:
        """0, or -1 when x holds a non-finite value (it cannot be quantized)."""
        cdef int64_t n
        if self.kind == KIND_FLOAT:
            lc_sgemm(y, self.N, self.N, x, 0, self.K, 1, self.panels, 0, 0, 0, 1, 1, self.N, self.K, 0,
                     NULL, self.panels, isa, nt)      # one row against panels: needs no work
        else:
            # one row: quantizing and packing it on one thread beats waking a team (same bits)
            if lc_quantize_rows(self.qa, self.sa, x, 1, self.K, self.K, self.bk, self.nblk, isa, 1):
                return -1
            if self.kind == KIND_EXACT:
                lc_pack_a16(self.ap, self.qa, 1, LC_MR, self.nblk * self.bk, self.nblk * self.bk, self.bk, self.bkp,
                            self.Kp, 1)
                lc_qmatmul_exact_packed(y, self.N, self.ap, self.sa, self.bp, self.sbp, 1, self.N, self.nblk,
                                        self.bkp, isa, nt)
            else:
                lc_qmatmul_table(y, self.N, self.qa, self.sa, self.qb, self.sb, self.T32, 1, self.N, self.nblk,
                                 self.bk, self.twork, isa, nt)
        if self.bias != NULL:
            for n in range(self.N):
                y[n] = y[n] + self.bias[n]
        return 0


cdef inline void _rowsum_into(float *acc, const float *x, int64_t n) noexcept nogil:
    """The stage's rowsum: one in-order chain from 0 (fma(x, 1, s) == s + x, rounded once)."""
    cdef float s = 0.0
    cdef int64_t i
    for i in range(n):
        s = s + x[i]
    acc[0] = s


cdef void _rmsnorm(float *out, const float *x, const float *w, int64_t C, float eps) noexcept nogil:
    """As Stage._norm without bias: out = x * (1 / sqrt(sum(x*x)/C + eps)) * w, float32 steps."""
    cdef int64_t i
    cdef float ms, r
    for i in range(C):
        out[i] = x[i] * x[i]
    _rowsum_into(&ms, out, C)
    ms = ms / <float>C
    r = <float>1.0 / sqrtf(ms + eps)
    for i in range(C):
        out[i] = (x[i] * r) * w[i]


cdef inline void _rope_head(float *dst, const float *src, const float *cs, const float *sn,
                            int64_t half) noexcept nogil:
    """One head rotated (rotate-half), the stage's float32 steps: x1 c - x2 s | x2 c + x1 s,
    each product rounded before the sum."""
    cdef int64_t i
    cdef float a, b
    for i in range(half):
        a = src[i] * cs[i]
        b = src[half + i] * sn[i]
        dst[i] = a - b
        a = src[half + i] * cs[i]
        b = src[i] * sn[i]
        dst[half + i] = a + b


cdef void _softmax_row(float *s, int64_t S, int64_t qpos, int64_t window, int isa) noexcept nogil:
    """The stage's attention softmax of one query row at position qpos over keys 0..S-1, the
    same float32 steps: keys after qpos (or window or more before it) -> -inf, minus the row
    max, exp, divided by the in-order row sum."""
    cdef int64_t j
    cdef float m, tot
    for j in range(S):
        if j > qpos or (window > 0 and qpos - j >= window):
            s[j] = -INFINITY
    m = s[0]
    for j in range(1, S):
        if s[j] > m:
            m = s[j]
    for j in range(S):
        s[j] = s[j] - m
    lc_mathfn_f32(s, s, S, LC_FN_EXP, isa, 1)
    _rowsum_into(&tot, s, S)
    for j in range(S):
        s[j] = s[j] / tot


cdef class DecodeLayer:
    """One llama-family layer (RMSNorm, RoPE, GQA attention, SwiGLU with SiLU) for one token."""
    cdef Linear qkv, o, up, down
    cdef object keep
    cdef const float *n1w
    cdef const float *n2w
    cdef float *h
    cdef float *qkvb
    cdef float *rq
    cdef float *att
    cdef float *ob
    cdef float *upb
    cdef float *sc
    cdef float *kt
    cdef int64_t C, H, KV, hd, inter, window, smax
    cdef float eps, scale

    def __init__(self, Linear qkv, Linear o, Linear up, Linear down, n1w, n2w, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, int64_t inter, double eps, double scale, int64_t window, dict scratch):
        """scratch: h (C), qkv (Q + 2 KVd), rq (Q + KVd), att (Q), o (C), up (2 I), scores (H * smax),
        kt (KV * (8 hd + 16): each KV head's transposed key block, lutcore/attn.h); smax: the
        longest context."""
        self.qkv, self.o, self.up, self.down = qkv, o, up, down
        self.keep = (n1w, n2w, dict(scratch))
        self.n1w, self.n2w = _f(n1w), _f(n2w)
        self.C, self.H, self.KV, self.hd, self.inter = n1w.shape[0], heads, kv_heads, head_dim, inter
        self.eps, self.scale, self.window = <float>eps, <float>scale, window
        self.h, self.qkvb, self.rq = _f(scratch["h"]), _f(scratch["qkv"]), _f(scratch["rq"])
        self.att, self.ob, self.upb = _f(scratch["att"]), _f(scratch["o"]), _f(scratch["up"])
        self.sc, self.kt = _f(scratch["scores"]), _f(scratch["kt"])
        self.smax = scratch["scores"].shape[0] // heads

    @property
    def capacity(self):
        return self.smax

    def run(self, cnp.ndarray x, cnp.ndarray Kc, cnp.ndarray Vc, int64_t pos, cnp.ndarray cos, cnp.ndarray sin,
            int isa, int nthreads):
        """x (1, C) updated in place; Kc, Vc (KV, cap, hd) with cap > pos (row pos is written);
        cos, sin: the rope table rows of position pos (hd/2,).  Returns 0, or -1 on a non-finite
        activation in the units path."""
        cdef float *px = _f(x)
        cdef float *pk = _f(Kc)
        cdef float *pv = _f(Vc)
        cdef const float *pc = _f(cos)
        cdef const float *ps = _f(sin)
        cdef int64_t cap = Kc.shape[1]
        cdef int rc
        with nogil:
            rc = self._run(px, pk, pv, cap, pos, pc, ps, isa, nthreads)
        return rc

    cdef void _attend(self, int64_t kv, const float *q, const float *Kc, const float *Vc, int64_t cap,
                      int64_t pos, int isa) noexcept nogil:
        """KV head kv: scores of its g query heads, softmax, weighted values into att."""
        cdef int64_t H = self.H, KV = self.KV, hd = self.hd, g = H // KV, S = pos + 1
        cdef int64_t r
        # scores (g, S) = q (g, hd) @ K^T: the stage's batched sgemm product, element by element the
        # same fma chains (lutcore/attn.h), without packing the cache
        lc_attn_scores(self.sc + kv * g * S, S, q + kv * g * hd, hd, g, Kc + kv * cap * hd, S, hd,
                       self.kt + kv * (hd * 8 + 16), isa)
        for r in range(kv * g, (kv + 1) * g):
            _softmax_row(self.sc + r * S, S, pos, self.window, isa)
        # att (g, hd) = p (g, S) @ V (S, hd), the sgemm's chains; (KV, g) row order is head order
        lc_attn_values(self.att + kv * g * hd, hd, self.sc + kv * g * S, S, g, Vc + kv * cap * hd, S, hd, isa)

    cdef int _run(self, float *x, float *Kc, float *Vc, int64_t cap, int64_t pos, const float *cs,
                  const float *sn, int isa, int nt) noexcept nogil:
        cdef int64_t C = self.C, H = self.H, KV = self.KV, hd = self.hd, half = hd // 2
        cdef int64_t Q = H * hd, KVd = KV * hd, I = self.inter
        cdef int64_t i, hh, kv
        cdef float *q
        _rmsnorm(self.h, x, self.n1w, C, self.eps)
        if self.qkv.run(self.qkvb, self.h, isa, nt):
            return -1
        for hh in range(H + KV):                      # RoPE of q's H heads and k's KV heads
            _rope_head(self.rq + hh * hd, self.qkvb + hh * hd, cs, sn, half)
        q = self.rq
        if self.scale != 1.0:
            for i in range(Q):
                q[i] = q[i] * self.scale
        for kv in range(KV):                          # the cache rows of this position
            for i in range(hd):
                Kc[(kv * cap + pos) * hd + i] = self.rq[Q + kv * hd + i]
                Vc[(kv * cap + pos) * hd + i] = self.qkvb[Q + KVd + kv * hd + i]
        # per KV head, on its own thread when there are several (heads are independent; same bits)
        if KV > 1 and nt > 1:
            for kv in prange(KV, nogil=True, num_threads=nt, schedule="static"):
                self._attend(kv, q, Kc, Vc, cap, pos, isa)
        else:
            for kv in range(KV):
                self._attend(kv, q, Kc, Vc, cap, pos, isa)
        if self.o.run(self.ob, self.att, isa, nt):
            return -1
        for i in range(C):
            x[i] = x[i] + self.ob[i]
        _rmsnorm(self.h, x, self.n2w, C, self.eps)
        if self.up.run(self.upb, self.h, isa, nt):
            return -1
        lc_mathfn_f32(self.upb, self.upb, I, LC_FN_SILU, isa, 1)
        for i in range(I):
            self.upb[i] = self.upb[i] * self.upb[I + i]
        if self.down.run(self.ob, self.upb, isa, nt):
            return -1
        for i in range(C):
            x[i] = x[i] + self.ob[i]
        return 0


def attn_scores(const float[:, ::1] q, const float[:, ::1] K, int isa):
    """(R, S) = q (R, hd) @ K (S, hd)^T through lutcore/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = q.shape[0], hd = q.shape[1], S = K.shape[0]
    if K.shape[1] != hd:
        raise ValueError(f"K: expected (S, {hd}), got ({K.shape[0]}, {K.shape[1]})")
    out = cnp.PyArray_EMPTY(2, [R, S], cnp.NPY_FLOAT32, 0)
    kt = cnp.PyArray_EMPTY(1, [hd * 8 + 1], cnp.NPY_FLOAT32, 0)
    cdef float *po = _f(out)
    cdef float *pk = _f(kt)
    if R and S:
        with nogil:
            lc_attn_scores(po, S, &q[0, 0], hd, R, &K[0, 0], S, hd, pk, isa)
    return out


def attn_values(const float[:, ::1] p, const float[:, ::1] V, int isa):
    """(R, hd) = p (R, S) @ V (S, hd) through lutcore/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = p.shape[0], S = p.shape[1], hd = V.shape[1]
    if V.shape[0] != S:
        raise ValueError(f"V: expected ({S}, hd), got ({V.shape[0]}, {V.shape[1]})")
    out = cnp.PyArray_EMPTY(2, [R, hd], cnp.NPY_FLOAT32, 0)
    cdef float *po = _f(out)
    if R and hd:
        with nogil:
            lc_attn_values(po, hd, &p[0, 0], S, R, &V[0, 0], S, hd, isa)
    return out


def rmsnorm_rows(float[:, ::1] out, const float[:, ::1] x, const float[::1] w, double eps):
    """Rows of the stage's RMSNorm (Stage._norm without bias), the same float32 steps per row."""
    cdef int64_t R = x.shape[0], C = x.shape[1], r
    if out.shape[0] != R or out.shape[1] != C or w.shape[0] != C:
        raise ValueError(f"out, w: expected ({R}, {C}) and ({C},), got ({out.shape[0]}, {out.shape[1]}) "
                         f"and ({w.shape[0]},)")
    if R and C:
        with nogil:
            for r in range(R):
                _rmsnorm(&out[r, 0], &x[r, 0], &w[0], C, <float>eps)


def softmax_causal(float[:, :, ::1] s, int64_t T, int64_t pos, int64_t window, int isa, int nthreads):
    """In place on scores s (KV, g*T, S), rows (g, t): the query at row r sits at position
    pos + r % T; causal (and sliding-window) masking, then the stage's softmax steps."""
    cdef int64_t KV = s.shape[0], R = s.shape[1], S = s.shape[2], i
    if T <= 0 or R % T:
        raise ValueError(f"T: expected a positive divisor of the {R} score rows, got {T}")
    if KV == 0 or R == 0 or S == 0:
        return
    for i in prange(KV * R, nogil=True, num_threads=max(1, nthreads), schedule="static"):
        _softmax_row(&s[i // R, i % R, 0], S, pos + (i % R) % T, window, isa)


def rope_rows(float[:, :, ::1] out, const float[:, :, :] x, const float[:, ::1] cos, const float[:, ::1] sin,
              int64_t pos):
    """out (T, nh, hd) = x rotated (rotate-half) at positions pos.. (x's heads contiguous)."""
    cdef int64_t T = x.shape[0], nh = x.shape[1], hd = x.shape[2], half = hd // 2, t, h
    if out.shape[0] != T or out.shape[1] != nh or out.shape[2] != hd:
        raise ValueError(f"out: expected ({T}, {nh}, {hd}), got ({out.shape[0]}, {out.shape[1]}, {out.shape[2]})")
    if hd % 2 or (hd and x.strides[2] != sizeof(float)):
        raise ValueError(f"x: expected heads of an even size laid out contiguously, got hd {hd}, "
                         f"strides ({x.strides[0]}, {x.strides[1]}, {x.strides[2]})")
    if cos.shape[0] < pos + T or sin.shape[0] < pos + T or cos.shape[1] != half or sin.shape[1] != half:
        raise ValueError(f"cos, sin: expected at least ({pos + T}, {half}) tables")
    if hd == 0:
        return
    with nogil:
        for t in range(T):
            for h in range(nh):
                _rope_head(&out[t, h, 0], &x[t, h, 0], &cos[pos + t, 0], &sin[pos + t, 0], half)
