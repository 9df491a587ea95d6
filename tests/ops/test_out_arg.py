"""``out=`` of the products (lut_gemm, qmatmul, QLinear, matmul) takes any array of
the result's shape and dtype, as numpy's does: row-strided views are written in
place through the kernels' row stride (the elements around them untouched), other
layouts and arrays sharing memory with an input go through a stand-in, and the
bits are those of a fresh result either way."""
import numpy as np
import pytest

import lutcore
from lutcore.ops.matmul import matmul, pack_matrix
from lutcore.quant import QLinear, qmatmul, quantize
from reference.gemm_ref import lut_gemm_ref
from test_gemm import make_units

GUARD_I = -123456789
GUARD_F = np.float32(-7.25)


def _bits(x):
    return x.view(np.uint32 if x.dtype == np.float32 else x.dtype)


def _window(shape, dtype, fill, extra=5, off=3):
    """A view of shape ``shape`` inside a larger array (rows wider by ``extra``, starting
    at column ``off``), the rest filled with ``fill``; returns (big, view)."""
    big = np.full(shape[:-1] + (shape[-1] + extra,), fill, dtype)
    return big, big[..., off:off + shape[-1]]


def _outside(big, off, n):
    mask = np.ones(big.shape, bool)
    mask[..., off:off + n] = False
    return big[mask]


@pytest.mark.parametrize("table", ["exact", "mitchell", "random"])
@pytest.mark.parametrize("M,K,N", [(1, 7, 1), (7, 33, 5), (50, 37, 129), (33, 70, 17), (129, 37, 50)])
@pytest.mark.parametrize("threads", [1, 2])
def test_lut_gemm_writes_a_row_strided_out_in_place(simd, table, M, K, N, threads):
    rng = np.random.default_rng(M * 7 + N)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    u = make_units(table)
    big, view = _window((M, N), np.int32, GUARD_I)
    got = lutcore.lut_gemm(a, b, units=u, threads=threads, out=view)
    assert got is view
    assert np.array_equal(view, lut_gemm_ref(a, b, u.mul))
    assert np.all(_outside(big, 3, N) == GUARD_I)


@pytest.mark.parametrize("units", [None, "mitchell"])
@pytest.mark.parametrize("block", [32, 7])
@pytest.mark.parametrize("M,K,N", [(1, 70, 45), (6, 33, 17), (50, 40, 129)])
def test_qmatmul_and_qlinear_write_a_row_strided_out_in_place(simd, units, block, M, K, N):
    u = make_units(units) if units else None
    rng = np.random.default_rng(block * 100 + M)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    want = qmatmul(x, w, u, block)
    for t in (1, 2):
        big, view = _window((M, N), np.float32, GUARD_F)
        assert qmatmul(x, w, u, block, threads=t, out=view) is view
        assert np.array_equal(_bits(view), _bits(want))
        assert np.all(_outside(big, 3, N) == GUARD_F)
    ql = QLinear(w, u, block)
    big, view = _window((M, N), np.float32, GUARD_F)
    assert ql(x, out=view) is view
    assert np.array_equal(_bits(view), _bits(want))
    assert np.all(_outside(big, 3, N) == GUARD_F)
    with pytest.raises(ValueError, match="out"):
        ql(x, out=np.empty((M, N + 1), np.float32))      # was taken as it came: a wider N read past B
    with pytest.raises(ValueError, match="out"):
        qmatmul(x, w, u, block, out=np.empty((M, N), np.float64))


