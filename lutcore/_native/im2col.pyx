"""Thin wrappers over csrc/im2col/im2col.h (the approximate PyTorch layers' operands) and
csrc/conv2d/conv2d.h (their direct small-K convolution).

Design: lutcore.torch validates tensors, geometry and thread counts and allocates
every buffer; here we take pointers, release the GIL and call C.  The float input
of ``quantize_nhwc`` is read through its element strides (any layout of a dense
tensor); every other buffer is C-contiguous.
"""
from lutcore._native._common cimport *
bind_team()

KMAX = LC_C2D_KMAX


def body_names(int isa):
    """{family: body} of the direct convolution at ``isa``."""
    return {"direct conv (exact table)": lc_c2d_body_name(isa, 1).decode(),
            "direct conv (any table)": lc_c2d_body_name(isa, 0).decode()}


def direct_fast(int isa, bint exact):
    """Whether conv2d_direct beats im2col + the LUT GEMM at ``isa`` for this kind of table."""
    return lc_c2d_fast(isa, exact) != 0


def conv2d_direct(float[::1] y, const int8_t[::1] q, shape, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                  int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                  const int8_t[:, ::1] Wt, const int32_t[::1] mul, bint exact, const float[::1] scale,
                  const float[::1] bias, int isa, int nthreads):
    """y (N, O, OH, OW) flat = float32(sum_k mul[x, w]) * scale[o] (+ bias[o]) over the patches of
    the NHWC codes q of ``shape`` (N, H, W, C) (one group) and Wt (KH*KW*C, O), K <= KMAX, with no
    patch matrix (csrc/conv2d/conv2d.h)."""
    cdef lc_c2d_geo g
    cdef const float *bp = NULL
    cdef int rc = 0
    g.N, g.H, g.W, g.C = shape[0], shape[1], shape[2], shape[3]
    g.KH, g.KW, g.OH, g.OW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw = KH, KW, OH, OW, sh, sw, ph, pw, dh, dw
    g.O, g.K = Wt.shape[1], Wt.shape[0]
    if g.K != KH * KW * g.C or g.K > LC_C2D_KMAX or g.K < 1:
        raise ValueError(f"Wt: expected {KH * KW * g.C} rows (KH*KW*C, at most {LC_C2D_KMAX}), got {g.K}")
    if min(g.N, g.H, g.W, g.C, OH, OW, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError("shape, OH, OW, stride, dilation: expected >= 1, padding >= 0")
    if y.shape[0] != g.N * g.O * OH * OW or q.shape[0] < g.N * g.H * g.W * g.C or mul.shape[0] != 65536 \
            or scale.shape[0] != g.O:
        raise ValueError("y, q, mul, scale: sizes do not match the geometry")
    if bias is not None:
        if bias.shape[0] != g.O:
            raise ValueError(f"bias: expected {g.O} values, got {bias.shape[0]}")
        bp = &bias[0]
    if g.O == 0:
        return
    with nogil:
        rc = lc_conv2d_direct(&y[0], &q[0], &g, &Wt[0, 0], &mul[0], exact, &scale[0], bp, isa, nthreads)
    if rc:
        raise MemoryError("conv2d_direct: no memory for the weight pairs")


def absmax(const float[::1] x, int isa, int nthreads):
    """(max|x|, count of NaN/Inf) of a flat float32 buffer."""
    cdef int64_t bad = 0, n = x.shape[0]
    cdef float m = 0
    if n == 0:
        return 0.0, 0
    with nogil:
        m = lc_absmax(&x[0], n, &bad, isa, nthreads)
    return m, bad


def same_bytes(const unsigned char[::1] a, const unsigned char[::1] b, int nthreads):
    """True when the byte buffers a and b are equal (lengths first: unequal lengths are not)."""
    cdef int64_t n = a.shape[0]
    cdef int same = 0
    if b.shape[0] != n:
        return False
    if n == 0:
        return True
    with nogil:
        same = lc_same_bytes(&a[0], &b[0], n, nthreads)
    return same != 0


def quantize_nhwc(int8_t[::1] q, const float[::1] base, int64_t offset, shape, strides, float s,
                  int isa, int nthreads):
    """q (N*H*W*C,) = codes of the (N, H, W, C) view of ``base`` starting at element
    ``offset`` with element ``strides``; returns the count of NaN/Inf."""
    cdef int64_t N = shape[0], H = shape[1], W = shape[2], C = shape[3]
    cdef int64_t sn = strides[0], sh = strides[1], sw = strides[2], sc = strides[3], bad = 0
    if N * H * W * C == 0:
        return 0
    if q.shape[0] < N * H * W * C:
        raise ValueError("q: too small for the tensor")
    if min(sn, sh, sw, sc) < 0 or offset < 0 or \
            offset + (N - 1) * sn + (H - 1) * sh + (W - 1) * sw + (C - 1) * sc >= base.shape[0]:
        raise ValueError("x: the strided view reaches outside its buffer")
    with nogil:
        bad = lc_quantize_nhwc(&q[0], &base[offset], N, H, W, C, sn, sh, sw, sc, s, isa, nthreads)
    return bad


def im2col_nhwc(int8_t[:, :, ::1] A, const int8_t[::1] q, shape, int64_t KH, int64_t KW, int64_t OH,
                int64_t OW, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                int nthreads):
    """A (G, N*OH*OW, KH*KW*C/G) <- patches of the NHWC codes q of ``shape`` (N, H, W, C)."""
    cdef int64_t N = shape[0], H = shape[1], W = shape[2], C = shape[3], G = A.shape[0]
    if A.shape[1] != N * OH * OW or A.shape[2] * G != KH * KW * C or q.shape[0] < N * H * W * C:
        raise ValueError("A: shape does not match the geometry")
    if A.shape[0] * A.shape[1] * A.shape[2] == 0:
        return
    with nogil:
        lc_im2col_nhwc(&A[0, 0, 0], &q[0], N, H, W, C, G, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, nthreads)


def grouped_direct(int32_t[:, ::1] acc, const int8_t[::1] q, shape, int64_t G, int64_t KH, int64_t KW,
                   int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                   int64_t dw, const int8_t[:, ::1] Wt, const int32_t[::1] mul, bint exact, int isa,
                   int nthreads):
    """acc (N*OH*OW, O) = the patches of the NHWC codes q of ``shape`` (N, H, W, C) in G groups
    times Wt (KH*KW*C/G, O) through ``mul`` (int32 (65536,), entry a*256 + b; ``exact``: a*b)."""
    cdef int64_t N = shape[0], H = shape[1], W = shape[2], C = shape[3], O = Wt.shape[1]
    if G < 1 or C % G or O % G or Wt.shape[0] != KH * KW * (C // G) or acc.shape[0] != N * OH * OW or \
            acc.shape[1] != O or q.shape[0] < N * H * W * C or mul.shape[0] != 65536:
        raise ValueError("acc, q, Wt, mul: shapes do not match the geometry")
    if N * OH * OW * O == 0:
        return
    if Wt.shape[0] == 0:
        acc[:, :] = 0
        return
    with nogil:
        lc_grouped_direct(&acc[0, 0], O, &q[0], H, W, C, G, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, &Wt[0, 0],
                          &mul[0], exact, O, N, isa, nthreads)


def dequant(float[::1] y, const int32_t[:, ::1] acc, const float[::1] scale, const float[::1] bias, int64_t N,
            int64_t P, int nthreads):
    """y (N, O, P) flat = float(acc (N*P, O)) * scale[o] + bias[o] (bias None: none)."""
    cdef int64_t O = acc.shape[1]
    cdef const float *bp = NULL
    if acc.shape[0] != N * P or y.shape[0] != N * P * O or scale.shape[0] != O:
        raise ValueError("y, acc, scale: shapes do not match")
    if bias is not None:
        if bias.shape[0] != O:
            raise ValueError("bias: shape does not match")
        bp = &bias[0]
    if N * P * O == 0:
        return
    with nogil:
        lc_dequant(&y[0], &acc[0, 0], O, &scale[0], bp, N, P, O, nthreads)


def _window_ok(int64_t N, int64_t C, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
               int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t ph, int64_t pw):
    if min(N, C, H, W, KH, KW, OH, OW, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError("shape, kernel, OH, OW, stride, dilation: expected >= 1, padding >= 0")


def _rows_apart(a, int64_t itemsize):
    """The distance between a 2-D memoryview's rows in elements (its rows contiguous), or an error."""
    if a.shape[0] > 0 and a.shape[1] > 1 and a.strides[1] != itemsize:
        raise ValueError("the rows must be contiguous")
    if a.shape[0] <= 1:
        return a.shape[1]
    if a.strides[0] % itemsize or a.strides[0] // itemsize < a.shape[1]:
        raise ValueError("the rows overlap")
    return a.strides[0] // itemsize


def im2col_kmajor(int8_t[:, :] AT, const int8_t[::1] q, shape, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                  int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int nthreads):
    """AT (KH*KW*C, N*OH*OW), rows contiguous (any distance apart) <- the patches (one group) of the
    NCHW codes q of ``shape`` (N, H, W, C), k-major: AT[k, m] = A[m, k] of im2col_nhwc."""
    cdef int64_t N = shape[0], H = shape[1], W = shape[2], C = shape[3]
    _window_ok(N, C, H, W, KH, KW, OH, OW, sh, sw, dh, dw, ph, pw)
    if AT.shape[0] != KH * KW * C or AT.shape[1] != N * OH * OW or q.shape[0] < N * C * H * W:
        raise ValueError("AT, q: shapes do not match the geometry")
    cdef int64_t ld = _rows_apart(AT, 1)
    with nogil:
        lc_im2col_kmajor(&AT[0, 0], ld, &q[0], N, C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, nthreads)


def fold_kmajor(float[::1] dx, const float[:, :] colT, shape, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int nthreads):
    """dx (N, C, H, W) flat = the fold of k-major patch gradients colT (KH*KW*C, N*OH*OW) (rows
    contiguous, any distance apart; F.fold's order and bits); ``shape`` is (N, H, W, C)."""
    cdef int64_t N = shape[0], H = shape[1], W = shape[2], C = shape[3]
    _window_ok(N, C, H, W, KH, KW, OH, OW, sh, sw, dh, dw, ph, pw)
    if colT.shape[0] != KH * KW * C or colT.shape[1] != N * OH * OW or dx.shape[0] != N * C * H * W:
        raise ValueError("dx, colT: shapes do not match the geometry")
    cdef int64_t ld = _rows_apart(colT, 4)
    with nogil:
        lc_fold_kmajor(&dx[0], &colT[0, 0], ld, N, C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, nthreads)


def chw_rows(float[:, ::1] rows, const float[:, :, ::1] x, int nthreads, float scale=1.0):
    """rows (N*P, C) = x (N, C, P) * scale transposed per image (a gradient's NCHW to its NHWC rows);
    scale a power of two.  Returns whether every product is exact."""
    cdef int64_t N = x.shape[0], C = x.shape[1], P = x.shape[2]
    cdef int exact = 1
    if rows.shape[0] != N * P or rows.shape[1] != C:
        raise ValueError("rows, x: shapes do not match")
    if N * C * P == 0:
        return True
    with nogil:
        exact = lc_chw_rows(&rows[0, 0], &x[0, 0, 0], N, C, P, scale, nthreads)
    return exact != 0


def scaled_om(float[:, :] gT, const float[:, :, ::1] x, const float[::1] sw, float scale, int nthreads):
    """gT (O, N*P), rows contiguous (any distance apart) = float32(x (N, O, P) * sw[o]) * scale (sw None:
    x * scale), scale a power of two.  Returns whether every scaling is exact."""
    cdef int64_t N = x.shape[0], O = x.shape[1], P = x.shape[2]
    cdef const float *swp = NULL
    cdef int exact = 1
    if gT.shape[0] != O or gT.shape[1] != N * P:
        raise ValueError("gT, x: shapes do not match")
    if sw is not None:
        if sw.shape[0] != O:
            raise ValueError("sw: expected one scale an output channel")
        swp = &sw[0]
    if N * O * P == 0:
        return True
    cdef int64_t ld = _rows_apart(gT, 4)
    with nogil:
        exact = lc_scaled_om(&gT[0, 0], ld, &x[0, 0, 0], swp, scale, N, O, P, nthreads)
    return exact != 0


def dw_layout(float[:, :, ::1] dw, const float[:, :, ::1] sT, float s, int nthreads):
    """dw (O, C, T) = float32(sT (T, C, O) * s): a conv's dW from k-major sums to the weight's layout."""
    cdef int64_t T = sT.shape[0], C = sT.shape[1], O = sT.shape[2]
    if dw.shape[0] != O or dw.shape[1] != C or dw.shape[2] != T:
        raise ValueError("dw, sT: shapes do not match")
    if T * C * O == 0:
        return
    with nogil:
        lc_dw_layout(&dw[0, 0, 0], &sT[0, 0, 0], s, T, C, O, nthreads)
