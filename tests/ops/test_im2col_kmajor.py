"""The k-major patches and their fold (csrc/im2col/im2col.h: lc_im2col_kmajor, lc_fold_kmajor;
lutcore.ops.im2col.im2col_kmajor / fold_kmajor), backward="table"'s planes path: the patches against a
textbook numpy oracle (zero padding, then one strided slice per tap), the fold against PyTorch's F.fold
of the same columns bit for bit (its order: each pixel from +0, the taps in (i, j) order), over
strides, paddings, dilations, 1-D and 1x1 windows (stride 1 with rows as long as the input's: one flat
loop a plane; otherwise a loop a row), at 1 and 2 threads."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lutcore.ops import im2col as i2c
from lutcore.torch.functional import _Conv

GEOMETRIES = [  # (N, C, H, W, KH, KW, stride, padding, dilation)
    (2, 3, 7, 5, 3, 3, 1, 1, 1),
    (3, 5, 11, 10, 3, 3, 2, 1, 1),
    (2, 16, 8, 8, 1, 1, 2, 0, 1),
    (1, 4, 13, 12, 3, 2, (2, 3), (2, 1), (2, 1)),
    (4, 8, 4, 4, 3, 3, 1, 1, 1),
    (2, 6, 1, 33, 1, 3, 1, (0, 1), 1),            # Conv1d as H = 1
    (1, 2, 9, 9, 5, 5, 3, 4, 2),                  # padding wider than the image's reach
    (33, 1, 3, 3, 3, 3, 1, 0, 1),                 # one output pixel
    (1, 3, 9, 9, 3, 3, 1, 2, 2),                  # stride 1, rows as long as the input's, dilated
    (2, 3, 6, 5, 3, 3, 1, (0, 1), 1),             # stride 1, OW = W but OH < H
    (2, 2, 5, 7, 5, 7, 1, (1, 3), 1),             # a wide kernel (KW 7), OH < H
    (1, 2, 9, 9, 3, 3, 1, 1, 1),                  # a plane of more than 64 positions: rows
]
IDS = ["x".join(str(v) for v in g[:6]) + f"-s{g[6]}p{g[7]}d{g[8]}" for g in GEOMETRIES]


def _geo(g):
    N, C, H, W, KH, KW, st, pd, dl = g
    return _Conv(torch.zeros(N, C, H, W), torch.zeros(1, C, KH, KW), st, pd, dl, 1, "t")


def _patches_ref(q, g, geo):
    """AT (KH*KW*C, N*OH*OW): row (i*KW + j)*C + c, column (n*OH + oh)*OW + ow = the code at
    (oh*sh - ph + i*dh, ow*sw - pw + j*dw) of channel c, image n (0 in the padding)."""
    N, C, H, W = q.shape
    KH, KW, OH, OW, sh, sw, ph, pw, dh, dw = geo.window
    pad = np.zeros((N, C, H + 2 * ph, W + 2 * pw), np.int8)
    pad[:, :, ph:ph + H, pw:pw + W] = q
    rows = []
    for i in range(KH):
        for j in range(KW):
            tap = pad[:, :, i * dh:i * dh + sh * (OH - 1) + 1:sh, j * dw:j * dw + sw * (OW - 1) + 1:sw]  # (N, C, OH, OW)
            rows.append(tap.transpose(1, 0, 2, 3).reshape(C, -1))                                      # (C, M)
    return np.concatenate(rows, 0)


@pytest.mark.parametrize("g", GEOMETRIES, ids=IDS)
def test_kmajor_patches_match_the_oracle(g):
    geo = _geo(g)
    rng = np.random.default_rng(sum(geo.window) + g[0])
    q = rng.integers(-127, 128, (g[0], g[1], g[2], g[3])).astype(np.int8)
    want = _patches_ref(q, g, geo)
    for nt in (1, 2):
        for pad in (0, 7):                                            # rows geo.M + pad apart
            big = np.full((geo.Kg, geo.M + pad), 99, np.int8)
            AT = big[:, :geo.M]
            i2c.im2col_kmajor(AT, q.reshape(-1), geo, threads=nt)
            assert np.array_equal(AT, want) and (big[:, geo.M:] == 99).all(), (nt, pad)


@pytest.mark.parametrize("g", GEOMETRIES, ids=IDS)
def test_kmajor_fold_has_torch_fold_bits(g):
    geo = _geo(g)
    N, C, H, W = g[:4]
    KH, KW, OH, OW = geo.window[:4]
    rng = np.random.default_rng(sum(geo.window) + 7)
    colT = (rng.standard_normal((geo.Kg, geo.M)) * 10).astype(np.float32)
    colT[rng.random(colT.shape) < 0.1] = -0.0                        # -0 + ... : F.fold starts each pixel at +0
    cols = torch.from_numpy(colT).reshape(KH, KW, C, N, OH * OW).permute(3, 2, 0, 1, 4).reshape(N, C * KH * KW, -1)
    want = F.fold(cols, (H, W), (KH, KW), dilation=geo.dilation, padding=geo.padding, stride=geo.stride)
    padded = np.full((geo.Kg, geo.M + 5), np.nan, np.float32)
    padded[:, :geo.M] = colT
    for nt in (1, 2):
        for cols in (colT, padded[:, :geo.M]):                        # rows geo.M and geo.M + 5 apart
            dx = np.full(N * C * H * W, np.nan, np.float32)
            i2c.fold_kmajor(dx, cols, geo, threads=nt)
            assert np.array_equal(dx.view(np.int32), want.numpy().reshape(-1).view(np.int32)), nt


def test_kmajor_refuses_mismatched_buffers():
    geo = _geo(GEOMETRIES[0])
    with pytest.raises(ValueError, match="AT, q: shapes"):
        i2c.im2col_kmajor(np.zeros((geo.Kg, geo.M + 1), np.int8), np.zeros(2 * 3 * 7 * 5, np.int8), geo)
    with pytest.raises(ValueError, match="AT, q: shapes"):
        i2c.im2col_kmajor(np.zeros((geo.Kg, geo.M), np.int8), np.zeros(10, np.int8), geo)
    with pytest.raises(ValueError, match="dx, colT: shapes"):
        i2c.fold_kmajor(np.zeros(5, np.float32), np.zeros((geo.Kg, geo.M), np.float32), geo)


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 7, 5), (3, 64, 33), (32, 64, 1024), (4, 130, 17), (2, 512, 16)])
def test_chw_rows_is_the_transpose(shape):
    """rows (N*P, C) = x (N, C, P) per image transposed (a gradient's NHWC rows), at 1 and 2 threads."""
    N, C, P = shape
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    for nt in (1, 2):
        rows = np.full((N * P, C), np.nan, np.float32)
        i2c.chw_rows(rows, x, threads=nt)
        assert np.array_equal(rows, x.transpose(0, 2, 1).reshape(N * P, C)), nt
    with pytest.raises(ValueError, match="shapes do not match"):
        i2c.chw_rows(np.zeros((N * P, C + 1), np.float32), x)


@pytest.mark.parametrize("shape", [(1, 1, 1), (9, 7, 5), (9, 64, 64), (3, 33, 17), (1, 256, 512), (25, 3, 130)])
def test_dw_layout_is_the_scaled_transpose(shape):
    """dw (O, C, T) = float32(sT (T, C, O) * s), at 1 and 2 threads."""
    T, C, O = shape
    rng = np.random.default_rng(sum(shape))
    sT = rng.standard_normal(shape).astype(np.float32)
    s = np.float32(0.0123)
    want = (sT.transpose(2, 1, 0) * s).astype(np.float32)
    for nt in (1, 2):
        dw = np.full((O, C, T), np.nan, np.float32)
        i2c.dw_layout(dw, sT, s, threads=nt)
        assert np.array_equal(dw.view(np.int32), want.view(np.int32)), nt
    with pytest.raises(ValueError, match="shapes do not match"):
        i2c.dw_layout(np.zeros((O, C, T + 1), np.float32), sT, s)


@pytest.mark.parametrize("shape", [(2, 7, 5), (3, 64, 33), (4, 130, 17), (5, 3, 1)])
def test_scaled_layouts_and_their_exactness(shape):
    """chw_rows and scaled_om times a power of two: the values (float32(x * sw[o]) rounded first), and
    whether every scaling was exact (False where one lands among the subnormals)."""
    N, O, P = shape
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    sw = rng.uniform(0.5, 2, O).astype(np.float32)
    S = np.float32(2.0 ** -17)
    for nt in (1, 2):
        rows = np.full((N * P, O), np.nan, np.float32)
        assert i2c.chw_rows(rows, x, threads=nt, scale=S)
        assert np.array_equal(rows, (x * S).transpose(0, 2, 1).reshape(N * P, O))
        big = np.full((O, N * P + 3), np.nan, np.float32)
        assert i2c.scaled_om(big[:, :N * P], x, sw, S, threads=nt)
        g = (x * sw[None, :, None]).astype(np.float32)                 # rounded before the scaling
        assert np.array_equal(big[:, :N * P], (g * S).transpose(1, 0, 2).reshape(O, N * P))
        assert np.isnan(big[:, N * P:]).all()
        assert i2c.scaled_om(big[:, :N * P], x, None, S, threads=nt)
        assert np.array_equal(big[:, :N * P], (x * S).transpose(1, 0, 2).reshape(O, N * P))
    tiny = x.copy()
    tiny.flat[-1] = np.float32(3e-35)                                   # * 2^-17: below the normal floats
    tiny.flat[0] = np.inf                                               # not finite: exact as it is
    rows = np.empty((N * P, O), np.float32)
    assert not i2c.chw_rows(rows, tiny, scale=S)
    assert not i2c.scaled_om(np.empty((O, N * P), np.float32), tiny, None, S)
    assert i2c.scaled_om(np.empty((O, N * P), np.float32), tiny, None, np.float32(1.0))
