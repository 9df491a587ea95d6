"""The gemm family's per-ISA bodies (csrc/gemm/x86/*.c), each against the numpy oracle
and bit for bit against the generic body, on odd shapes, at 1 and 2 threads.

Every AVX-512 body runs twice where it can: through lutcore._native._simde (the
same source compiled against SIMDe's exact emulation, AVX2+FMA flags — runs on
any x86-64 CPU, so CI checks every body whatever its CPU), and natively where
this CPU has the body's instructions.  A body is chosen by the C isa argument
(level | extension bits), so a VNNI body is tested also on CPUs without VNNI.

    body          isa                   needs                                 families
    avx512bw      2                     AVX-512 F/BW/VL/DQ                    exact (vpmaddwd)
    avx512bw      2                     AVX-512 F/BW/VL/DQ                    any table (vpermi2w)
    avx512vnni    2 | 4                 + VNNI                                exact (vpdpbusd)
    avx512vbmi    2 | 4 | 8             + VNNI + VBMI                         any table (vpermi2b planes)
The any-table bodies run in units of 256 columns (the vpermi2w body as two 128-column
passes, the VBMI body as 64-column groups over k chunks of 128 in uint16 words): the
shapes' N cross those (65, 129, 191, 257, 300), K crosses the chunks (129, 256, 300, 513).
"""

import numpy as np
import pytest

import lutcore
from lutcore import _simd
from lutcore._native import gemm as _g
from lutcore._workspace import empty_aligned
from body_runners import IS_X86, twin
from reference.gemm_ref import lut_gemm_ref
from reference.quant_ref import qmatmul_ref, quantize_ref
from reference.units_ref import exact_mul_lut

_simde = twin("_simde")

AVX512, VNNI, VBMI = 2, _simd.VNNI, _simd.VBMI
BODIES = {"avx512bw": AVX512, "avx512vnni": AVX512 | VNNI, "avx512vbmi": AVX512 | VNNI | VBMI}
NEEDS = {"avx512bw": 2, "avx512vnni": 2 | VNNI, "avx512vbmi": 2 | VNNI | VBMI}    # cpu_features() bits the native run needs


def runners():
    """(label, module, isa): every body through SIMDe, and natively where the CPU can."""
    out = []
    for name, isa in BODIES.items():
        if _simde is not None:
            out.append((f"{name}-simde", _simde, isa))
        if _simd._features & NEEDS[name] == NEEDS[name]:
            out.append((f"{name}-native", _g, isa))
    return out


RUNNERS = runners()
IDS = [r[0] for r in RUNNERS]
# M: 1, < a tile, > a 48-row unit; K: 1, odd, not a multiple of 4 or 32; N: < and > a panel, > a 128-column unit
SHAPES = [(1, 1, 1), (1, 7, 17), (7, 33, 5), (13, 2, 33), (33, 130, 65), (50, 37, 129), (3, 64, 200),
          (49, 6, 16), (12, 255, 32)]


