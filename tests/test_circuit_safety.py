"""A circuit must never take its caller down (issue 24): C models are tabulated in a
child process with a time limit, their signature checked before they run; Verilog goes
through a Yosys flow that is about linear in the design, with a time limit, and outputs
driven by z or x are refused with their own messages.

Every crash and hang case here runs the model in lutcore's child process: the pytest
process must survive each one (a regression on the old in-process ctypes call kills it).
"""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.units import hdl
from reference.units_ref import exact_mul_lut

EXACT = exact_mul_lut()
HDR = "#include <stdint.h>\n#include <stdlib.h>\n#include <stdio.h>\n"


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ---------------------------------------------------------------- C models that crash or hang
CRASH = {
    "null_deref": ("int16_t m(int8_t a, int8_t b) { if (a == 5) { volatile int *p = 0; return (int16_t)*p; } "
                   "return a * b; }", r"killed by SIGSEGV"),
    "abort": ("int16_t m(int8_t a, int8_t b) { if (a == -7 && b == 3) abort(); return a * b; }",
              r"killed by SIGABRT"),
    "exit0": ("int16_t m(int8_t a, int8_t b) { if (a == 100) exit(0); return a * b; }",
              r"exited with status 0 before returning the table"),
    "exit3": ("int16_t m(int8_t a, int8_t b) { if (b == 1) { fprintf(stderr, \"bad operand %d\\n\", b); exit(3); }"
              " return a * b; }", r"exited with status 3 \(its last words: bad operand 1\)"),
    "divzero": ("int16_t m(int8_t a, int8_t b) { volatile int z = b; return (int16_t)(a * 100 / z); }",
                r"killed by SIGFPE"),
}


@pytest.mark.parametrize("case", sorted(CRASH))
def test_crashing_c_model_is_one_error_and_the_caller_lives(tmp_path, monkeypatch, case):
    body, pattern = CRASH[case]
    path = _write(tmp_path, f"{case}.c", HDR + body + "\n")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ValueError) as ei:
        lutcore.Units.from_c(path, "m")
    msg = str(ei.value)
    print(msg)
    assert msg.startswith(f"{path}: function m: the compiled model ") and "\n" not in msg
    assert re.search(pattern, msg)
    assert os.listdir(work) == []                       # nothing left in the working directory


def test_hanging_c_model_is_killed_at_the_time_limit(tmp_path):
    path = _write(tmp_path, "hang.c", HDR + "int16_t m(int8_t a, int8_t b) { volatile int x = 1; "
                                            "if (a == 9) while (x) {} return a * b; }\n")
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"hang\.c: function m: the compiled model gave no result within "
                                         r"1\.5 s \(killed\)"):
        lutcore.Units.from_c(path, "m", timeout=1.5)
    assert time.monotonic() - t0 < 15


def test_time_limit_kills_the_whole_process_group(tmp_path):
    # the model forks a grandchild that records its pid and sleeps; the timeout must end it too
    pidfile = tmp_path / "grandchild.pid"
    path = _write(tmp_path, "fork.c", HDR + "#include <unistd.h>\n"
                  f"int16_t m(int8_t a, int8_t b) {{ if (a == 1 && b == 1) {{ if (fork() == 0) {{ "
                  f"FILE *f = fopen(\"{pidfile}\", \"w\"); fprintf(f, \"%d\", getpid()); fclose(f); "
                  f"for (;;) sleep(1); }} for (;;) sleep(1); }} return a * b; }}\n")
    with pytest.raises(ValueError, match=r"no result within 2 s"):
        lutcore.Units.from_c(path, "m", timeout=2)
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"grandchild {pid} survived the time limit")


def test_files_and_constructors_stay_in_the_child(tmp_path, monkeypatch):
    path = _write(tmp_path, "side.c", HDR + """
int main(void) { return 42; }                     /* its own main: renamed away, never run */
__attribute__((constructor)) static void ctor(void) {
    FILE *f = fopen("ctor.txt", "w"); if (f) { fputs("ran", f); fclose(f); } }
int16_t m(int8_t a, int8_t b) {
    static int once; if (!once) { FILE *f = fopen("model.txt", "w"); if (f) fclose(f); once = 1; }
    return a * b; }
""")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    pid = os.getpid()
    u = lutcore.Units.from_c(path, "m")
    assert u.is_exact and os.getpid() == pid
    assert os.listdir(work) == [] and sorted(os.listdir(tmp_path)) == ["cwd", "side.c"]


