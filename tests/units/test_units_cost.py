"""Hardware cost and published error figures read from the circuit (issue 25):
EvoApproxLib header comments and meta.json, the Yosys area proxy, cost.json in units
directories, lutcore.units.library(DIR) and `lutcore units DIR --table`.

The circuits in tests/data/circuits were written for these tests; their error figures
were computed from their own tables and their PDK45 figures are made up (stated in each
file's header)."""
from _paths import ROOT, TESTS  # noqa: F401
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.units import approx
from lutcore.units.cost import PublishedFigureWarning, read_header
from lutcore.units.library import LibraryWarning
from reference.units_ref import exact_mul_lut

DATA = os.path.join(TESTS, "data", "circuits")
EXACT_V = os.path.join(DATA, "mul8s_exact.v")
RES6_V = os.path.join(DATA, "mul8s_res6.v")
TRUNC4_C = os.path.join(DATA, "mul8s_trunc4.c")
I = np.arange(65536)
A = (I >> 8).astype(np.uint8).view(np.int8).astype(np.int64)
B = (I & 255).astype(np.uint8).view(np.int8).astype(np.int64)

HEADER = """// MAE% = {mae_pct} %
// MAE = 53
// WCE% = 0.39 %
// WCE = 255
// WCRE% = 300.00 %
// EP% = 74.61 %
// MRE% = 4.41 %
// MSE = 5462
// PDK45_PWR = 0.301 mW
// PDK45_AREA = 558.9 um2
// PDK45_DELAY = 1.36 ns
"""


@pytest.fixture(autouse=True)
def strict_figures():
    with warnings.catch_warnings():
        warnings.simplefilter("error", PublishedFigureWarning)     # an unexpected disagreement fails
        yield


def test_header_lines_parsed(tmp_path):
    p = tmp_path / "h.v"
    p.write_text("/*** a library banner ***/\n" + HEADER.format(mae_pct="0.081") + "module m; endmodule\n")
    cost, pub, steps = read_header(str(p))
    assert cost == {"power_mw": 0.301, "area_um2": 558.9, "delay_ns": 1.36}
    assert pub == {"mae_pct": 0.081, "mae": 53.0, "wce_pct": 0.39, "wce": 255.0, "wcre_pct": 300.0,
                   "ep_pct": 74.61, "mre_pct": 4.41, "mse": 5462.0}
    assert steps["mae_pct"] == pytest.approx(0.001) and steps["wcre_pct"] == pytest.approx(0.01)
    assert steps["mae"] == 1.0


def test_verilog_header_gives_cost_and_published():
    u = lutcore.Units.from_verilog(RES6_V)
    assert u.cost == {"power_mw": 0.391, "area_um2": 651.2, "delay_ns": 1.41,
                      "source": "PDK45 figures from the header of mul8s_res6.v"}
    assert u.published["mae_pct"] == 0.046 and u.published["ep_pct"] == 93.75 and u.published["wce"] == 63
    assert u.loaded_from == RES6_V
    assert np.array_equal(u.mul, ((A * B) & ~63).astype(np.int16))
    m = u.error_metrics()
    assert m["ep_pct"] == 93.75 and m["wce"] == 63          # the header's figures are the table's


def test_c_header_gives_cost_and_published():
    u = lutcore.Units.from_c(TRUNC4_C)
    assert u.name == "mul8s_trunc4" and u.cost["power_mw"] == 0.338 and u.cost["delay_ns"] == 1.36
    assert "header of mul8s_trunc4.c" in u.cost["source"] and u.published["wce"] == 49


