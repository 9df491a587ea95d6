"""The element-wise family's AVX-512 bodies (csrc/elementwise/x86/*.c), each against the
numpy oracle and bit for bit against the generic body, on odd lengths (tails of
every size below a vector, several OpenMP chunks), at 1 and 2 threads.

As tests/bodies/test_x86_bodies.py: every body runs through lutcore._native._simde_ew
(the same source compiled against SIMDe's exact emulation, AVX2+FMA flags — any
x86-64 CPU, so CI checks every body) and natively where this CPU can.

    body          isa        families
    avx512        2          requant (clamp tables), fp16 encode/decode/round both modes
    avx512vbmi    2 | 8      + relu8 (vpermi2b over the table)
"""
import platform

import numpy as np
import pytest

import lutcore
from lutcore import _simd
from lutcore._native import elementwise as _e
from reference.fp16_ref import fp16_decode_ref, fp16_encode_ref, fp16_round_ref
from reference.units_ref import relu8_ref, requant_ref

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")
if IS_X86:
    from lutcore._native import _simde_ew  # built on every x86-64: a missing one is an error, not a skip
else:
    _simde_ew = None

AVX512, VBMI = 2, _simd.VBMI
BODIES = {"avx512": AVX512, "avx512vbmi": AVX512 | VBMI}


def runners():
    """(label, module, isa): every body through SIMDe, and natively where the CPU can."""
    out = []
    for name, isa in BODIES.items():
        if _simde_ew is not None:
            out.append((f"{name}-simde", _simde_ew, isa))
        if _simd._features & isa == isa:
            out.append((f"{name}-native", _e, isa))
    return out


RUNNERS = runners()
IDS = [r[0] for r in RUNNERS]
CHUNK = 65536                               # elementwise.h LC_EW_CHUNK
LENGTHS = [1, 7, 15, 16, 17, 33, 63, 64, 65, 127, 1000, 2 * CHUNK + 37]


def clamp_lut(lo, hi):
    i16 = np.arange(65536).astype(np.uint16).view(np.int16)
    return np.clip(i16, lo, hi).astype(np.int8)


def accumulators(rng, n):
    acc = rng.integers(-(1 << 20), 1 << 20, n, dtype=np.int32)
    ext = np.array([2**31 - 1, -2**31, -1, 0, 1, 127, -128, 32767, -32768, 2**30, -2**30 - 1], np.int32)
    acc[: min(n, ext.size)] = ext[: min(n, ext.size)]
    acc[::13] = rng.integers(-2**31, 2**31, acc[::13].size, dtype=np.int64)
    return acc


def f16_specials():
    """float32 values at the binary16 edges: NaN payloads (quiet, signalling, both signs),
    infs, zeros, subnormal results, ties, the overflow edge, float32 subnormals."""
    bits = [0x7FC00000, 0x7F800001, 0xFF800123, 0x7FA00000, 0xFFFFFFFF, 0x7F802000, 0x7F801FFF,
            0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x807FFFFF]
    vals = [65504.0, 65519.99, 65520.0, -65520.0, 1e9, -1e30, 2.0**-24, 2.0**-25, 3 * 2.0**-26,
            2.0**-14, 2.0**-14 * (1 - 2.0**-11), 1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-11),
            5.9604645e-08, 6.1035156e-05, -2.9802322e-08]
    return np.concatenate([np.array(bits, np.uint32).view(np.float32), np.array(vals, np.float32)])


def floats(rng, n):
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    x[::7] *= np.float32(1e-6)                 # fp16 subnormal results
    x[::11] *= np.float32(1e3)                 # overflow
    sp = f16_specials()
    pos = rng.integers(0, n, size=min(n, 3 * sp.size))
    x[pos] = sp[rng.integers(0, sp.size, pos.size)]
    x[: min(n, sp.size)] = sp[: min(n, sp.size)]
    return x


def half_bits(rng, n):
    h = rng.integers(0, 1 << 16, n, dtype=np.int64).astype(np.uint16)
    sp = np.array([0x7C00, 0xFC00, 0x7C01, 0x7DFF, 0x7E00, 0xFE01, 0x7FFF, 0x0000, 0x8000, 0x0001,
                   0x03FF, 0x8200, 0x0400, 0x7BFF], np.uint16)
    h[: min(n, sp.size)] = sp[: min(n, sp.size)]
    return h


def oracle_equal(got, ref):
    """float32 results against the numpy oracle: the same bits, except that the oracle
    builds NaN as numpy's canonical one (payloads are checked against the generic body)."""
    nan = np.isnan(ref)
    return np.array_equal(np.isnan(got), nan) and np.array_equal(got.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])


def oracle_equal_half(got, ref):
    """binary16 bits against the oracle, NaN payloads aside (as oracle_equal)."""
    nan = ((ref & 0x7C00) == 0x7C00) & ((ref & 0x3FF) != 0)
    gnan = ((got & 0x7C00) == 0x7C00) & ((got & 0x3FF) != 0)
    return np.array_equal(gnan, nan) and np.array_equal(got[~nan], ref[~nan])