@pytest.mark.parametrize("M,K,N", [(1, 7, 1), (7, 33, 5), (33, 70, 17), (50, 37, 129)])
@pytest.mark.parametrize("tri", [None, "out_lower"])
def test_matmul_writes_row_and_batch_strided_outs_in_place(simd, M, K, N, tri):
    if tri == "out_lower" and M != N:
        M = N = max(M, N)
    rng = np.random.default_rng(M + 31 * N)
    a = rng.standard_normal((3, M, K)).astype(np.float32)
    b = rng.standard_normal((3, K, N)).astype(np.float32)
    base = rng.standard_normal((3, M, N)).astype(np.float32)
    want = matmul(a, b, tri=tri)
    want_acc = base.copy()
    matmul(a, b, out=want_acc, accumulate=True, tri=tri)
    for t in (1, 2):
        big, view = _window((3, M, N), np.float32, GUARD_F)
        assert matmul(a, b, out=view, threads=t, tri=tri) is view
        assert np.array_equal(_bits(view), _bits(want))
        assert np.all(_outside(big, 3, N) == GUARD_F)
        view[...] = base
        matmul(a, b, out=view, accumulate=True, threads=t, tri=tri)
        assert np.array_equal(_bits(view), _bits(want_acc))
        assert np.all(_outside(big, 3, N) == GUARD_F)
        # every other batch of a larger stack, and 2-D products into a strided window
        stack = np.full((6, M, N), GUARD_F, np.float32)
        matmul(a, b, out=stack[::2], threads=t, tri=tri)
        assert np.array_equal(_bits(stack[::2]), _bits(want)) and np.all(stack[1::2] == GUARD_F)
        big2, v2 = _window((M, N), np.float32, GUARD_F)
        matmul(a[1], b[1], out=v2, threads=t, tri=tri)
        assert np.array_equal(_bits(v2), _bits(want[1])) and np.all(_outside(big2, 3, N) == GUARD_F)
    packed = pack_matrix(b[0])
    big, view = _window((M, N), np.float32, GUARD_F)
    matmul(a[0], packed, out=view)
    assert np.array_equal(_bits(view), _bits(matmul(a[0], b[0]))) and np.all(_outside(big, 3, N) == GUARD_F)


def test_other_layouts_and_aliases_go_through_a_stand_in(simd):
    rng = np.random.default_rng(3)
    M = K = N = 37
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    want = matmul(a, b)
    acc = c.copy()
    matmul(a, b, out=acc, accumulate=True)
    for make in (lambda x: np.asfortranarray(x), lambda x: x.T.copy().T, lambda x: x[::-1].copy()[::-1],
                 lambda x: np.repeat(x, 2, axis=1).copy()[:, ::2]):
        out = make(np.zeros((M, N), np.float32))
        assert matmul(a, b, out=out) is out
        assert np.array_equal(_bits(out), _bits(want))
        out[...] = c
        matmul(a, b, out=out, accumulate=True)
        assert np.array_equal(_bits(out), _bits(acc))
    # out is an input: the product of the inputs as they were (numpy's rule)
    a2 = a.copy()
    assert matmul(a2, b, out=a2) is a2 and np.array_equal(_bits(a2), _bits(want))
    b2 = b.copy()
    matmul(a, b2, out=b2)
    assert np.array_equal(_bits(b2), _bits(want))
    a3 = a.copy()
    matmul(a3, a3, out=a3, accumulate=True)                       # a + a @ a
    ref = a.copy()
    matmul(a, a.copy(), out=ref, accumulate=True)
    assert np.array_equal(_bits(a3), _bits(ref))
    # int8 inputs and an int32 out over one buffer
    raw = np.zeros(4 * M * N + M * K, np.uint8)
    ai = raw[:M * K].view(np.int8).reshape(M, K)
    ai[...] = rng.integers(-128, 128, (M, K))
    bi = rng.integers(-128, 128, (K, N)).astype(np.int8)
    want_i = lut_gemm_ref(ai.copy(), bi, lutcore.Units.exact().mul)
    ci = raw[: 4 * M * N].view(np.int32).reshape(M, N)           # overlaps ai
    assert lutcore.lut_gemm(ai, bi, out=ci) is ci
    assert np.array_equal(ci, want_i)
    # qmatmul reads only its operands' codes, taken before it writes: out may be the input itself
    xq = rng.standard_normal((M, K)).astype(np.float32)
    want_q = qmatmul(xq, b)
    assert qmatmul(xq, b, out=xq) is xq and np.array_equal(_bits(xq), _bits(want_q))


def test_empty_products_with_strided_outs():
    big, view = _window((4, 3), np.float32, GUARD_F)
    matmul(np.ones((4, 0), np.float32), np.ones((0, 3), np.float32), out=view)
    assert np.all(view == 0) and np.all(_outside(big, 3, 3) == GUARD_F)
    view[...] = 2
    matmul(np.ones((4, 0), np.float32), np.ones((0, 3), np.float32), out=view, accumulate=True)
    assert np.all(view == 2)
    bigi, vi = _window((4, 3), np.int32, GUARD_I)
    lutcore.lut_gemm(np.ones((4, 0), np.int8), np.ones((0, 3), np.int8), out=vi)
    assert np.all(vi == 0) and np.all(_outside(bigi, 3, 3) == GUARD_I)