def _with_header(tmp_path, src, name, **changes):
    text = open(src).read()
    for k, v in changes.items():
        import re
        text = re.sub(rf"(?m)^// {re.escape(k)} = [^\n]*$", f"// {k} = {v}", text)
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_disagreement_beyond_the_last_digit_warns(tmp_path):
    # mul8s_res6: mae_pct = 0.04578; "0.05" (2 digits) agrees, "0.047" (3 digits) does not
    ok = _with_header(tmp_path, RES6_V, "ok.v", **{"MAE%": "0.05 %"})
    lutcore.Units.from_verilog(ok)                           # no warning (they are errors here)
    bad = _with_header(tmp_path, RES6_V, "bad.v", **{"MAE%": "0.047 %", "WCE": "65"})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        u = lutcore.Units.from_verilog(bad)
    msgs = [str(x.message) for x in w if issubclass(x.category, PublishedFigureWarning)]
    print(msgs)
    assert len(msgs) == 2
    assert any("published mae_pct = 0.047 but the table gives 0.0457764" in m and bad in m for m in msgs)
    assert any("published wce = 65 but the table gives 63" in m for m in msgs)
    assert u.published["wce"] == 65                          # kept as published


def test_wrong_table_caught_at_load(tmp_path):
    # a C model whose header describes the exact multiplier but whose body truncates
    p = tmp_path / "wrong.c"
    p.write_text("// MAE = 0\n// WCE = 0\n// EP% = 0.00 %\n// PDK45_PWR = 0.4 mW\n#include <stdint.h>\n"
                 "int16_t m(int8_t a, int8_t b) { return (int16_t)((a * b) & ~1); }\n")
    with pytest.warns(PublishedFigureWarning, match=r"published ep_pct = 0 but the table gives 25"):
        lutcore.Units.from_c(str(p))


def _meta(root, folder, entries):
    groups = [{"datasets": [{"bitwidth": 8, "datasets": [{"description": "8-bit signed multipliers (test)",
                                                            "folder": folder, "instances": entries}]}]}]
    (root / "meta.json").write_text(json.dumps(groups))


def test_meta_json_gives_costs(tmp_path):
    lib = tmp_path / "lib"
    (lib / "multiplers" / "8x8_signed").mkdir(parents=True)
    v = lib / "multiplers" / "8x8_signed" / "mul8s_xyz.v"
    v.write_text("module mul8s_xyz(input [7:0] A, input [7:0] B, output [15:0] O);\n"
                 "  assign O = $signed(A) * $signed(B);\nendmodule\n")
    _meta(lib, "multiplers/8x8_signed", [
        {"name": "mul8s_other", "files": [{"file": "mul8s_other.v", "type": "Verilog"}],
         "params": {"pwr": "9.9", "area": "1", "delay": "1"}},
        {"name": "mul8s_xyz", "files": [{"file": "mul8s_xyz.v", "type": "Verilog"},
                                        {"file": "mul8s_xyz.c", "type": "C"}],
         "params": {"area": "709.9", "delay": "1.43", "ep%": "0.0", "mae%": "0.0", "mre%": "0.0", "pwr": "0.425",
                    "wce%": "0.0", "wcre%": "0.0"}}])
    u = lutcore.Units.from_verilog(str(v))
    assert u.is_exact
    assert {k: u.cost[k] for k in ("power_mw", "area_um2", "delay_ns")} == {"power_mw": 0.425, "area_um2": 709.9,
                                                                           "delay_ns": 1.43}
    assert "meta.json (instance mul8s_xyz)" in u.cost["source"] and "cells" not in u.cost
    assert u.published == {"ep_pct": 0.0, "mae_pct": 0.0, "mre_pct": 0.0, "wce_pct": 0.0, "wcre_pct": 0.0}
    # the file's own header wins; meta.json fills what it lacks
    v.write_text("// PDK45_PWR = 0.5 mW\n" + v.read_text())
    lutcore.units.hdl._cache.clear()
    u = lutcore.Units.from_verilog(str(v))
    assert u.cost["power_mw"] == 0.5 and u.cost["area_um2"] == 709.9
    assert "header of mul8s_xyz.v" in u.cost["source"] and "meta.json" in u.cost["source"]


def test_meta_json_that_is_broken_warns_and_is_ignored(tmp_path):
    (tmp_path / "meta.json").write_text("{not json")
    v = tmp_path / "m.v"
    v.write_text("module m(input [7:0] A, input [7:0] B, output [15:0] O);\n  assign O = A & B;\nendmodule\n")
    with pytest.warns(UserWarning, match=r"meta\.json: cannot read this meta\.json"):
        u = lutcore.Units.from_verilog(str(v))
    assert "power_mw" not in u.cost


