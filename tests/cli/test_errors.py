"""Bad input gets a clear Python exception; configuration entry points
(threads, SIMD path, audit, show_config)."""

import numpy as np
import pytest

import lutcore
from reference.asserts import names_arg as _names_arg

ALL_SIMD = ("generic", "avx2", "avx512bw", "avx512")


def _i8(shape):
    return np.zeros(shape, np.int8)


# ---------------------------------------------------------------- lut_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int32, np.uint8])
def test_lut_gemm_wrong_dtype_names_argument(dtype):
    with pytest.raises(TypeError) as ei:
        lutcore.lut_gemm(np.zeros((3, 4), dtype), _i8((4, 2)))
    print(ei.value)
    assert _names_arg(str(ei.value), "a")
    with pytest.raises(TypeError) as ei:
        lutcore.lut_gemm(_i8((3, 4)), np.zeros((4, 2), dtype))
    print(ei.value)
    assert _names_arg(str(ei.value), "b")


@pytest.mark.parametrize("sa,sb", [((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 2)),
                                   ((3, 4), (1, 4, 2)), ((), (4, 2))])
def test_lut_gemm_wrong_ndim(sa, sb):
    with pytest.raises(ValueError):
        lutcore.lut_gemm(_i8(sa), _i8(sb))


def test_lut_gemm_mismatched_k_names_shapes():
    with pytest.raises(ValueError) as ei:
        lutcore.lut_gemm(_i8((3, 4)), _i8((5, 2)))
    msg = str(ei.value)
    print(msg)
    assert any(s in msg for s in ("(3, 4)", "(3,4)", "3x4")), msg
    assert any(s in msg for s in ("(5, 2)", "(5,2)", "5x2")), msg


@pytest.mark.parametrize("threads", [0, -1, -8])
def test_lut_gemm_bad_threads(threads):
    with pytest.raises(ValueError):
        lutcore.lut_gemm(_i8((3, 4)), _i8((4, 2)), threads=threads)


def test_lut_gemm_bad_units():
    with pytest.raises((TypeError, ValueError)):
        lutcore.lut_gemm(_i8((3, 4)), _i8((4, 2)), units=np.zeros(65536, np.int16))


def test_non_contiguous_equals_contiguous():
    rng = np.random.default_rng(5)
    a_big = rng.integers(-128, 128, (9, 42)).astype(np.int8)
    b = rng.integers(-128, 128, (21, 6)).astype(np.int8)
    a = a_big[:, ::2]
    assert not a.flags.c_contiguous
    for u in (None, lutcore.Units.from_mul(rng.integers(-999, 999, 65536).astype(np.int16))):
        got = lutcore.lut_gemm(a, b, units=u)
        want = lutcore.lut_gemm(np.ascontiguousarray(a), b, units=u)
        assert np.array_equal(got, want)
        got = lutcore.lut_gemm(np.ascontiguousarray(a), b[::-1][::-1].T.copy().T, units=u)
        assert np.array_equal(got, want)


# ---------------------------------------------------------------- quantize / qmatmul
@pytest.mark.parametrize("block", [0, -32])
def test_bad_block(block):
    x = np.ones((2, 32), np.float32)
    with pytest.raises(ValueError):
        lutcore.quantize(x, block=block)
    with pytest.raises(ValueError):
        lutcore.qmatmul(x, x.T.copy(), block=block)


@pytest.mark.parametrize("where", ["a", "b"])
def test_qmatmul_nan_rejected(where):
    a = np.ones((3, 40), np.float32)
    b = np.ones((40, 5), np.float32)
    (a if where == "a" else b)[1, 3] = np.nan
    with pytest.raises(ValueError):
        lutcore.qmatmul(a, b)


@pytest.mark.parametrize("where", ["a", "b"])
def test_qmatmul_inf_rejected(where):
    a = np.ones((3, 40), np.float32)
    b = np.ones((40, 5), np.float32)
    (a if where == "a" else b)[2, 3] = -np.inf
    with pytest.raises(ValueError):
        lutcore.qmatmul(a, b)


