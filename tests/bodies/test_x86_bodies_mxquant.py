"""The MX quantizer's vector bodies (csrc/mxquant/x86/avx512.c, avx2.c) bit for bit against the
generic body (csrc/mxquant/mxquant.h) and the numpy body of lutcore.mx (mx_quantize_numpy): rows
and columns, every element format, blocks crossing the vectors (1, 7, 16, 32, 33, 48) and shapes
crossing them (lengths 1, 15, 16, 17, 31, 33, 100; rows long enough for runs of 8 and 16 whole
blocks, with a short last block or not, split between threads anywhere; columns short of a vector,
of 32 and of a strip of 64),
data with zeros, subnormals, the top binades, NaN and +-inf, and random bit patterns of every
exponent, at 1, 2 and 3 threads.

As the other body tests: the AVX-512 body runs through lutcore._native._simde_mxquant (the same
source compiled against SIMDe's exact emulation, AVX2+FMA flags -- any x86-64 CPU) and natively
where this CPU has AVX-512; the AVX2 body natively and through the twin (SIMDe, baseline flags).
"""
import numpy as np
import pytest

from lutcore._native import mxquant as _mxq
from lutcore.mx import MX_ELEMENTS, mx_quantize_numpy
from lutcore.ops.mxquant import _fields
from lutcore.units import fp_format
from body_runners import runners, twin
from test_mxquant import data

_simde_mxq = twin("_simde_mxquant")
RUNNERS = runners(_mxq, _simde_mxq, avx2=True, avx2_twin=True)
IDS = [r[0] for r in RUNNERS]
ROWS = [(1, 1), (3, 15), (2, 16), (5, 17), (7, 31), (33, 33), (4, 100), (3, 565), (2, 1040), (2, 821), (40, 1040)]
COLS = [(1, 1), (15, 3), (16, 9), (17, 16), (31, 17), (33, 65), (100, 130), (130, 300)]
BLOCKS = [1, 7, 16, 32, 33, 48]


def _run(mod, isa, x, fmt, block, cols, nt):
    """(codes, scales) of the body at isa (garbage-filled first: every byte must be written)."""
    L = x.shape[0] if cols else x.shape[1]
    nb = -(-L // block)
    if cols:
        codes, scales = np.full((nb * block, x.shape[1]), 0xA5, np.uint8), np.full((nb, x.shape[1]), 0x5A, np.uint8)
        mod.quantize_cols(codes, scales, x, block, _fields(fp_format(fmt)), isa, nt)
    else:
        codes, scales = np.full((x.shape[0], nb * block), 0xA5, np.uint8), np.full((x.shape[0], nb), 0x5A, np.uint8)
        mod.quantize_rows(codes, scales, x, block, _fields(fp_format(fmt)), isa, nt)
    return codes, scales


def _same(got, want, what):
    for g, w, name in zip(got, want, ("codes", "scales")):
        bad = np.argwhere(g != w)
        assert not len(bad), (what, name, [(tuple(i), hex(g[tuple(i)]), hex(w[tuple(i)])) for i in bad[:4]])


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("fmt", MX_ELEMENTS)
@pytest.mark.parametrize("cols", [False, True], ids=["rows", "cols"])
def test_body_matches_generic(runner, fmt, cols, rng):
    _, mod, isa = runner
    for shape in COLS if cols else ROWS:
        x = data(rng, shape)
        for block in BLOCKS:
            gen = _run(_mxq, 0, x, fmt, block, cols, 1)
            m = mx_quantize_numpy(x, fmt, block, 0 if cols else -1)
            _same(gen, (m.codes, m.scales), (shape, block, "generic vs numpy"))
            for nt in (1, 2, 3):
                _same(_run(mod, isa, x, fmt, block, cols, nt), gen, (shape, block, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("fmt", MX_ELEMENTS)
def test_body_random_bit_patterns(runner, fmt, rng):
    _, mod, isa = runner
    u = rng.integers(0, 1 << 32, (67, 96), dtype=np.uint64).astype(np.uint32)
    e = rng.integers(0, 255, u.shape).astype(np.uint32)
    x = ((u & np.uint32(0x807FFFFF)) | (e << np.uint32(23))).view(np.float32)
    x[3, 7], x[60, 90] = -np.inf, np.nan
    for block in (2, 3, 32):
        for cols in (False, True):
            gen = _run(_mxq, 0, x, fmt, block, cols, 1)
            for nt in (1, 3):
                _same(_run(mod, isa, x, fmt, block, cols, nt), gen, (block, cols, nt))


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_body_names(runner):
    _, mod, isa = runner
    assert mod.body_names(isa)["mx_quantize (nearest)"] == ("avx512" if isa == 2 else "avx2")
    assert mod.body_names(0)["mx_quantize (nearest)"] == "generic"