def pack_exact(a, b, bk):
    """gemm.h's packed operands: Ap int16 (Mp, Kp), Bp panels; blocks of bk padded to even bkp."""
    M, K = a.shape
    N = b.shape[1]
    bkp = bk + (bk & 1)
    nblk = -(-K // bk)
    Kp = nblk * bkp
    Mp = -(-M // _g.MR) * _g.MR
    Np = -(-N // _g.NR) * _g.NR
    ap = np.empty((Mp, Kp), np.int16)
    _g.pack_a16(ap, a, bk, bkp, 1)
    bp = np.empty(Np * Kp, np.int8)
    _g.pack_b(bp, b, bk, bkp, Kp, 1)
    return ap, bp, Kp, bkp, nblk


def test_simde_extension_present_on_x86():
    if not IS_X86:
        pytest.skip("SIMDe copies are built for x86-64 only (no AVX-512 elsewhere)")
    assert _simde.body_names(AVX512 | VNNI)["lut_gemm exact"].startswith("avx512vnni")


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_exact_gemm_body(rng, runner, shape):
    _, mod, isa = runner
    M, K, N = shape
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    b[0, :] = -128                                   # the extremes: -128 * -128 and the +128 offset
    a[0, :] = -128
    ref = lut_gemm_ref(a, b, exact_mul_lut())
    ap, bp, Kp, _, _ = pack_exact(a, b, K)
    want = np.full((M, N), -1, np.int32)
    _g.gemm_exact_packed(want, ap, bp, Kp, 0, 1)     # the generic body
    assert np.array_equal(want, ref)
    for threads in (1, 2):
        got = np.full((M, N), -7, np.int32)
        mod.gemm_exact_packed(got, ap, bp, Kp, isa, threads)
        print(runner[0], threads, "entries differing:", np.sum(got != ref))
        assert np.array_equal(got, ref)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("M", [2, 13])        # a few rows read B directly; more convert it first
def test_exact_gemm_body_long_k_wraps_internally(runner, M):
    """K = 70000 at the extremes: the result fits int32 (the contract's limit is K <= 131071),
    the VNNI body's internal sum a * (b + 128) does not — modular arithmetic must still give it."""
    _, mod, isa = runner
    K, N = 70000, 17
    a = np.full((M, K), -128, np.int8)
    b = np.full((K, N), 127, np.int8)
    b[::3, 5] = -128
    ref = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    ap, bp, Kp, _, _ = pack_exact(a, b, K)
    got = np.zeros((M, N), np.int32)
    mod.gemm_exact_packed(got, ap, bp, Kp, isa, 2)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape,block", [((1, 64, 17), 32), ((7, 33, 5), 32), ((50, 96, 129), 32),
                                         ((13, 30, 40), 5),     # odd block: 3 pairs, a half quad
                                         ((9, 21, 33), 7), ((3, 200, 20), 64), ((14, 12, 16), 2)])
def test_qmatmul_exact_body(rng, runner, shape, block):
    _, mod, isa = runner
    M, K, N = shape
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    x[0, :block] = 0.0                               # an all-zero block: scale 0
    qa, sa = quantize_ref(x, block)                  # (M, Kq), (M, nblk)
    qbt, sbt = quantize_ref(w.T, block)              # along K
    qb, sb = np.ascontiguousarray(qbt.T), np.ascontiguousarray(sbt.T)
    ref = qmatmul_ref(qa, sa, qb, sb, exact_mul_lut(), block)
    ap, bp, Kp, bkp, nblk = pack_exact(qa, qb, block)
    from lutcore.ops.quant import pack_scales as _pack_scales
    sbp = _pack_scales(sb)
    want = np.full((M, N), np.nan, np.float32)
    _g.qmatmul_exact_packed(want, ap, sa, bp, sbp, nblk, bkp, 0, 1)
    assert np.array_equal(want.view(np.int32), ref.view(np.int32))
    for threads in (1, 2):
        got = np.full((M, N), np.nan, np.float32)
        mod.qmatmul_exact_packed(got, ap, sa, bp, sbp, nblk, bkp, isa, threads)
        print(runner[0], threads, "max |diff|:", np.nanmax(np.abs(got - ref)))
        assert np.array_equal(got.view(np.int32), ref.view(np.int32))


# The VNNI body's whole calls (M > 4; below the strip limit): A and B converted once per call in items of 48 rows /
# 32 columns, then units of up to 192 x 256 halved until each thread has 4 — ragged tiles,
# pairs with one panel, several conversion items and unit shapes; out a slice of a wider array.
WHOLE_SHAPES = [(5, 7, 33), (197, 33, 71), (61, 130, 263), (100, 1, 40), (250, 64, 17), (37, 260, 600)]


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", WHOLE_SHAPES)
def test_exact_gemm_body_whole_call(rng, runner, shape):
    _, mod, isa = runner
    M, K, N = shape
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[-1, :] = -128
    b[:, -1] = -128
    ref = lut_gemm_ref(a, b, exact_mul_lut())
    ap, bp, Kp, _, _ = pack_exact(a, b, K)
    for threads in (1, 2, 3):
        big = np.full((M, N + 9), -7, np.int32)
        got = big[:, 4:4 + N]
        mod.gemm_exact_packed(got, ap, bp, Kp, isa, threads, N + 9)
        assert np.array_equal(got, ref), (runner[0], threads, np.sum(got != ref))
        assert np.all(big[:, :4] == -7) and np.all(big[:, 4 + N:] == -7)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", WHOLE_SHAPES + [(4, 9, 20), (7, 1, 1), (13, 65, 31)])
def test_exact_gemm_body_from_int8_rows(rng, runner, shape):
    """gemm_exact_a8: the VNNI whole call reading A's int8 rows (no int16 copy; K odd: the
    packed pair's padding read as 0); other bodies and M <= 4 decline and write nothing."""
    _, mod, isa = runner
    M, K, N = shape
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, :] = -128
    b[:, 0] = -128
    ref = lut_gemm_ref(a, b, exact_mul_lut())
    _, bp, Kp, _, _ = pack_exact(a, b, K)
    takes = bool(isa & VNNI) and M > 4
    for threads in (1, 2, 3):
        big = np.full((M, N + 3), -7, np.int32)
        got = big[:, 1:1 + N]
        assert mod.gemm_exact_a8(got, a, bp, Kp, isa, threads, N + 3) is takes
        if takes:
            assert np.array_equal(got, ref), (runner[0], threads, np.sum(got != ref))
            assert np.all(big[:, :1] == -7) and np.all(big[:, 1 + N:] == -7)
        else:
            assert np.all(big == -7)
        got = np.full((M, N), -7, np.int32)          # B's rows too (its form built from them, or packed)
        mod.gemm_exact_rows(got, a, b, np.empty(bp.size, np.int8), np.empty(-(-M // _g.MR) * _g.MR * Kp, np.int16),
                            isa, threads)
        assert np.array_equal(got, ref), (runner[0], "rows", threads, np.sum(got != ref))


# Whole calls in strips (rows >= 48 a strip for max(ceil(M / 64), 4 * threads) strips, rounded up to a
# multiple of the threads): each unit converts its own rows and splits them into balanced tiles of <= 12.
# 384 / 383: the 2-thread limit (8 strips of 48) and just under it (units); 1024 = 16 strips of 64
# (tiles 11, 11, 11, 11, 10, 10), 1028 = 18 of 57 (at 2 threads); 577: 12 strips at 3 threads.  K: < 64
# (no 64-byte piece for the 4-row transposes), 64 + a tail, odd.  M = 1..13: every tile height outside strips.
STRIP_SHAPES = [(384, 65, 40), (383, 9, 33), (1024, 33, 36), (1028, 130, 17), (577, 7, 65), (200, 64, 1)]
SMALL_M = [(m, k, 33) for m, k in zip(range(1, 14), (1, 7, 33, 64, 65, 130, 3, 17, 200, 4, 5, 63, 129))]


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", STRIP_SHAPES + SMALL_M)
def test_exact_gemm_body_strips_and_tile_heights(rng, runner, shape):
    """Both whole-call entries (int8 rows, int16 packed rows) against the oracle at 1, 2, 3 threads."""
    _, mod, isa = runner
    M, K, N = shape
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[M // 2, :] = -128
    b[:, N // 2] = -128
    ref = lut_gemm_ref(a, b, exact_mul_lut())
    ap, bp, Kp, _, _ = pack_exact(a, b, K)
    for threads in (1, 2, 3):
        big = np.full((M, N + 3), -7, np.int32)
        got = big[:, 2:2 + N]
        mod.gemm_exact_packed(got, ap, bp, Kp, isa, threads, N + 3)
        assert np.array_equal(got, ref), (runner[0], "packed", threads, np.sum(got != ref))
        assert np.all(big[:, :2] == -7) and np.all(big[:, 2 + N:] == -7)
        got8 = np.full((M, N), -7, np.int32)
        if mod.gemm_exact_a8(got8, a, bp, Kp, isa, threads):
            assert np.array_equal(got8, ref), (runner[0], "a8", threads, np.sum(got8 != ref))
        # both operands as int8 rows: the whole call builds B's form from B's rows (no panels)
        big = np.full((M, N + 3), -7, np.int32)
        got = big[:, 1:1 + N]
        mod.gemm_exact_rows(got, a, b, np.full(bp.size, 99, np.int8), np.full(ap.size, 99, np.int16), isa,
                            threads, N + 3)
        assert np.array_equal(got, ref), (runner[0], "rows", threads, np.sum(got != ref))
        assert np.all(big[:, :1] == -7) and np.all(big[:, 1 + N:] == -7)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", STRIP_SHAPES + WHOLE_SHAPES + SMALL_M[::3])
def test_exact_gemm_body_with_b_form(rng, runner, shape):
    """B's form made once (exact_bform, what a PackedB keeps): every entry given it (packed rows,
    int8 rows, the dispatcher) gives the oracle's result at 1, 2, 3 threads; a form made for
    another shape is ignored (B converted by the call), not misread."""
    _, mod, isa = runner
    M, K, N = shape
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, :] = -128
    b[:, -1] = -128
    ref = lut_gemm_ref(a, b, exact_mul_lut())
    ap, bp, Kp, _, _ = pack_exact(a, b, K)
    n = mod.exact_bform_size(Kp, N, isa)
    assert (n > 0) is bool(isa & VNNI)
    bf = empty_aligned(max(n, 64))
    assert mod.exact_bform(bf, bp, Kp, N, isa, 2) is (n > 0)
    other = empty_aligned(max(mod.exact_bform_size(Kp, N + 16, isa), 64))
    bp2 = np.zeros(-(-(N + 16) // _g.NR) * _g.NR * Kp, np.int8)
    mod.exact_bform(other, bp2, Kp, N + 16, isa, 1)                 # a form of another (Kp, N)
    scratch = np.empty(-(-M // _g.MR) * _g.MR * Kp, np.int16)
    for form in (bf, other):
        for threads in (1, 2, 3):
            got = np.full((M, N), -7, np.int32)
            mod.gemm_exact_packed(got, ap, bp, Kp, isa, threads, -1, form)
            assert np.array_equal(got, ref), (runner[0], "packed", threads)
            got = np.full((M, N), -7, np.int32)
            mod.gemm_exact(got, a, bp, Kp, scratch, isa, threads, -1, form)
            assert np.array_equal(got, ref), (runner[0], "dispatcher", threads)
            got = np.full((M, N), -7, np.int32)
            if mod.gemm_exact_a8(got, a, bp, Kp, isa, threads, -1, form):
                assert np.array_equal(got, ref), (runner[0], "a8", threads)
    if n:
        with pytest.raises(ValueError, match="Bf: expected"):
            mod.gemm_exact_packed(np.zeros((M, N), np.int32), ap, bp, Kp, isa, 1, -1, bf[:n - 1])
        with pytest.raises(ValueError, match="Bf: expected"):
            mod.exact_bform(empty_aligned(n + 64)[1:n + 1], bp, Kp, N, isa, 1)      # not at a 64-byte boundary


def _qmatmul_exact_case(rng, shape, block):
    """(reference Y, then the packed operands qmatmul_exact_packed takes) of random float
    (M, K) x (K, N) quantized in blocks of ``block``."""
    M, K, N = shape
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    qa, sa = quantize_ref(x, block)
    qbt, sbt = quantize_ref(w.T, block)
    qb, sb = np.ascontiguousarray(qbt.T), np.ascontiguousarray(sbt.T)
    ref = qmatmul_ref(qa, sa, qb, sb, exact_mul_lut(), block)
    ap, bp, Kp, bkp, nblk = pack_exact(qa, qb, block)
    from lutcore.ops.quant import pack_scales as _pack_scales
    return ref, ap, sa, bp, _pack_scales(sb), nblk, bkp


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape,block", [((384, 70, 33), 32), ((1028, 21, 17), 7), ((577, 64, 40), 64)])
def test_qmatmul_exact_body_strips(rng, runner, shape, block):
    """The block-scaled whole call in strips (per-strip rs over several blocks), bits at 1, 2, 3 threads."""
    _, mod, isa = runner
    M, N = shape[0], shape[2]
    ref, ap, sa, bp, sbp, nblk, bkp = _qmatmul_exact_case(rng, shape, block)
    for threads in (1, 2, 3):
        got = np.full((M, N), np.nan, np.float32)
        mod.qmatmul_exact_packed(got, ap, sa, bp, sbp, nblk, bkp, isa, threads)
        assert np.array_equal(got.view(np.int32), ref.view(np.int32)), (runner[0], threads)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape,block", [((197, 70, 71), 32), ((61, 130, 263), 5), ((37, 96, 600), 64),
                                         ((9, 21, 33), 7)])
def test_qmatmul_exact_body_whole_call(rng, runner, shape, block):
    _, mod, isa = runner
    M, N = shape[0], shape[2]
    ref, ap, sa, bp, sbp, nblk, bkp = _qmatmul_exact_case(rng, shape, block)
    for threads in (1, 2, 3):
        big = np.full((M, N + 5), np.nan, np.float32)
        got = big[:, 2:2 + N]
        mod.qmatmul_exact_packed(got, ap, sa, bp, sbp, nblk, bkp, isa, threads, N + 5)
        assert np.array_equal(got.view(np.int32), ref.view(np.int32)), (runner[0], threads)
        assert np.all(np.isnan(big[:, :2])) and np.all(np.isnan(big[:, 2 + N:]))


def random_table(seed=7):
    """int16 products over the full range (the shapes' K <= 513 keep the sums in int32), as units._kernel_mul."""
    mul = np.random.default_rng(seed).integers(-32768, 32768, 65536).astype(np.int16)
    return mul, lutcore.Units.from_mul(mul)._kernel_mul


def mitchell_table():
    units = lutcore.units.approx.mitchell()
    return units.mul, units._kernel_mul


def asymmetric_table():
    """mul(a, b) != mul(b, a): a swapped operand or table shows."""
    a = np.arange(-128, 128, dtype=np.int64)[:, None]
    b = np.arange(-128, 128, dtype=np.int64)[None, :]
    mul = (a * 3 - b * 2 + (a * b) // 7).astype(np.int16)
    return mul.ravel(), lutcore.Units.from_mul(mul.ravel())._kernel_mul


def extreme_table(seed=5):
    """Entries at the int16 ends and at the byte planes' edges (low byte 0 / 255, high byte 0x7f / 0x80)."""
    vals = np.array([-32768, 32767, -1, 0, 1, 255, 256, -256, 128, -129, 32512, -32513], np.int16)
    mul = np.random.default_rng(seed).choice(vals, 65536)
    return mul, lutcore.Units.from_mul(mul)._kernel_mul


TABLES = {"random": random_table, "mitchell": mitchell_table, "asymmetric": asymmetric_table,
          "extreme": extreme_table}
# M: 1, odd, around the 48-row direct limit; N: 1, 7, 33, and around / over a 128-column unit
TABLE_SHAPES = [(1, 1, 1), (7, 33, 5), (48, 7, 33), (50, 37, 129), (97, 300, 31), (3, 64, 64), (64, 257, 40),
                (1, 70, 300), (33, 19, 257), (5, 9, 128), (130, 3, 7),
                (3, 129, 65), (2, 300, 191), (5, 256, 256), (4, 513, 200), (1, 128, 64)]


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", TABLE_SHAPES)
@pytest.mark.parametrize("table", sorted(TABLES))
def test_table_gemm_body(rng, runner, shape, table):
    _, mod, isa = runner
    M, K, N = shape
    T32, a, b, ref = _table_case(rng, shape, table)
    for threads in (1, 2):
        for swapped in (False, True):       # the kernel as it is, and through the swapped table
            A, B = (a, b) if not swapped else (np.ascontiguousarray(b.T), np.ascontiguousarray(a.T))
            want = ref if not swapped else np.ascontiguousarray(ref.T)
            got = np.full(want.shape, -7, np.int32)
            work = np.empty(_g.table_work_size(*want.shape, threads, False), np.int32)
            mod.gemm_table(got, A, B, T32, work, isa, threads, swapped=swapped)
            print(runner[0], threads, swapped, "entries differing:", np.sum(got != want))
            assert np.array_equal(got, want)
        got = np.full((M, N), -7, np.int32)
        work = np.empty(_g.table_auto_work_size(M, N, K, 0, threads, False), np.int32)
        mod.gemm_table_auto(got, a, b, T32, work, isa, threads)
        assert np.array_equal(got, ref)


def packed_table(mod, b, isa, threads):
    """B (K, N) staged once for isa's any-table body (csrc/gemm/table_packed.h), 64-byte aligned."""
    n = mod.table_pack_size(*b.shape, isa)
    assert n > 0
    bq = empty_aligned(n)
    mod.table_pack_b(bq, b, isa, threads)
    return bq


def table_form(mod, T32, isa):
    t16 = empty_aligned(2 * 65536).view(np.int16)
    mod.table_form(t16, T32, isa)
    return t16


def _table_case(rng, shape, table):
    """(T32, a, b, the reference product) of random int8 operands through TABLES[table]."""
    M, K, N = shape
    mul, T32 = TABLES[table]()
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, 0], b[0, 0] = -128, 127
    return T32, a, b, lut_gemm_ref(a, b, mul)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", TABLE_SHAPES + [(16, 600, 512), (9, 1, 513)])
@pytest.mark.parametrize("table", sorted(TABLES))
def test_table_gemm_packed_body(rng, runner, shape, table):
    """A x B with B staged once (lc_table_pack_b, lc_gemm_table_packed): the numpy reference's
    and the unpacked drivers' bits, at 1 and 2 threads, packed at either thread count."""
    _, mod, isa = runner
    M, K, N = shape
    T32, a, b, ref = _table_case(rng, shape, table)
    t16 = table_form(mod, T32, isa)
    for pack_threads in (1, 2):
        bq = packed_table(mod, b, isa, pack_threads)
        for threads in (1, 2):
            got = np.full((M, N), -7, np.int32)
            mod.gemm_table_packed(got, a, bq, t16, isa, threads)
            print(runner[0], pack_threads, threads, "entries differing:", np.sum(got != ref))
            assert np.array_equal(got, ref)
            plain = np.full((M, N), -7, np.int32)
            work = np.empty(_g.table_work_size(M, N, threads, False), np.int32)
            mod.gemm_table(plain, a, b, T32, work, isa, threads)
            assert np.array_equal(got, plain)
    big = np.full((M, N + 9), -7, np.int32)                     # rows ldc apart: a view's columns only
    mod.gemm_table_packed(big[:, 4:4 + N], a, bq, t16, isa, 2, N + 9)
    assert np.array_equal(big[:, 4:4 + N], ref) and np.all(big[:, :4] == -7) and np.all(big[:, 4 + N:] == -7)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", [(5, 1, 70), (9, 127, 64), (3, 128, 256), (7, 129, 129), (4, 300, 200),
                                   (2, 513, 300), (33, 576, 64)])
@pytest.mark.parametrize("table", sorted(TABLES))
def test_table_gemm_zero_codes(rng, runner, shape, table):
    """Rows with many codes 0 (a ReLU's output, padding): where the table's row 0 is all zeros (mitchell)
    the VBMI body leaves those k's out of a chunk when they are at least an eighth of it; the same C as
    the reference for every share of zeros (below that share, around it, all) and every table."""
    _, mod, isa = runner
    M, K, N = shape
    mul, T32 = TABLES[table]()
    if table == "mitchell" and K % 2:                                  # row 0 all zeros but one entry: no skipping
        mul = mul.copy()
        mul[5] = 3
        T32 = lutcore.Units.from_mul(mul)._kernel_mul
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    t16 = table_form(mod, T32, isa)
    for share in (0.0, 0.1, 0.2, 0.7, 1.0):
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        a[rng.random((M, K)) < share] = 0
        a[0, :K // 2] = 0                                             # one row: a half of zeros
        ref = lut_gemm_ref(a, b, mul)
        for threads in (1, 2):
            bq = packed_table(mod, b, isa, threads)
            got = np.full((M, N), -7, np.int32)
            mod.gemm_table_packed(got, a, bq, t16, isa, threads)
            plain = np.full((M, N), -7, np.int32)
            work = np.empty(_g.table_work_size(M, N, threads, False), np.int32)
            mod.gemm_table(plain, a, b, T32, work, isa, threads)
            print(runner[0], table, share, threads, "entries differing:", np.sum(got != ref), np.sum(plain != ref))
            assert np.array_equal(got, ref) and np.array_equal(plain, ref)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
def test_table_gemm_packed_refuses_bad_packing(rng, runner):
    """A packed B for another K or N, another body, the wrong size or alignment: ValueError naming it."""
    _, mod, isa = runner
    _, T32 = mitchell_table()
    a = rng.integers(-128, 128, (5, 40), dtype=np.int8)
    b = rng.integers(-128, 128, (40, 70), dtype=np.int8)
    t16 = table_form(mod, T32, isa)
    c = np.empty((5, 70), np.int32)
    other_k = packed_table(mod, rng.integers(-128, 128, (41, 70), dtype=np.int8), isa, 1)
    with pytest.raises(ValueError, match=r"^b: packed for"):
        mod.gemm_table_packed(c, a, other_k, t16, isa, 1)            # its size is another K's
    with pytest.raises(ValueError, match=r"^b: packed for"):         # cut to this K's size: the header says 41
        mod.gemm_table_packed(c, a, other_k[:mod.table_pack_size(40, 70, isa)], t16, isa, 1)
    other_n = packed_table(mod, rng.integers(-128, 128, (40, 69), dtype=np.int8), isa, 1)
    with pytest.raises(ValueError, match=r"^b: packed for"):
        mod.gemm_table_packed(c, a, other_n, t16, isa, 1)            # N = 69 is one unit too: the same size
    good = packed_table(mod, b, isa, 1)
    bogus = good.copy()
    bogus[:64] = 0                                                  # no header: not a packed B
    aligned = np.empty(good.size + 64, np.uint8)
    off = (-aligned.ctypes.data) % 64
    aligned = aligned[off:off + good.size]
    aligned[...] = bogus
    with pytest.raises(ValueError, match=r"^b: packed for"):
        mod.gemm_table_packed(c, a, aligned, t16, isa, 1)
    other = AVX512 if isa & VBMI else AVX512 | VNNI | VBMI          # the other body's staged form
    with pytest.raises(ValueError, match=r"^b: packed for"):
        mod.gemm_table_packed(c, a, packed_table(mod, b, other, 1), t16, isa, 1)
    mis = np.empty(good.size + 65, np.uint8)
    off = (-mis.ctypes.data) % 64 + 1
    mis = mis[off:off + good.size]
    mis[...] = good
    with pytest.raises(ValueError, match=r"^b: expected its packed bytes 64-byte aligned"):
        mod.gemm_table_packed(c, a, mis, t16, isa, 1)
    with pytest.raises(ValueError, match=r"^T16: expected 65536"):
        mod.gemm_table_packed(c, a, good, t16[:100], isa, 1)
    with pytest.raises(ValueError, match=r"^Bq: expected \d+ bytes"):
        mod.table_pack_b(good[:-64], b, isa, 1)
    with pytest.raises(ValueError, match=r"^b: no packed any-table form"):
        mod.table_pack_b(good, b, 1, 1)                             # AVX2: reads the plain B
    assert mod.table_pack_size(40, 70, 1) == 0 and mod.table_pack_size(40, 70, 0) == 0

# The wide drivers' dynamic units (gemm/table.h lc_table_wide_chunks: <= 32 rows x 256 columns,
# >= 8 units where the rows allow): M, N not multiples of the unit, one row / one column,
# a last row chunk of one row, and more threads than units.
WIDE_UNIT_SHAPES = [(1, 40, 1), (1, 33, 600), (257, 20, 9), (70, 45, 300), (9, 30, 513), (33, 64, 257), (2, 7, 3)]


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape", WIDE_UNIT_SHAPES)
def test_table_bodies_dynamic_units_any_thread_count(rng, runner, shape):
    _, mod, isa = runner
    M, K, N = shape
    mul, T32 = mitchell_table()
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    ref = lut_gemm_ref(a, b, mul)
    block = 5
    Kq = (K // block) * block
    qa, sa = quantize_ref(rng.standard_normal((M, Kq)).astype(np.float32), block)
    qbt, sbt = quantize_ref(rng.standard_normal((N, Kq)).astype(np.float32), block)
    qb, sb = np.ascontiguousarray(qbt.T), np.ascontiguousarray(sbt.T)
    nblk = sa.shape[1]
    qref = qmatmul_ref(qa, sa, qb, sb, mul, block)
    for threads in (1, 2, 3, 5):
        got = np.full((M, N), -7, np.int32)
        mod.gemm_table(got, a, b, T32, np.empty(_g.table_work_size(M, N, threads, False), np.int32), isa, threads)
        print(runner[0], shape, threads, "entries differing:", np.sum(got != ref))
        assert np.array_equal(got, ref)
        y = np.full((M, N), np.nan, np.float32)
        mod.qmatmul_table(y, qa, sa, qb, sb, T32, nblk, block,
                          np.empty(_g.table_work_size(M, N, threads, True), np.int32), isa, threads)
        assert np.array_equal(y.view(np.int32), qref.view(np.int32)), (runner[0], threads)


@pytest.mark.parametrize("runner", RUNNERS, ids=IDS)
@pytest.mark.parametrize("shape,block", [((7, 33, 5), 32), ((50, 96, 129), 32), ((64, 30, 40), 5), ((9, 21, 70), 7),
                                         ((1, 24, 300), 8), ((130, 33, 257), 11), ((3, 260, 70), 130)])
def test_qmatmul_table_body(rng, runner, shape, block):
    _, mod, isa = runner
    M, K, N = shape
    mul, T32 = random_table(11)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    qa, sa = quantize_ref(x, block)
    qbt, sbt = quantize_ref(w.T, block)
    qb, sb = np.ascontiguousarray(qbt.T), np.ascontiguousarray(sbt.T)
    nblk = sa.shape[1]
    ref = qmatmul_ref(qa, sa, qb, sb, mul, block)
    for threads in (1, 2):
        got = np.full((M, N), np.nan, np.float32)
        work = np.empty(_g.table_auto_work_size(M, N, nblk * block, nblk, threads, True), np.int32)
        mod.qmatmul_table_auto(got, qa, sa, qb, sb, T32, nblk, block, work, isa, threads)
        assert np.array_equal(got.view(np.int32), ref.view(np.int32))


@pytest.mark.parametrize("name", ["avx512bw", "avx512"])
def test_isa_argument_and_dispatch(name):
    """avx512bw never carries the extension bits (VNNI, VBMI, VPOPCNTDQ); a VNNI body only with the VNNI bit."""
    if name not in lutcore.available_simd():
        with pytest.raises(ValueError):
            lutcore.set_simd(name)
        return
    isa = _simd.isa_of(name)
    if name == "avx512bw":
        assert isa == AVX512
    else:
        assert isa == AVX512 | (_simd._features & (VNNI | VBMI | _simd.VPOPCNT))
    names = _g.body_names(isa)
    assert names["lut_gemm exact"].startswith("avx512vnni" if isa & VNNI else "avx512bw")
    assert _g.body_names(AVX512)["qmatmul exact"].startswith("avx512bw")
    assert names["lut_gemm any table"] == ("avx512vbmi (vpermi2b)" if (isa & VNNI and isa & VBMI)
                                           else "avx512bw (vpermi2w)")
    assert _g.body_names(AVX512 | VNNI)["lut_gemm any table"] == "avx512bw (vpermi2w)"
    assert _g.body_names(AVX512 | VNNI | VBMI)["lut_gemm any table"] == "avx512vbmi (vpermi2b)"
    assert _g.body_names(1)["lut_gemm any table"] == "avx2"
    assert _g.body_names(1)["lut_gemm exact"] == "avx2" and _g.body_names(0)["lut_gemm exact"] == "generic"


def test_show_config_lists_each_family_body(capsys):
    lutcore.show_config()
    out = capsys.readouterr().out
    for fam, body in _simd.bodies().items():
        assert fam in out and body in out