def test_qmatmul_prequantized_mismatch():
    a = np.ones((3, 40), np.float32)
    b = np.ones((40, 5), np.float32)
    with pytest.raises(ValueError):      # block of the Q8 operand differs from block=
        lutcore.qmatmul(a, lutcore.quantize(b, 16, axis=0), block=32)
    with pytest.raises(ValueError):      # b quantized along the wrong axis
        lutcore.qmatmul(a, lutcore.quantize(b.T.copy(), 32, axis=-1), block=32)


@pytest.mark.parametrize("fn,arg,x", [
    ("requant", "acc", lambda: (np.zeros(4, np.int64), 3)),
    ("requant", "acc", lambda: (np.zeros(4, np.float32), 3)),
    ("relu8", "x", lambda: (np.zeros(4, np.int16),)),
    ("fp16_encode", "x", lambda: (np.zeros(4, np.int32),)),
    ("fp16_decode", "bits", lambda: (np.zeros(4, np.int32),)),
    ("qmatmul", "a", lambda: (np.zeros((2, 4), np.int8), np.zeros((4, 2), np.float32))),
])
def test_elementwise_wrong_dtype(fn, arg, x):
    with pytest.raises(TypeError) as ei:
        getattr(lutcore, fn)(*x())
    print(ei.value)
    assert _names_arg(str(ei.value), arg)


def test_qmatmul_mismatched_k():
    with pytest.raises(ValueError):
        lutcore.qmatmul(np.ones((3, 40), np.float32), np.ones((41, 5), np.float32))


@pytest.mark.parametrize("threads", [0, -2])
def test_qmatmul_bad_threads(threads):
    with pytest.raises(ValueError):
        lutcore.qmatmul(np.ones((3, 40), np.float32), np.ones((40, 5), np.float32), threads=threads)


def test_qmatmul_wrong_ndim():
    with pytest.raises(ValueError):
        lutcore.qmatmul(np.ones((40,), np.float32), np.ones((40, 5), np.float32))


# ---------------------------------------------------------------- threads
@pytest.mark.parametrize("n", [0, -1])
def test_set_num_threads_rejects(n):
    before = lutcore.get_num_threads()
    with pytest.raises(ValueError):
        lutcore.set_num_threads(n)
    assert lutcore.get_num_threads() == before


def test_set_get_num_threads():
    assert lutcore.get_num_threads() >= 1
    lutcore.set_num_threads(1)
    assert lutcore.get_num_threads() == 1
    lutcore.set_num_threads(2)
    assert lutcore.get_num_threads() == 2


# ---------------------------------------------------------------- SIMD selection
def test_available_simd():
    av = list(lutcore.available_simd())
    print(av)
    assert "generic" in av
    assert set(av) <= set(ALL_SIMD)
    assert lutcore.get_simd() in av


def test_set_simd_roundtrip(simd):
    assert lutcore.get_simd() == simd


def test_set_simd_unavailable_rejected():
    av = set(lutcore.available_simd())
    before = lutcore.get_simd()
    missing = [n for n in ALL_SIMD if n not in av]
    for name in missing + ["bogus", ""]:
        with pytest.raises(ValueError):
            lutcore.set_simd(name)
        assert lutcore.get_simd() == before


# ---------------------------------------------------------------- audit / config
def test_audit_rate_validation():
    lutcore.set_audit(0)
    lutcore.set_audit(0.5)
    lutcore.set_audit(1.0)
    lutcore.set_audit(0)
    assert issubclass(lutcore.AuditError, Exception)


def test_show_config(capsys):
    lutcore.show_config()
    out = capsys.readouterr().out
    print(out)
    assert getattr(lutcore, "__version__", None) and lutcore.__version__ in out
    assert "openmp" in out.lower()
    assert lutcore.get_simd() in out
    for name in lutcore.available_simd():
        assert name in out
    assert str(lutcore.get_num_threads()) in out