def test_yosys_area_proxy_without_figures(tmp_path):
    v = tmp_path / "g.v"
    v.write_text("module g(input [7:0] A, input [7:0] B, output [15:0] O);\n"
                 "  assign O = {A ^ B, A & B};\nendmodule\n")
    u = lutcore.Units.from_verilog(str(v))
    # 8 XOR (12 transistors each in Yosys's CMOS estimate) and 8 AND (6 each)
    assert u.cost["cells"] == 16 and u.cost["transistors"] == 8 * 12 + 8 * 6
    assert not {"power_mw", "area_um2", "delay_ns"} & set(u.cost)
    assert "area proxy computed by Yosys" in u.cost["source"] and "stat -tech cmos" in u.cost["source"]
    assert u.published == {}
    # constants folded before counting: a gate with a constant input is not a cell
    w = tmp_path / "k.v"
    w.write_text("module k(input [7:0] A, input [7:0] B, output [15:0] O);\n"
                 "  assign O = {A & 8'hff, A & B};\nendmodule\n")
    assert lutcore.Units.from_verilog(str(w)).cost["cells"] == 8


def test_c_model_without_figures_has_no_cost(tmp_path):
    p = tmp_path / "n.c"
    p.write_text("#include <stdint.h>\nint16_t m(int8_t a, int8_t b) { return a * b; }\n")
    u = lutcore.Units.from_c(str(p))
    assert u.cost == {} and u.published == {}


# ---------------------------------------------------------------- units directories
def test_cost_saved_beside_the_tables(tmp_path):
    u = approx.mitchell().with_cost(power_mw=0.2, area_um2=300, source="stated for the test")
    d = tmp_path / "mit"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # no "unknown file" warning for cost.json
        u.save(str(d))
        v = lutcore.Units.load(str(d))
    assert sorted(os.listdir(d)) == ["cost.json", "mul_lut.bin", "relu_lut.bin", "requant_lut.bin"]
    assert v.cost == {"power_mw": 0.2, "area_um2": 300.0, "source": "stated for the test"}
    assert v == u and v.loaded_from == str(d)
    # a circuit's published figures travel too
    c = lutcore.Units.from_c(TRUNC4_C)
    c.save(str(tmp_path / "t4"))
    w = lutcore.Units.load(str(tmp_path / "t4"))
    assert w.published == c.published and w.cost == c.cost
    # saving units without figures removes an earlier save's cost.json
    approx.mitchell().save(str(d))
    assert "cost.json" not in os.listdir(d) and lutcore.Units.load(str(d)).cost == {}


@pytest.mark.parametrize("text,pattern", [("{oops", r"cannot read the cost figures"),
                                          ('{"cost": {"power_mw": -1}}', r"cost power_mw: expected a finite"),
                                          ('[1, 2]', r"expected \{\"cost\"")])
def test_bad_cost_json_names_the_file(tmp_path, text, pattern):
    d = tmp_path / "u"
    approx.mitchell().save(str(d))
    (d / "cost.json").write_text(text)
    with pytest.raises(ValueError, match=rf"u/cost\.json: {pattern}"):
        lutcore.Units.load(str(d))