# ---------------------------------------------------------------- signatures
SIGS = {
    "pointers": ("int16_t f(int8_t *a, int8_t *b) { return *a * *b; }", r"its first parameter is a pointer"),
    "float_param": ("int16_t f(float a, int8_t b) { return a * b; }", r"its first parameter is floating-point"),
    "float_ret": ("double f(int8_t a, int8_t b) { return a * b; }", r"it returns a floating-point value"),
    "three": ("int16_t f(int8_t a, int8_t b, int8_t c) { return a * b + c; }", r"it takes 3 parameters"),
    "one": ("int16_t f(int8_t a) { return a; }", r"it takes 1 parameter\b"),
    "varargs": ("int16_t f(int8_t a, ...) { return a; }", r"variable argument list"),
    "struct": ("struct p { int v; };\nstruct p f(int8_t a, int8_t b) { struct p r = { a * b }; return r; }",
               r"it returns a struct or union"),
    "wide_param": ("int16_t f(int16_t a, int8_t b) { return a * b; }", r"its first parameter \(int16_t a\) is not"),
    "wide_ret": ("int64_t f(int8_t a, int8_t b) { return a * b; }", r"wider than 32 bits"),
}


@pytest.mark.parametrize("case", sorted(SIGS))
def test_wrong_signature_is_refused_before_running(tmp_path, case):
    body, pattern = SIGS[case]
    path = _write(tmp_path, f"{case}.c", HDR + body + "\n")
    with pytest.raises(ValueError) as ei:
        lutcore.Units.from_c(path)                          # found as the file's only function
    msg = str(ei.value)
    print(msg)
    assert msg.startswith(f"{path}: function f is declared `") and re.search(pattern, msg)
    assert "expected two 8-bit integer parameters" in msg


def test_signature_hidden_behind_a_typedef_is_caught_by_the_compiler(tmp_path):
    path = _write(tmp_path, "td.c", HDR + "typedef int8_t *byteptr;\n"
                                          "int16_t f(byteptr a, byteptr b) { return *a * *b; }\n")
    with pytest.raises(ValueError, match=r"td\.c: function f is declared `int16_t f\(byteptr a, byteptr b\)`.*"
                                         r"does not take two 8-bit integers"):
        lutcore.Units.from_c(path, "f")


@pytest.mark.parametrize("sig", ["uint16_t m(uint8_t a, uint8_t b)", "s16 m(s8 a, s8 b)", "int m(char a, signed char b)",
                                 "int32_t m(const int8_t a, const int8_t b)", "short m(int8_t a, uint8_t b)"])
def test_accepted_signatures(tmp_path, sig):
    path = _write(tmp_path, "ok.c", HDR + "typedef int8_t s8;\ntypedef int16_t s16;\n" + sig + " { return (int8_t)a * (int8_t)b >= 0 ? "
                                               "(int8_t)a * (int8_t)b : 0; }\n")
    u = lutcore.Units.from_c(path)
    assert np.array_equal(u.mul, np.maximum(EXACT, 0))


def test_compile_failure_shows_the_warnings(tmp_path):
    path = _write(tmp_path, "warn.c", HDR + "int16_t m(int8_t a, int8_t b) { int unused; return a * b + "
                                            "nosuch; }\n")
    with pytest.raises(ValueError, match=r"warn\.c: the C compiler failed: .*nosuch.*warning.*unused"):
        lutcore.Units.from_c(path, "m")


def test_bad_timeout():
    with pytest.raises(ValueError, match=r"timeout: expected a number of seconds > 0, got 0"):
        lutcore.Units.from_c(os.path.join(os.path.dirname(__file__), "circuits", "array_mul.c"), "mul8_exact",
                             timeout=0)


# ---------------------------------------------------------------- lutcore eval with a broken unit
def test_eval_with_a_crashing_c_unit_reports_it(tmp_path):
    """`lutcore eval --units none exact crash.c mitchell`: every spec is resolved before any row
    is computed, so the broken unit is one error line naming it and status 2 (not 139).  Run in
    a child here so that the old code's SIGSEGV is a failure, not the end of pytest."""
    from lutcore.models import MambaConfig, MambaLM
    from lutcore.train import Trainer
    ckpt = tmp_path / "ckpt"
    tr = Trainer(MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=256, seed=0)))
    tr.save_checkpoint(str(ckpt))
    crash = _write(tmp_path, "crash.c", HDR + CRASH["null_deref"][0] + "\n")
    data = _write(tmp_path, "data.txt", "hello approximate world " * 20)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "lutcore", "eval", "--checkpoint", str(ckpt), "--data", data,
                        "--seq-len", "16", "--units", "none", "exact", crash, "mitchell", "--out", str(out)],
                       capture_output=True, text=True, timeout=300,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    print(r.stdout, r.stderr)
    assert r.returncode == 2, r.returncode
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"lutcore eval: error: {crash}: function m: the compiled model was killed by SIGSEGV"
    assert not out.exists()                              # refused before any row was computed
