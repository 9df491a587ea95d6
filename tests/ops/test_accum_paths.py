"""A declared accumulator reaches every path units go, never silently dropped:

* ``lut_gemm`` (plain arrays, a PackedB, ``out=``) gives the step-by-step oracle's sums
  (tests/reference/accum_ref.py), int32 while the register fits it, int64 beyond;
* the block-scaled product (``qmatmul``, ``QLinear``) forms each block's code sum in the
  register, held to tests/reference/format_ref.py's oracle with the accumulator;
* a register wide enough for every sum gives the bits of the unit without one, everywhere
  (lut_gemm, qmatmul, a GPT);
* units directories, checkpoints' units tensors and specs (``UNITS@16s:saturate``) keep it;
* a GPT through it: same bits at 1 and 2 threads, overflow events logged per layer name,
  ``evaluate_units`` reporting them;
* the search's (multiplier, adder) pairs and their energy; bad input named.
"""
import numpy as np
import pytest

import lutcore
from lutcore import quant
from lutcore.ops import accum
from lutcore.ops.gemm import lut_gemm, pack_b
from lutcore.units import Units, approx, resolve
from lutcore.units.accumulator import Accumulator
from lutcore.units.adders import Adder
from reference.accum_ref import adder_fn_from_netlist, gemm_ref
from reference.format_ref import qmatmul_formats_ref


def _acc_kw(acc):
    kw = dict(bits=acc.bits, signed=acc.signed, overflow=acc.overflow, order=acc.order, chunk=acc.chunk)
    if acc.adder is not None:
        kw["adder"] = adder_fn_from_netlist(acc.adder.netlist.gates, acc.adder.netlist.outputs, acc.bits)
    return kw


def _loa(bits, signed, k):
    """A lower-part-OR adder: the k low sum bits a | b, no carry out of them, exact above."""
    from lutcore.units.netlist import Netlist
    gates = []

    def g(x, y, z, tt):
        gates.append((x, y, z, tt))
        return 2 + 2 * bits + len(gates) - 1
    a = [2 + i for i in range(bits)]
    b = [2 + bits + i for i in range(bits)]
    outs, c = [], 0
    for i in range(bits):
        if i < k:
            outs.append(g(a[i], b[i], 0, 0xFC))              # x | y
        else:
            outs.append(g(a[i], b[i], c, 0x96))
            c = g(a[i], b[i], c, 0xE8)
    outs.append(g(a[bits - 1], b[bits - 1], c, 0x96) if signed else c)
    return Adder(Netlist(bits, bits, bits + 1, np.array(gates, np.int32), np.array(outs, np.int32)), signed,
                 name=f"loa{bits}{'s' if signed else 'u'}_{k}")


def _or1_adder(bits=16):
    """An exact adder whose bit 0 is always 1 (r + 0 != r: refused for attention)."""
    ad = _loa(bits, True, 0)
    g = np.asarray(ad.netlist.gates).copy()
    o = np.asarray(ad.netlist.outputs).copy()
    o[0] = 1
    from lutcore.units.netlist import Netlist
    return Adder(Netlist(bits, bits, bits + 1, g, o), True, name="or1")


def _units_acc(u, spec, adder=None):
    return u.with_accumulator(Accumulator.parse(spec, adder=adder))


CASES = [  # (unit, accumulator spec, adder)
    (lambda: Units.exact(), "16s:saturate", None),
    (lambda: Units.exact(), "16s:wrap", None),
    (lambda: approx.mitchell(), "16s:saturate", lambda: _loa(16, True, 5)),
    (lambda: Units.exact("8u x 4u"), "12u:saturate:chunks=3", None),
    (lambda: Units.exact("4s"), "9s:wrap", lambda: _loa(9, True, 2)),
    (lambda: Units.exact("8u x 4s"), "12s:saturate", None),
]


def _codes(rng, fmt, shape, which):
    lo, hi = fmt.range(which)
    x = rng.integers(lo, hi + 1, shape)
    if fmt.legacy:
        return x.astype(np.int8)
    return x.astype(np.uint8 if lo >= 0 else np.int16)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_lut_gemm_routes_through_the_register(rng, simd, case):
    mk, spec, ad = CASES[case]
    u = _units_acc(mk(), spec, ad() if ad else None)
    acc, fmt = u.accumulator, u.format
    for M, K, N in ((1, 1, 1), (7, 33, 5), (3, 130, 17)):
        a, b = _codes(rng, fmt, (M, K), "a"), _codes(rng, fmt, (K, N), "b")
        want, cnt = gemm_ref(a, b, u.table(), a_bits=fmt.a_bits, b_bits=fmt.b_bits, **_acc_kw(acc))
        for th in (1, 2):
            got = lut_gemm(a, b, u, threads=th)
            assert got.dtype == np.int32 and np.array_equal(got, want), (spec, M, K, N, th)
        got = lut_gemm(a, pack_b(b.astype(np.int8) if b.dtype == np.int16 else b), u)
        assert np.array_equal(got, want)
        out = np.full((M, N), 7, np.int32)
        assert lut_gemm(a, b, u, out=out) is out and np.array_equal(out, want)
        c, n = accum.gemm(a, b, u, acc, counts=True)
        assert np.array_equal(c, want) and np.array_equal(n, cnt)


