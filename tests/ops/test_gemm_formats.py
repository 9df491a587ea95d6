"""lut_gemm through units of other formats than signed 8 x 8 (unsigned, narrow, mixed):
against the plain reference of the format's table, on odd shapes, every SIMD path, threads 1
and 2 bit-identical, plain and packed weights, and the bad inputs."""
import numpy as np
import pytest

import lutcore
from lutcore.ops.gemm import lut_gemm, pack_b
from reference.format_ref import codes_of, format_gemm_ref

FORMATS = ["8u x 8u", "7u x 7u", "8u x 4u", "8u x 2u", "8s x 4u", "4s x 4s", "6u x 6u"]
SHAPES = [(1, 1, 1), (7, 33, 5), (33, 130, 65), (1, 513, 70), (70, 67, 1), (50, 37, 129)]


def _units(spec, approx):
    if not approx:
        return lutcore.Units.exact(spec)
    return lutcore.Units.from_mul(lambda a, b: (a * b) - ((a * b) & 0x15), format=spec)   # a few bits dropped


@pytest.mark.parametrize("spec", FORMATS)
@pytest.mark.parametrize("approx", [False, True], ids=["exact", "approx"])
def test_format_gemm_matches_the_table_reference(simd, spec, approx):
    u = _units(spec, approx)
    f = u.format
    rng = np.random.default_rng(7)
    for M, K, N in SHAPES:
        a = codes_of(rng, f.a_bits, f.a_signed, (M, K))
        b = codes_of(rng, f.b_bits, f.b_signed, (K, N))
        want = format_gemm_ref(a, b, u.table())
        got1 = lut_gemm(a, b, u, threads=1)
        got2 = lut_gemm(a, b, u, threads=2)
        assert got1.dtype == np.int32 and np.array_equal(got1, want), (spec, M, K, N)
        assert np.array_equal(got1.view(np.uint32), got2.view(np.uint32))
        if f.b_bits <= 8:                                  # packed weights: uint8 or int8 bytes as the format's codes
            bb = b.astype(np.uint8 if not f.b_signed else np.int8)
            aa = a.astype(np.uint8 if not f.a_signed else np.int8)
            assert np.array_equal(lut_gemm(aa, pack_b(bb), u, threads=2), want)


def test_unsigned_products_beyond_int16_are_summed_exactly():
    u = lutcore.Units.exact("8u x 8u")
    a = np.full((3, 1000), 255, np.uint8)
    b = np.full((1000, 2), 255, np.uint8)
    assert u.kernel_offset != 0 and np.all(lut_gemm(a, b, u) == 1000 * 255 * 255)


def test_codes_outside_the_format_are_refused_naming_the_operand():
    u = lutcore.Units.exact("8u x 4u")
    a = np.zeros((2, 3), np.uint8)
    with pytest.raises(ValueError, match=r"^b: expected 4-bit unsigned codes in \[0, 15\] .*format 8u x 4u -> 12u\), got 16"):
        lutcore.lut_gemm(a, np.full((3, 2), 16), u)
    with pytest.raises(ValueError, match=r"^a: expected 8-bit unsigned codes in \[0, 255\].*got -1"):
        lutcore.lut_gemm(np.full((2, 3), -1), np.zeros((3, 2), np.uint8), u)
    with pytest.raises(ValueError, match=r"^b: the packed weights hold int8 codes -3..-3, outside the unit's weight "
                                         r"codes \[0, 15\]"):
        lutcore.lut_gemm(a, pack_b(np.full((3, 2), -3, np.int8)), u)
    with pytest.raises(TypeError, match=r"^a: expected an integer array of 8u x 4u -> 12u codes, got dtype float32"):
        lutcore.lut_gemm(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.uint8), u)


def test_signed_8x8_units_keep_int8_only():
    with pytest.raises(TypeError):
        lutcore.lut_gemm(np.zeros((2, 3), np.uint8), np.zeros((3, 2), np.int8), lutcore.Units.exact())
