"""The direct small-K convolution (csrc/conv2d/: generic body, x86/avx512.c, x86/avx512_vnni.c)
bit for bit against a numpy reference of the contract written here from docs/DESIGN.md
("Approximate PyTorch layers": acc = sum over the patch of mul8[x, w], a padding pixel the
code 0 through the table; y = float32(acc) * scale[o] + bias[o]), for the exact table (the
products computed), Mitchell and a random asymmetric table; odd shapes (O and OW of 1, 7,
16, 17, 33: every tail of the 16-pixel and 16-channel blocks), K from 1 to 32 (odd: the
half-empty last int16 pair and byte quad), strides, paddings, dilations, bias on/off, 1 and 2
threads; kernel rows of up to 32 codes copied as one run (dilation 1), border pixels tap by tap.

The AVX-512 bodies run through lutcore._native._simde_im2col (the same sources compiled
against SIMDe's exact emulation, AVX2+FMA flags: any x86-64 CPU) and natively where this
CPU has AVX-512 (and VNNI); the generic body everywhere (isa 0).
"""
import platform

import numpy as np
import pytest

from lutcore import _simd
from lutcore._native import im2col as _im
from lutcore.units import Units, approx

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_im2col  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_im2col = None

RUNNERS = [("generic", _im, 0)] + \
          ([("avx512-simde", _simde_im2col, 2), ("avx512vnni-simde", _simde_im2col, 2 | 4)] if IS_X86 else []) + \
          ([("avx512-native", _im, 2)] if _simd._features & 2 else []) + \
          ([("avx512vnni-native", _im, 2 | 4)] if _simd._features & 2 and _simd._features & 4 else [])
IDS = [r[0] for r in RUNNERS]

_R = np.random.default_rng(1234)
TABLES = {"exact": Units.exact(), "mitchell": approx.mitchell(),
          "random": Units.from_mul(_R.integers(-20000, 20000, (256, 256)), name="random")}

# One line per case: (N, C, H, W, O, KH, KW, stride, padding, dilation)
CASES = [
    (2, 3, 9, 11, 7, 3, 3, (1, 1), (1, 1), (1, 1)),       # the first conv's K = 27, odd O and OW
    (1, 3, 32, 33, 64, 3, 3, (1, 1), (1, 1), (1, 1)),     # OW 33: two full blocks and a 1-pixel tail
    (1, 3, 10, 7, 17, 3, 3, (2, 2), (0, 0), (1, 1)),      # stride, no padding, O 17
    (2, 2, 7, 9, 33, 4, 4, (1, 2), (2, 1), (1, 1)),       # K = 32 (the largest), even kernel
    (1, 1, 5, 16, 16, 3, 3, (1, 1), (2, 2), (2, 2)),      # dilation with a wide padding, OW 16+
    (3, 5, 4, 6, 1, 1, 1, (1, 1), (0, 0), (1, 1)),        # 1x1, O 1, K 5
    (1, 1, 1, 7, 5, 1, 5, (1, 1), (0, 2), (1, 1)),        # conv1d-like (H = 1), K 5
    (1, 7, 6, 6, 16, 2, 2, (3, 3), (1, 1), (1, 1)),       # K 28, stride 3
    (1, 1, 1, 1, 3, 1, 1, (1, 1), (0, 0), (1, 1)),        # a single pixel, K 1
    # the kernel row copied as one run (dilation 1): KW*C of 18 and 32 bytes, border pixels tap by tap
    (3, 6, 5, 7, 9, 1, 3, (1, 1), (0, 1), (1, 1)),        # K 18 = KW*C: one 18-byte run a pixel, OW 7, batch 3
    (1, 8, 3, 33, 5, 1, 4, (1, 1), (0, 2), (1, 1)),       # K 32 = KW*C: a 32-byte run, OW 34, even kernel
    (1, 3, 4, 1, 20, 3, 3, (1, 1), (1, 1), (1, 1)),       # width 1: every pixel in the padding columns
    (5, 3, 6, 33, 7, 3, 3, (1, 3), (2, 0), (1, 1)),       # odd batch, OW 11, stride across the row, no w padding
]