def test_a_wide_register_keeps_the_bits_of_exact_sums(rng):
    for base in (Units.exact(), approx.mitchell(), Units.exact("8u x 4u")):
        wide = base.with_accumulator("32s")
        a, b = _codes(rng, base.format, (9, 70), "a"), _codes(rng, base.format, (70, 11), "b")
        assert np.array_equal(lut_gemm(a, b, wide), lut_gemm(a, b, base))
        x = rng.standard_normal((5, 70)).astype(np.float32)
        w = rng.standard_normal((70, 6)).astype(np.float32)
        assert np.array_equal(quant.qmatmul(x, w, wide).view(np.int32), quant.qmatmul(x, w, base).view(np.int32))


def test_unsigned_32_bit_register_returns_int64(rng):
    u = Units.exact("8u").with_accumulator("32u:saturate")
    a, b = _codes(rng, u.format, (3, 40), "a"), _codes(rng, u.format, (40, 4), "b")
    got = lut_gemm(a, b, u)
    assert got.dtype == np.int64
    assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    with pytest.raises(TypeError, match="out:"):
        lut_gemm(a, b, u, out=np.empty((3, 4), np.int32))


@pytest.mark.parametrize("case", [0, 2, 3, 5])
def test_block_scaled_product_sums_each_block_in_the_register(rng, case):
    mk, spec, ad = CASES[case]
    u = _units_acc(mk(), spec, ad() if ad else None)
    f = u.format
    fmt = (f.a_bits, f.a_signed, f.b_bits, f.b_signed)
    for M, K, N in ((1, 7, 1), (3, 70, 5)):
        x = (rng.standard_normal((M, K)) * 3).astype(np.float32)
        w = (rng.standard_normal((K, N)) * 3).astype(np.float32)
        want = qmatmul_formats_ref(x, w, u.table(), fmt, 32, acc=_acc_kw(u.accumulator))
        for th in (1, 2):
            got = quant.qmatmul(x, w, u, threads=th)
            assert np.array_equal(got.view(np.int32), want.view(np.int32)), (spec, M, K, N, th)
        lin = quant.QLinear(w, u)                          # its weight: the stored Q8's values, in u's format
        want = qmatmul_formats_ref(x, lin.q8.dequantize(), u.table(), fmt, 32, acc=_acc_kw(u.accumulator))
        assert np.array_equal(lin(x).view(np.int32), want.view(np.int32))
        lin = quant.QLinear(w, mk())                       # switched to the register afterwards
        lin.units = u
        assert np.array_equal(lin(x).view(np.int32), want.view(np.int32))


def test_saved_units_and_checkpoint_tensors_keep_the_accumulator(tmp_path):
    from lutcore.train.trainer import units_from_tensors, units_tensors
    ad = _loa(16, True, 4)
    ad.cost = {"power_mw": 0.02, "source": "stated"}
    u = approx.mitchell().with_accumulator(Accumulator(16, True, "saturate", "chunks", 4, ad))
    u.save(tmp_path / "u")
    back = Units.load(tmp_path / "u")
    assert back.accumulator == u.accumulator and back.digest == u.digest
    assert back.accumulator.adder.cost["power_mw"] == 0.02
    t = units_from_tensors(units_tensors(u), "m", "ckpt")
    assert t.accumulator == u.accumulator and t.digest == u.digest
    plain = approx.mitchell()
    assert plain.digest != u.digest and u.table_digest == plain.digest and u.without_accumulator() == plain
    assert Units.load(tmp_path / "u").without_accumulator().accumulator is None