def test_simde_extension_present_on_x86():
    if not IS_X86:
        pytest.skip("SIMDe copies are built for x86-64 only (no AVX-512 elsewhere)")
    assert _simde_ew.body_names(AVX512)["element-wise (requant, fp16)"] == "avx512"
    assert _simde_ew.body_names(AVX512 | VBMI)["relu8"].startswith("avx512vbmi")


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("lo,hi", [(-127, 127), (-128, 127), (0, 127), (-5, 9), (3, 3)])
def test_requant_clamp_body(rng, runner, n, lo, hi):
    _, mod, isa = runner
    acc = accumulators(rng, n)
    lut = clamp_lut(lo, hi)
    for shift in (0, 1, 7, 8, 16, 30, 31):
        ref = requant_ref(acc, shift, lut)
        want = np.full(n, 99, np.int8)
        _e.requant(want, acc, shift, lut, lo, hi, True, 0, 1)      # the generic body
        assert np.array_equal(want, ref)
        for threads in (1, 2):
            got = np.full(n, 99, np.int8)
            mod.requant(got, acc, shift, lut, lo, hi, True, isa, threads)
            assert np.array_equal(got, ref), (runner[0], shift, threads, np.flatnonzero(got != ref)[:5])


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", LENGTHS)
def test_relu8_body(rng, runner, n):
    _, mod, isa = runner
    x = rng.integers(-128, 128, n, dtype=np.int64).astype(np.int8)
    x[: min(n, 4)] = np.array([-128, 127, -1, 0], np.int8)[: min(n, 4)]
    for lut in (lutcore.Units.exact().relu_lut, rng.integers(-128, 128, 256).astype(np.int8)):
        ref = relu8_ref(x, lut)
        want = np.full(n, 99, np.int8)
        _e.relu8(want, x, lut, 0, 1)
        assert np.array_equal(want, ref)
        for threads in (1, 2):
            got = np.full(n, 99, np.int8)
            mod.relu8(got, x, lut, isa, threads)
            assert np.array_equal(got, ref), (runner[0], threads, np.flatnonzero(got != ref)[:5])


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("mode", ["nearest", "truncate"])
def test_fp16_encode_round_bodies(rng, runner, n, mode):
    _, mod, isa = runner
    m = {"nearest": 0, "truncate": 1}[mode]
    x = floats(rng, n)
    ref_h = fp16_encode_ref(x, mode)
    ref_r = fp16_round_ref(x, mode)
    want_h, want_r = np.full(n, 7, np.uint16), np.full(n, 7.0, np.float32)
    _e.fp16_encode(want_h, x, m, 0, 1)
    _e.fp16_round(want_r, x, m, 0, 1)
    assert oracle_equal_half(want_h, ref_h) and oracle_equal(want_r, ref_r)
    for threads in (1, 2):
        got_h, got_r = np.full(n, 7, np.uint16), np.full(n, 7.0, np.float32)
        mod.fp16_encode(got_h, x, m, isa, threads)
        mod.fp16_round(got_r, x, m, isa, threads)
        assert np.array_equal(got_h, want_h), (runner[0], threads, np.flatnonzero(got_h != want_h)[:5])
        assert np.array_equal(got_r.view(np.uint32), want_r.view(np.uint32)), (runner[0], threads)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("n", LENGTHS)
def test_fp16_decode_body(rng, runner, n):
    _, mod, isa = runner
    h = half_bits(rng, n)
    ref = fp16_decode_ref(h)
    want = np.full(n, 7.0, np.float32)
    _e.fp16_decode(want, h, 0, 1)
    assert oracle_equal(want, ref)
    for threads in (1, 2):
        got = np.full(n, 7.0, np.float32)
        mod.fp16_decode(got, h, isa, threads)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (runner[0], threads)


def test_all_half_values_decode_and_round_trip():
    """Every binary16 value decodes, and every decoded value re-encodes, bit-exactly on every body."""
    h = np.arange(65536, dtype=np.int64).astype(np.uint16)
    want = np.empty(h.size, np.float32)
    _e.fp16_decode(want, h, 0, 1)
    for label, mod, isa in RUNNERS:
        got = np.empty(h.size, np.float32)
        mod.fp16_decode(got, h, isa, 2)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), label
        for m in (0, 1):
            back, ref = np.empty(h.size, np.uint16), np.empty(h.size, np.uint16)
            _e.fp16_encode(ref, want, m, 0, 1)
            mod.fp16_encode(back, want, m, isa, 2)
            assert np.array_equal(back, ref), (label, m)


@pytest.mark.parametrize("name", ["avx512bw", "avx512"])
def test_public_functions_on_avx512_paths(rng, name):
    """lutcore.requant / relu8 / fp16_* on the AVX-512 paths equal the generic path."""
    if name not in lutcore.available_simd():
        pytest.skip(f"this CPU runs {lutcore.available_simd()} (the bodies are checked through SIMDe above)")
    x, acc, q = floats(rng, 5001), accumulators(rng, 5001), rng.integers(-128, 128, 5001).astype(np.int8)
    prev = lutcore.get_simd()
    try:
        outs = {}
        for path in ("generic", name):
            lutcore.set_simd(path)
            outs[path] = [lutcore.requant(acc, 9), lutcore.relu8(q), lutcore.fp16_round(x),
                          lutcore.fp16_round(x, "truncate"), lutcore.fp16_encode(x),
                          lutcore.fp16_encode(x, "truncate"), lutcore.fp16_decode(lutcore.fp16_encode(x))]
        for a, b in zip(outs["generic"], outs[name]):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))     # bits, NaN payloads included
    finally:
        lutcore.set_simd(prev)


def test_show_config_names_the_element_wise_bodies():
    names = _simd.bodies("avx512") if "avx512" in lutcore.available_simd() else None
    assert _e.body_names(0) == {"element-wise (requant, fp16)": "generic", "relu8": "generic (a table per byte)"}
    if IS_X86:
        assert _e.body_names(1)["element-wise (requant, fp16)"] == "avx2"
    if names is not None:
        assert names["element-wise (requant, fp16)"] == "avx512"
        assert names["relu8"].startswith("avx512vbmi" if _simd._features & VBMI else "generic")