def conv_codes_ref(q, w, mul, stride, padding, dilation, scale, bias):
    """q int8 (N, C, H, W) codes, w int8 (O, C, KH, KW) codes, mul (65536,) -> y float32 (N, O, OH, OW)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    N, C, H, W = q.shape
    O, _, KH, KW = w.shape
    t = np.asarray(mul, np.int64).reshape(256, 256)                          # t[a, b], a = activation
    qp = np.pad(q, ((0, 0), (0, 0), (ph, ph), (pw, pw)))                     # padding = the code 0
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    acc = np.zeros((N, OH, OW, O), np.int64)
    for c in range(C):
        for i in range(KH):
            for j in range(KW):
                xs = qp[:, c, i * dh: i * dh + sh * (OH - 1) + 1: sh, j * dw: j * dw + sw * (OW - 1) + 1: sw]
                acc += t[xs.view(np.uint8)[..., None], w[:, c, i, j].view(np.uint8)[None, None, None, :]]
    y = (acc.astype(np.int32).astype(np.float32) * scale).astype(np.float32)   # (N, OH, OW, O)
    if bias is not None:
        y = (y + bias).astype(np.float32)
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2))


def _run(mod, isa, q, w, units, geo, scale, bias, threads):
    N, C, H, W = q.shape
    O, _, KH, KW = w.shape
    (sh, sw), (ph, pw), (dh, dw) = geo
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    qn = np.ascontiguousarray(q.transpose(0, 2, 3, 1)).reshape(-1)           # NHWC codes
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(KH * KW * C, O))   # (K, O), k = (i*KW + j)*C + c
    y = np.full(N * O * OH * OW, np.nan, np.float32)
    mod.conv2d_direct(y, qn, (N, H, W, C), KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, wt,
                      units.kernel_table[0], units.kernel_path == "exact", scale, bias, isa, threads)
    return y.reshape(N, O, OH, OW)


@pytest.mark.parametrize("units", list(TABLES))
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_direct_conv_bits(runner, case, units):
    _, mod, isa = runner
    N, C, H, W, O, KH, KW, stride, padding, dilation = case
    rng = np.random.default_rng(hash(case) % 2**32)
    q = rng.integers(-127, 128, (N, C, H, W)).astype(np.int8)
    q.reshape(-1)[0] = -127
    w = rng.integers(-127, 128, (O, C, KH, KW)).astype(np.int8)
    scale = (rng.random(O) * 1e-3 + 1e-5).astype(np.float32)
    bias = rng.standard_normal(O).astype(np.float32)
    u = TABLES[units]
    for b in (bias, None):
        want = conv_codes_ref(q, w, u.mul, stride, padding, dilation, scale, b)
        for t in (1, 2):
            got = _run(mod, isa, q, w, u, (stride, padding, dilation), scale, b, t)
            print("max diff", np.nanmax(np.abs(got - want)))
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_direct_conv_bad_input():
    u = TABLES["exact"]
    q = np.zeros(2 * 5 * 5 * 3, np.int8)
    y = np.zeros(2 * 4 * 5 * 5, np.float32)
    s = np.ones(4, np.float32)
    wt = np.zeros((27, 4), np.int8)
    with pytest.raises(ValueError, match="Wt: expected 27 rows"):
        _im.conv2d_direct(y, q, (2, 5, 5, 3), 3, 3, 5, 5, 1, 1, 1, 1, 1, 1, np.zeros((26, 4), np.int8),
                          u.kernel_table[0], True, s, None, 0, 1)
    with pytest.raises(ValueError, match="at most 32"):
        _im.conv2d_direct(y, np.zeros(2 * 5 * 5 * 4, np.int8), (2, 5, 5, 4), 3, 3, 5, 5, 1, 1, 1, 1, 1, 1,
                          np.zeros((36, 4), np.int8), u.kernel_table[0], True, s, None, 0, 1)
    with pytest.raises(ValueError, match="bias: expected 4 values, got 3"):
        _im.conv2d_direct(y, q, (2, 5, 5, 3), 3, 3, 5, 5, 1, 1, 1, 1, 1, 1, wt, u.kernel_table[0], True, s,
                          np.zeros(3, np.float32), 0, 1)
    with pytest.raises(ValueError, match="sizes do not match"):
        _im.conv2d_direct(y[:-1], q, (2, 5, 5, 3), 3, 3, 5, 5, 1, 1, 1, 1, 1, 1, wt, u.kernel_table[0], True, s,
                          None, 0, 1)