def test_bad_out():
    a = np.ones((4, 5), np.float32)
    b = np.ones((5, 3), np.float32)
    for f in (lambda o: matmul(a, b, out=o), lambda o: qmatmul(a, b, out=o),
              lambda o: lutcore.lut_gemm(a.astype(np.int8), b.astype(np.int8), out=o)):
        with pytest.raises(TypeError, match="out"):
            f([[0.0] * 3] * 4)
        with pytest.raises(ValueError, match="out.*shape"):
            f(np.zeros((4, 4), np.float32))
        with pytest.raises(ValueError, match="out"):
            f(np.zeros((4, 3), np.float16))
        ro = np.zeros((4, 3), np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="out"):
            f(ro)


def test_native_products_check_the_row_stride_they_are_given():
    """The Cython boundary checks a strided out against the row stride it is told, so
    a wrong ld cannot make the kernel write outside the view."""
    from lutcore import _simd
    from lutcore._native import gemm as _g
    from lutcore.ops.gemm import pack_a16, pack_panels
    a = np.ones((4, 8), np.int8)
    b = np.ones((8, 3), np.int8)
    bp, Kp = pack_panels(b, 8, 8, 1)
    ap = pack_a16(a, 8, 8, 1)
    big = np.zeros((4, 10), np.int32)
    with pytest.raises(ValueError, match="out"):
        _g.gemm_exact_packed(big[:, :3], ap, bp, Kp, _simd.isa(), 1, 3)       # its rows are 10 apart
    with pytest.raises(ValueError, match="out"):
        _g.gemm_exact_packed(big[:, ::2][:, :3], ap, bp, Kp, _simd.isa(), 1, 10)
    _g.gemm_exact_packed(big[:, 2:5], ap, bp, Kp, _simd.isa(), 1, 10)
    assert np.all(big[:, 2:5] == 8) and np.all(big[:, :2] == 0) and np.all(big[:, 5:] == 0)


def test_out_rows_writes_in_place_exactly_when_it_can():
    """The layouts written in place (so the tests above reach the kernels' row
    strides) and the ones that get a stand-in."""
    from numpy.lib.stride_tricks import as_strided
    from lutcore._check import out_rows
    big = np.zeros((5, 9), np.float32)
    for view, ld in ((big[:, 2:6], 9), (big[1:4, :4], 9), (big, 9), (big[:1, 3:7], 4), (big[::2, :4], 18)):
        dst, got_ld, _ = out_rows(view, "out", view.shape, np.float32)
        assert dst is view and got_ld == ld
    stack = np.zeros((4, 3, 5), np.float32)
    view = stack[::2, :, 1:4]
    dst, ld, sb = out_rows(view, "out", (2, 3, 3), np.float32)
    assert dst is view and (ld, sb) == (5, 30)
    a = np.zeros((5, 4), np.float32)
    for view, inputs in ((np.asfortranarray(np.zeros((5, 4), np.float32)), ()), (big[::-1, :4], ()),
                         (big[:, ::2], ()), (as_strided(big, (5, 4), (4, 4)), ()),
                         (big[:, :4], (big[:, 4:8],)),            # interleaved rows: may share
                         (a, (a[1:],))):
        dst, ld, sb = out_rows(view, "out", view.shape, np.float32, *inputs)
        assert dst is not view and dst.flags.c_contiguous and (ld, sb) == (view.shape[-1], view.size)
    # rows that do not share memory with an input stay in place
    view = big[:, :4]
    dst, _, _ = out_rows(view, "out", (5, 4), np.float32, np.zeros(3, np.float32))
    assert dst is view