def test_specs_name_the_register_and_bad_input_is_named(tmp_path):
    u = resolve("mitchell@16s:saturate:chunks=8")
    assert u.accumulator == Accumulator(16, True, "saturate", "chunks", 8) and u.name == "mitchell@16s:saturate:chunks=8"
    assert resolve("exact@20s").accumulator.bits == 20
    with pytest.raises(ValueError, match="accumulator: a 12-bit signed accumulator .* narrower than one product"):
        resolve("exact@12s")
    with pytest.raises(ValueError, match="accumulator: unknown part 'wrapp'"):
        resolve("exact@16s:wrapp")
    with pytest.raises(ValueError, match="chunk"):
        resolve("exact@16s:chunks=1")
    with pytest.raises(ValueError, match="adder: .* 9-bit signed adder; the accumulator is 16-bit"):
        Accumulator(16, True, adder=_loa(9, True, 2))
    with pytest.raises(ValueError, match="adder: .* unsigned"):
        Accumulator(9, False, adder=Adder.exact(9, False, 9))
    with pytest.raises(ValueError, match="accumulator: .* narrower"):
        Units.exact().with_accumulator("16u")              # signed products, an unsigned register
    with pytest.raises(ValueError, match="adder: expected a .c file"):
        resolve(f"exact@16s:adder={tmp_path / 'nothing.txt'}")


def _gpt(units):
    from lutcore.models.gpt import GPT, GPTConfig
    return GPT(GPTConfig(vocab=40, dim=16, context=16, layers=1, heads=2, seed=1), units=units)


def test_gpt_through_a_register_logs_overflows_per_layer():
    ids = np.random.default_rng(0).integers(0, 40, (2, 16))
    wide, exact = _gpt("exact@24s"), _gpt("exact")
    assert np.array_equal(wide.forward(ids).view(np.int32), exact.forward(ids).view(np.int32))
    m = _gpt("exact@16s:saturate")
    with accum.overflow_log() as log:
        lutcore.set_num_threads(1)
        y1 = m.forward(ids)
    lutcore.set_num_threads(2)
    y2 = m.forward(ids)
    assert np.array_equal(y1.view(np.int32), y2.view(np.int32))
    assert not np.array_equal(y1.view(np.int32), exact.forward(ids).view(np.int32))
    rows = log.to_dict()
    assert set(rows) == {n for n in m.layer_names() if not n.endswith((".qk", ".pv"))}   # attention: float
    assert sum(r["events"] for r in rows.values()) > 0
    assert all(r["overflowed"] <= r["outputs"] for r in rows.values())


def test_eval_reports_overflows_per_layer(tmp_path):
    from lutcore.evaluate import evaluate_units, format_table, write_report
    m = _gpt(None)
    ids = np.random.default_rng(0).integers(0, 40, 16 * 3 + 1)
    res = evaluate_units(m, ids, ["none", "exact", "exact@16s:wrap"], seq_len=16)
    assert "overflow" not in res.rows[1]
    ov = res.rows[2]["overflow"]
    assert set(ov) == {n for n in m.layer_names() if not n.endswith((".qk", ".pv"))} and sum(o["overflowed"] for o in ov.values()) > 0
    text = format_table(res)
    assert "overflows of exact@16s:wrap's accumulator" in text and "h.0.mlp.fc" in text
    files = write_report(res, tmp_path)
    import json
    assert json.load(open(files["json"]))["results"][2]["overflow"]["lm_head"]["outputs"] > 0


def test_search_pairs_cost_the_multiplier_and_the_adder():
    from lutcore.search import Candidates, pairs, unit_cost
    a1, a2 = _loa(16, True, 0), _loa(16, True, 6)
    a1.cost, a2.cost = {"power_mw": 0.05}, {"power_mw": 0.02}
    m = [Units.exact().with_cost(power_mw=0.4), approx.mitchell().with_cost(power_mw=0.1)]
    ps = pairs(m, [a2, a1], "16s:saturate:chunks=2")
    assert [u.name for u in ps] == ["exact+loa16s_6", "mitchell+loa16s_6", "exact+loa16s_0", "mitchell+loa16s_0"]
    assert unit_cost(ps[1])["power_mw"] == pytest.approx(0.1 + 0.02 / 2)
    c = Candidates(ps, {"l1": 100, "l2": 50})
    assert c.reference.name == "exact+loa16s_0"                 # an exact multiplier with an exact adder
    e = c.energy({"l1": "mitchell+loa16s_6", "l2": "exact+loa16s_0"})["energy"]
    assert e == pytest.approx((100 * 0.11 + 50 * 0.425) / (150 * 0.425))
    a2.cost = {}
    with pytest.raises(ValueError, match="adder loa16s_6 states no power_mw"):
        Candidates(pairs(m, [a1, a2]), {"l1": 1}).check_power()


def test_cli_accumulator_needs_adders(tmp_path, capsys):
    from lutcore.cli import main
    rc = main(["search", "--model", str(tmp_path), "--units", "exact", "--accumulator", "16s"])
    assert rc != 0 and "--accumulator" in capsys.readouterr().err