def _python(code, *args, timeout=120):
    """``code`` in a fresh Python (lutcore of this checkout): a hang there is a failure here,
    not the end of the run.  -> the CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no end within {timeout} s")


def test_cost_json_stays_inside_its_directory(tmp_path):
    """Issue 38 (16): a cost.json that is a symlink to a file outside the units directory was
    followed; it is refused as the tables are (lutcore._io.contained)."""
    d = tmp_path / "u"
    approx.mitchell().save(str(d))
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"cost": {"power_mw": 0.1}}')
    os.symlink(outside, d / "cost.json")
    with pytest.raises(ValueError) as ei:
        lutcore.Units.load(str(d))
    assert str(d / "cost.json") in str(ei.value) and str(outside) in str(ei.value)
    os.remove(d / "cost.json")
    os.symlink("../elsewhere.json", d / "cost.json")                     # relative, the same
    with pytest.raises(ValueError, match="outside the directory"):
        lutcore.units.resolve(str(d))
    os.remove(d / "cost.json")                                           # a link inside: followed
    shutil.copy(outside, d / ".cost.json")
    os.symlink(".cost.json", d / "cost.json")
    assert lutcore.Units.load(str(d)).cost == {"power_mw": 0.1}


def test_cost_json_that_is_a_named_pipe_is_refused(tmp_path):
    """A cost.json that is a named pipe was opened, and waited for a writer forever."""
    d = tmp_path / "u"
    approx.mitchell().save(str(d))
    os.mkfifo(d / "cost.json")
    r = _python("import sys, lutcore\ntry:\n    lutcore.Units.load(sys.argv[1])\n"
                "except ValueError as e:\n    print(e)\n", d)
    assert r.stdout.strip() == f"{d / 'cost.json'}: cannot read the cost figures: not a regular file", r


_LIBRARY = """import sys, warnings, lutcore
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    lib = lutcore.units.library(sys.argv[1])
print("units:", " ".join(e.name for e in lib), "| broken:", len(lib.broken))
for x in w:
    print(x.category.__name__, x.message)