def _elementwise_cases():
    """(name, fn(x, out=), input maker, out dtype) for every element-wise function."""
    from lutcore.ops import exp, exp2, sigmoid, silu, softplus
    from lutcore.ops.mathfn import silu_backward
    ex = lutcore.Units.exact()
    f32 = lambda r, s: r.standard_normal(s).astype(np.float32)          # noqa: E731
    return [
        ("requant", lambda x, out=None: lutcore.requant(x, 6, ex, out=out),
         lambda r, s: r.integers(-2**20, 2**20, s).astype(np.int32), np.int8),
        ("relu8", lambda x, out=None: lutcore.relu8(x, ex, out=out),
         lambda r, s: r.integers(-128, 128, s).astype(np.int8), np.int8),
        ("fp16_encode", lambda x, out=None: lutcore.fp16_encode(x, out=out), f32, np.uint16),
        ("fp16_decode", lambda x, out=None: lutcore.fp16_decode(x, out=out),
         lambda r, s: r.integers(0, 2**16, s).astype(np.uint16), np.float32),
        ("fp16_round", lambda x, out=None: lutcore.fp16_round(x, out=out), f32, np.float32),
        ("exp", lambda x, out=None: exp(x, out=out), f32, np.float32),
        ("exp2", lambda x, out=None: exp2(x, out=out), f32, np.float32),
        ("softplus", lambda x, out=None: softplus(x, out=out), f32, np.float32),
        ("silu", lambda x, out=None: silu(x, out=out), f32, np.float32),
        ("sigmoid", lambda x, out=None: sigmoid(x, out=out), f32, np.float32),
        ("silu_backward", lambda x, out=None: silu_backward(x[::-1].copy(), x, out=out), f32, np.float32),
    ]


@pytest.mark.parametrize("case", _elementwise_cases(), ids=lambda c: c[0])
def test_elementwise_out_any_layout_in_place_and_aliases(case):
    name, fn, make, odt = case
    rng = np.random.default_rng(len(name))
    shape = (33, 70)
    x = make(rng, shape)
    want = fn(x)
    assert want.dtype == odt and want.shape == shape
    raw = lambda a: a.view(np.uint8)                                   # noqa: E731
    for out in (np.empty(shape, odt), np.empty(shape, odt, order="F"), np.empty((33, 140), odt)[:, ::2],
                np.empty((40, 70), odt)[3:36]):
        assert fn(x, out=out) is out
        assert np.array_equal(raw(np.ascontiguousarray(out)), raw(want))
    if odt == x.dtype:                                    # in place: out is the input itself
        y = x.copy()
        assert fn(y, out=y) is y and np.array_equal(raw(y), raw(want))
        # a shifted view of the input: read before written, through a stand-in
        buf = np.concatenate([x.reshape(-1), x.reshape(-1)[:7]])
        src, dst = buf[:x.size].reshape(shape), buf[7:7 + x.size].reshape(shape)
        assert fn(src, out=dst) is dst and np.array_equal(raw(dst), raw(want))
    with pytest.raises(TypeError, match="out"):
        fn(x, out=[0] * x.size)
    with pytest.raises(ValueError, match="out"):
        fn(x, out=np.empty((33, 71), odt))
    with pytest.raises(ValueError, match="out"):
        fn(x, out=np.empty(shape, np.float64 if odt != np.float64 else np.float32))
    ro = np.empty(shape, odt)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out.*writeable"):
        fn(x, out=ro)


def test_scan_out_never_overwrites_what_the_backward_keeps():
    from lutcore.ops.scan import selective_scan_backward, selective_scan_forward
    rng = np.random.default_rng(9)
    b, L, D, N = 2, 9, 7, 4
    u = rng.standard_normal((b, L, D)).astype(np.float32)
    delta = rng.standard_normal((b, L, D)).astype(np.float32)
    A = -np.exp(rng.standard_normal((D, N))).astype(np.float32)
    B = rng.standard_normal((b, L, N)).astype(np.float32)
    C = rng.standard_normal((b, L, N)).astype(np.float32)
    dy = rng.standard_normal((b, L, D)).astype(np.float32)
    y0, _, ctx0 = selective_scan_forward(u, delta, A, B, C)
    g0 = selective_scan_backward(dy, ctx=ctx0)
    u2 = u.copy()
    y, _, ctx = selective_scan_forward(u2, delta, A, B, C, out=u2)      # out is the input u
    assert y is u2 and np.array_equal(y.view(np.uint32), y0.view(np.uint32))
    g = selective_scan_backward(dy, ctx=ctx)
    for k in g0:
        if g0[k] is not None:
            assert np.array_equal(g[k].view(np.uint32), g0[k].view(np.uint32)), k
    big = np.zeros((b, L, D + 3), np.float32)
    y, _, _ = selective_scan_forward(u, delta, A, B, C, out=big[:, :, 1:D + 1])
    assert np.array_equal(y.view(np.uint32), y0.view(np.uint32)) and np.all(big[:, :, 0] == 0)