"""


def test_library_skips_what_is_not_a_regular_file(tmp_path):
    """Issue 38 (17): a named pipe called *.c hung library(DIR) and `lutcore units DIR --table`
    forever.  Anything that is not a regular file is skipped, with a warning naming it."""
    (tmp_path / "ok.c").write_text("short ok(signed char a, signed char b) { return (short)(a * b); }\n")
    for name in ("pipe.c", "pipe.v"):
        os.mkfifo(tmp_path / name)
    os.symlink(tmp_path / "pipe.c", tmp_path / "link.c")                 # a link to one, the same
    r = _python(_LIBRARY, tmp_path)
    print(r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[0] == "units: ok | broken: 0"
    for name in ("link.c", "pipe.c", "pipe.v"):
        assert f"LibraryWarning units library {tmp_path}: skipping {tmp_path / name}: a named pipe, not a " \
               f"regular file" in lines
    png = tmp_path / "lib.png"
    r = _python("import sys; from lutcore.cli import main; sys.exit(main(sys.argv[1:]))",
                "units", tmp_path, "--table", "--png", png)
    print(r.stdout, r.stderr)
    assert r.returncode == 0 and "ok" in r.stdout and f"skipping {tmp_path / 'pipe.c'}: a named pipe" in r.stderr


def test_with_cost_keeps_loaded_from_and_published():
    u = lutcore.Units.from_verilog(RES6_V)
    v = u.with_cost(power_mw=1.5)
    assert v.loaded_from == RES6_V and v.published == u.published
    assert v.cost["power_mw"] == 1.5 and v.cost["area_um2"] == 651.2 and u.cost["power_mw"] == 0.391


def test_cli_verify_shows_cost(tmp_path, capsys):
    d = tmp_path / "u"
    approx.truncated(4).with_cost(power_mw=0.25, delay_ns=1.1, source="stated").save(str(d))
    assert main(["units", str(d), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "cost: power_mw 0.25, delay_ns 1.1 (stated)" in out
    assert main(["units", RES6_V, "--verify"]) == 0
    out = capsys.readouterr().out
    assert "cost: power_mw 0.391, area_um2 651.2, delay_ns 1.41" in out and "published: mae_pct 0.046" in out


# ---------------------------------------------------------------- library
def test_library_of_the_test_circuits():
    with pytest.warns(LibraryWarning) as w:
        lib = lutcore.units.library(DATA)
    names = [e.name for e in lib]
    assert names == ["mul8s_trunc8", "mul8s_ops2", "mul8s_trunc4", "mul8s_res6", "mul8s_exact"]   # by power
    powers = [e.units.cost.get("power_mw") for e in lib]
    assert powers == sorted(powers) and lib.exact.name == "mul8s_exact" and lib.exact.units.is_exact
    for e in lib:
        assert e.error is None and e.metrics == e.units.error_metrics() and e.cost == e.units.cost
        assert os.path.exists(e.path)
    assert lutcore.units.resolve(lib["mul8s_ops2"].spec) == lib["mul8s_ops2"].units
    ref_ops2 = ((A & ~3) * (B & ~3)).astype(np.int16)
    assert np.array_equal(lib["mul8s_ops2"].units.mul, ref_ops2)
    assert np.array_equal(lib["mul8s_exact"].units.mul, exact_mul_lut())
    broken = sorted(os.path.basename(e.path) for e in lib.broken)
    assert broken == ["mul8s_crash.c", "mul8s_syntax.v"]
    assert all(e.units is None and e.error for e in lib.broken)
    msgs = " | ".join(str(x.message) for x in w)
    assert "skipping" in msgs and "killed by SIGSEGV" in msgs and "syntax error" in msgs
    assert not [x for x in w if issubclass(x.category, PublishedFigureWarning)]   # the headers are right


def test_library_mixes_units_directories_and_multi_function_c(tmp_path):
    approx.truncated(6).with_cost(power_mw=0.15).save(str(tmp_path / "t6"))
    approx.mitchell().save(str(tmp_path / "nested" / "mit"))
    (tmp_path / "two.c").write_text("#include <stdint.h>\nint16_t p(int8_t a, int8_t b) { return a * b; }\n"
                                    "int16_t q(int8_t a, int8_t b) { return a * b - 1; }\n"
                                    "static int helper(int x) { return x; }\n")
    shutil.copy(EXACT_V, tmp_path / "exact.v")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = lutcore.units.library(str(tmp_path))
    assert [e.name for e in lib] == ["t6", "mul8s_exact", "mit", "p", "q"]        # no power last, by name
    assert lib["t6"].cost["power_mw"] == 0.15 and lib["two.c:q".join([str(tmp_path) + "/", ""])].name == "q"
    assert "units library" in lib.format_table().splitlines()[0]


def test_library_bad_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such units library directory"):
        lutcore.units.library(str(tmp_path / "nope"))


def test_cli_units_table_and_png(tmp_path, capsys):
    png = tmp_path / "lib.png"
    assert main(["units", DATA, "--table", "--png", str(png)]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    rows = [ln.split()[0] for ln in lines if ln.startswith("mul8s_")]
    assert rows == ["mul8s_trunc8", "mul8s_ops2", "mul8s_trunc4", "mul8s_res6", "mul8s_exact"]
    assert "power mW" in cap.out and "broken:" in cap.out and "warning: units library" in cap.err
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert main(["units", EXACT_V, "--png", str(png)]) == 2
    assert main(["units", DATA]) == 2                        # a library, not a units directory: says --table
    assert "list them with --table" in capsys.readouterr().err


def test_library_one_entry_per_circuit(tmp_path):
    # EvoApproxLib ships X.c, X.v and X_pdk45.v (PDK cells, not defined in the file) of one circuit
    shutil.copy(EXACT_V, tmp_path / "mul8s_exact.v")
    (tmp_path / "mul8s_exact.c").write_text("#include <stdint.h>\nuint16_t mul8s_exact(uint8_t A, uint8_t B) "
                                            "{ return (uint16_t)((int8_t)A * (int8_t)B); }\n")
    (tmp_path / "mul8s_exact_pdk45.v").write_text("module mul8s_exact(input [7:0] A, input [7:0] B, "
                                                  "output [15:0] O);\n  HAX1 u(.A(A[0]), .B(B[0]), .YS(O[0]));\n"
                                                  "endmodule\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = lutcore.units.library(str(tmp_path))
    assert len(lib) == 1 and not lib.broken
    e = lib[0]
    assert e.spec.endswith("mul8s_exact.c:mul8s_exact") and e.duplicates == [str(tmp_path / "mul8s_exact.v")]
    assert e.cost["power_mw"] == 0.425                  # the .v's header: the entry takes the copy with a cost
