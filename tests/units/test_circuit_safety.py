"""A circuit must never take its caller down (issue 24): C models are tabulated in a
child process with a time limit, their signature checked before they run; Verilog goes
through a Yosys flow that is about linear in the design, with a time limit, and outputs
driven by z or x are refused with their own messages.

Every crash and hang case here runs the model in lutcore's child process: the pytest
process must survive each one (a regression on the old in-process ctypes call kills it).
"""
from _paths import ROOT, TESTS  # noqa: F401
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.units import hdl
from reference.units_ref import exact_mul_lut

EXACT = exact_mul_lut()
HDR = "#include <stdint.h>\n#include <stdlib.h>\n#include <stdio.h>\n"
_CHILD = """import sys, lutcore
fn = sys.argv[2] or None
kw = {} if sys.argv[3] == "" else {"timeout": float(sys.argv[3])}
try:
    u = lutcore.Units.from_c(sys.argv[1], fn, **kw)
    print("OK", u.name, u.is_exact)
except ValueError as e:
    print("ValueError:", e)
"""


def from_c_in_child(path, function=None, timeout=None, cwd=None):
    """Units.from_c in a fresh Python: on code that runs the model in-process a crash ends
    that child, not pytest, and the test fails on its status.  -> what it printed."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _CHILD, path, function or "", "" if timeout is None else str(timeout)],
                       capture_output=True, text=True, timeout=120, cwd=cwd or ROOT, env=env)
    assert r.returncode == 0, f"the caller died: status {r.returncode}; {r.stderr[-1500:]}"
    return r.stdout.strip()


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
    # a model that wants more memory than lutcore gives it (hdl.CHILD_MEMORY, 2 GiB) gets NULL
    "memory": ("int16_t m(int8_t a, int8_t b) { static char *big; if (!big) { big = malloc((size_t)3 << 30); "
               "if (!big) { fprintf(stderr, \"out of memory\\n\"); exit(4); } } return a * b; }",
               r"exited with status 4 \(its last words: out of memory\)"),
}


@pytest.mark.parametrize("case", sorted(CRASH))
def test_crashing_c_model_is_one_error_and_the_caller_lives(tmp_path, monkeypatch, case):
    body, pattern = CRASH[case]
    path = _write(tmp_path, f"{case}.c", HDR + body + "\n")
    work = tmp_path / "cwd"
    work.mkdir()
    out = from_c_in_child(path, "m", cwd=str(work))
    print(out)
    assert out.startswith(f"ValueError: {path}: function m: the compiled model ") and "\n" not in out
    assert re.search(pattern, out)
    assert os.listdir(work) == []                       # nothing left in the working directory


def test_hanging_c_model_is_killed_at_the_time_limit(tmp_path):
    path = _write(tmp_path, "hang.c", HDR + "int16_t m(int8_t a, int8_t b) { volatile int x = 1; "
                                            "if (a == 9) while (x) {} return a * b; }\n")
    t0 = time.monotonic()
    out = from_c_in_child(path, "m", timeout=1.5)
    assert re.search(r"hang\.c: function m: the compiled model gave no result within 1\.5 s \(killed\)", out), out
    assert time.monotonic() - t0 < 15


def test_time_limit_kills_the_whole_process_group(tmp_path):
    # the model forks a grandchild that records its pid and sleeps; the timeout must end it too
    pidfile = tmp_path / "grandchild.pid"
    path = _write(tmp_path, "fork.c", HDR + "#include <unistd.h>\n"
                  f"int16_t m(int8_t a, int8_t b) {{ if (a == 1 && b == 1) {{ if (fork() == 0) {{ "
                  f"FILE *f = fopen(\"{pidfile}\", \"w\"); fprintf(f, \"%d\", getpid()); fclose(f); "
                  f"for (;;) sleep(1); }} for (;;) sleep(1); }} return a * b; }}\n")
    out = from_c_in_child(path, "m", timeout=2)
    assert "no result within 2 s" in out, out
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
    "wide_ret": ("__int128 f(int8_t a, int8_t b) { return a * b; }", r"wider than 64 bits"),
}


@pytest.mark.parametrize("case", sorted(SIGS))
def test_wrong_signature_is_refused_before_running(tmp_path, case):
    body, pattern = SIGS[case]
    path = _write(tmp_path, f"{case}.c", HDR + body + "\n")
    msg = from_c_in_child(path).removeprefix("ValueError: ")    # found as the file's only function
    print(msg)
    assert msg.startswith(f"{path}: function f is declared `") and re.search(pattern, msg)
    assert "expected two integer parameters and an integer return" in msg


def test_parameters_that_do_not_say_the_widths_are_refused_after_the_compiler_reads_them(tmp_path):
    path = _write(tmp_path, "w.c", HDR + "typedef int16_t s16;\nint32_t f(s16 a, int8_t b) { return a * b; }\n")
    msg = from_c_in_child(path, "f").removeprefix("ValueError: ")
    assert re.search(r"w\.c: function f is declared `int32_t f\(s16 a, int8_t b\)`: its parameters \(16 and 8 bits\) "
                     r"do not say the operands' widths and signedness: state them", msg), msg


def test_signature_hidden_behind_a_typedef_is_caught_by_the_compiler(tmp_path):
    path = _write(tmp_path, "td.c", HDR + "typedef int8_t *byteptr;\n"
                                          "int16_t f(byteptr a, byteptr b) { return *a * *b; }\n")
    out = from_c_in_child(path, "f")
    assert re.search(r"td\.c: function f is declared `int16_t f\(byteptr a, byteptr b\)`.*does not take two "
                     r"integers and return an integer", out), out


@pytest.mark.parametrize("sig", ["uint16_t m(uint8_t a, uint8_t b)", "s16 m(s8 a, s8 b)", "int m(char a, signed char b)",
                                 "int32_t m(const int8_t a, const int8_t b)", "short m(int8_t a, uint8_t b)",
                                 "int64_t m(int8_t a, int8_t b)"])
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
        lutcore.Units.from_c(os.path.join(TESTS, "circuits", "array_mul.c"), "mul8_exact",
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
                       cwd=ROOT)
    print(r.stdout, r.stderr)
    assert r.returncode == 2, r.returncode
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"lutcore eval: error: {crash}: function m: the compiled model was killed by SIGSEGV"
    assert not out.exists()                              # refused before any row was computed


# ---------------------------------------------------------------- Verilog: a flow about linear in the design
_OPS = {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}


def random_netlist(n_gates, seed, mux=False):
    """A random combinational netlist of two-input gates (and 2:1 muxes) over a[7:0], b[7:0]
    with a 16-bit output: (Verilog text, numpy reference table of the same logic)."""
    rng = np.random.default_rng(seed)
    i = np.arange(65536)
    a, b = i >> 8 & 0xFF, i & 0xFF                         # the table's index: a = high byte
    names = [f"a[{k}]" for k in range(8)] + [f"b[{k}]" for k in range(8)]
    vals = [(a >> k) & 1 for k in range(8)] + [(b >> k) & 1 for k in range(8)]
    lines = [f"module rnd{seed}(input [7:0] a, input [7:0] b, output [15:0] p);"]
    for g in range(n_gates):
        x = len(names) - 1 - int(rng.integers(0, min(len(names), 48)))     # mostly recent nets: deep logic
        y = int(rng.integers(0, len(names)))
        w = f"w{g}"
        kind = int(rng.integers(0, 7 if mux else 6))
        if kind == 6:
            s = int(rng.integers(0, len(names)))
            lines.append(f"  wire {w} = {names[s]} ? {names[x]} : {names[y]};")
            vals.append(np.where(vals[s] == 1, vals[x], vals[y]))
        else:
            op = "&|^"[kind % 3]
            v = _OPS[op](vals[x], vals[y])
            if kind >= 3:
                lines.append(f"  wire {w} = ~({names[x]} {op} {names[y]});")
                v = 1 - v
            else:
                lines.append(f"  wire {w} = {names[x]} {op} {names[y]};")
            vals.append(v)
        names.append(w)
    lines.append("  assign p = {" + ", ".join(reversed(names[-16:])) + "};")
    lines.append("endmodule")
    ref = sum(vals[-16 + k].astype(np.int64) << k for k in range(16))
    ref = (ref - ((ref >> 15 & 1) << 16)).astype(np.int16)
    return "\n".join(lines) + "\n", ref


@pytest.mark.parametrize("n,seed,mux", [(60, 1, False), (300, 2, True), (900, 3, True)])
def test_random_netlists_match_a_numpy_reference(tmp_path, n, seed, mux):
    text, ref = random_netlist(n, seed, mux)
    path = _write(tmp_path, f"rnd{seed}.v", text)
    u = lutcore.Units.from_verilog(path, timeout=60)
    assert np.array_equal(u.mul, ref), int(np.count_nonzero(u.mul != ref))


def test_five_thousand_gates_within_the_limit(tmp_path):
    """Issue 24: 5,000 two-input gates took more than 10 minutes through `synth`; the flow
    must finish within 60 s (timeout=60 makes any slower run an error)."""
    text, ref = random_netlist(5000, 7)
    path = _write(tmp_path, "rnd5000.v", text)
    u = lutcore.Units.from_verilog(path, timeout=60)
    assert np.array_equal(u.mul, ref)
    assert u.cost["cells"] > 1000 and u.cost["transistors"] > 4 * u.cost["cells"] // 2


def test_verilog_time_limit_is_a_clear_error(tmp_path, monkeypatch):
    text, _ = random_netlist(3000, 8)
    path = _write(tmp_path, "slow.v", text)
    monkeypatch.setattr(hdl, "_cache", {})
    with pytest.raises(ValueError, match=r"slow\.v: Yosys gave no result within 0\.05 s \(it was in: .*\); "
                                         r"pass a larger timeout="):
        lutcore.Units.from_verilog(path, timeout=0.05)


def test_progress_line_for_a_long_run(tmp_path, monkeypatch, capsys):
    text, _ = random_netlist(2000, 9)
    path = _write(tmp_path, "long.v", text)
    monkeypatch.setattr(hdl, "PROGRESS_AFTER", 0.01)
    lutcore.Units.from_verilog(path, timeout=60)
    err = capsys.readouterr().err
    assert re.search(r"Yosys: .* \(\d+ s of at most 60\)", err), err


UNDEFINED = {
    "z_mux": ("assign p = a[0] ? 16'bz : {8'b0, a};",
              r"output p bit 0 is high-impedance \(z, or a value that depends on one\) at a=1, b=0 and 32767 other "
              r"pairs: a tri-state or floating output"),
    "z_const": ("assign p = {15'b0, 1'bz};", r"output p bit 0 is high-impedance .* at a=0, b=0"),
    "x_mux": ("assign p = (a == 8'd3) ? 16'bx : a * b;",
              r"output p bit 0 is undefined \(x\) at a=3, b=0 and 255 other pairs"),
    "x_through_logic": ("wire [15:0] q = a * b; assign p = q ^ {b[7], 15'b0} ^ ({16{a[7]}} & 16'bx);",
                        r"output p bit 0 is undefined \(x\) at a=-128, b=0 and 32767 other pairs"),
    "undriven_wire": ("wire w; assign p = {a, b} & {16{w | a[1]}};",
                      r"output p bit 0 is undefined \(x\) at a=0, b=1 .*undriven wire"),
}


@pytest.mark.parametrize("case", sorted(UNDEFINED))
def test_z_and_x_outputs_are_refused_with_their_own_messages(tmp_path, case):
    body, pattern = UNDEFINED[case]
    path = _write(tmp_path, f"{case}.v", f"module m(input [7:0] a, input [7:0] b, output [15:0] p);\n  {body}\n"
                                         f"endmodule\n")
    with pytest.raises(ValueError) as ei:
        lutcore.Units.from_verilog(path)
    msg = str(ei.value)
    print(msg)
    assert msg.startswith(path + ": ") and re.search(pattern, msg)


def test_x_masked_by_logic_is_fine(tmp_path):
    # x & 0 is 0 and x | 1 is 1 in every completion: the output is defined
    path = _write(tmp_path, "masked.v", "module m(input signed [7:0] a, input signed [7:0] b, output [15:0] p);\n"
                                        "  wire signed [15:0] q = a * b;\n"
                                        "  assign p = (q & ~16'h0) | (16'bx & 16'h0);\nendmodule\n")
    assert lutcore.Units.from_verilog(path).is_exact


def test_uint16_return_is_read_as_twos_complement(tmp_path):
    # EvoApproxLib's signed models: uint16_t mul8s_X(uint8_t A, uint8_t B) returning the product's bits
    path = _write(tmp_path, "evo.c", HDR + "uint16_t mul8s_t(uint8_t A, uint8_t B) "
                                           "{ return (uint16_t)((int8_t)A * (int8_t)B); }\n")
    u = lutcore.Units.from_c(path)
    assert u.is_exact and "16-bit unsigned return read as two's complement" in u.source
    wide = _write(tmp_path, "wide.c", HDR + "uint32_t m(uint8_t A, uint8_t B) "
                                            "{ return (uint16_t)((int8_t)A * (int8_t)B); }\n")
    with pytest.raises(ValueError, match=r"wide\.c: function m gives 65408 at a=1, b=-128: a 8s x 8s -> 16s product "
                                         r"has 16 bits, and the bits above them are not an extension"):
        lutcore.Units.from_c(wide)


# ---------------------------------------------------------------- every process ends with the call (issue 38)
LINUX = sys.platform.startswith("linux")
PROC = os.path.isdir("/proc/self")
DETACH = """#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
/* a grandchild that leaves the model's session (double fork + setsid) and sleeps forever;
   its pid is in the file before this returns */
static void detach(const char *pidfile) {
    pid_t p = fork();
    if (p == 0) {
        setsid();
        pid_t g = fork();
        if (g == 0) for (;;) sleep(1);
        FILE *f = fopen(pidfile, "w"); fprintf(f, "%d", (int)g); fclose(f);
        _exit(0);
    }
    waitpid(p, 0, 0);
}
"""


def _alive(pid):
    """Whether process ``pid`` runs (gone or a zombie: False)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _left_after(pids, seconds):
    """The pids still running ``seconds`` from now (checked every 50 ms; [] at once when none);
    those are then killed, so that a failing test leaves nothing behind."""
    end = time.monotonic() + seconds
    left = [p for p in pids if _alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [p for p in left if _alive(p)]
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return left


def _read_pid(f, proc=None, seconds=60):
    """The pid a model wrote to file ``f`` (waiting for it while ``proc``, if given, runs)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if f.exists() and f.read_text().strip():
            return int(f.read_text())
        assert proc is None or proc.poll() is None, f"the caller ended first: {proc.communicate()}"
        time.sleep(0.05)
    pytest.fail(f"no pid in {f} within {seconds} s")


def _procs_with(marker):
    """{pid: its address-space limit (/proc/PID/limits, bytes or 'unlimited')} of every process
    whose command line holds ``marker``, except Pythons (this one, lutcore's keeper)."""
    out = {}
    py = os.path.realpath(sys.executable)
    for n in os.listdir("/proc"):
        if not n.isdigit() or int(n) == os.getpid():
            continue
        try:
            with open(f"/proc/{n}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if marker.encode() not in b"\0".join(cmd) or os.path.realpath(cmd[0].decode()) == py:
                continue
            with open(f"/proc/{n}/limits") as f:
                lim = next(ln.split()[3] for ln in f if ln.startswith("Max address space"))
            out[int(n)] = int(lim) if lim.isdigit() else lim
        except (OSError, StopIteration, IndexError, UnicodeDecodeError):
            pass
    return out


# includes itself twice per level, 60 levels deep: the preprocessor never finishes
SLOW_TO_COMPILE = """#ifndef ONCE
#define ONCE
short m(signed char a, signed char b) { return (short)(a * b); }
#endif
#if __INCLUDE_LEVEL__ < 60
#include __FILE__
#include __FILE__
#endif
"""


@pytest.mark.skipif(not PROC, reason="reads /proc")
def test_compile_time_limit_ends_every_compiler_process(tmp_path):
    """Issue 38 (12): a compile that reaches the time limit left cc1 running, an orphan with no
    memory limit.  Every process of the compiler must carry CHILD_MEMORY and end with the call."""
    d = tmp_path / "slowcc"                  # the compiler's -I argument: how its processes are found
    d.mkdir()
    path = _write(d, "slow.c", SLOW_TO_COMPILE)
    got = {}

    def call():
        try:
            lutcore.Units.from_c(path, "m", timeout=3)
        except ValueError as e:
            got["error"] = str(e)

    t = threading.Thread(target=call)
    t.start()
    seen = {}
    while t.is_alive():
        for pid, lim in _procs_with(str(d)).items():
            seen.setdefault(pid, lim)
        time.sleep(0.05)
    t.join()
    print(got, seen)
    assert got.get("error", "").startswith(f"{path}: the C compiler gave no result within 3 s")
    assert seen, "no compiler process was found while the call ran"
    assert all(lim == hdl.CHILD_MEMORY for lim in seen.values()), seen
    assert _left_after(list(seen), 10) == []


def test_model_output_is_capped(tmp_path, monkeypatch):
    """Issue 38 (13): what a model writes was not capped (2 GB in 3 s).  Beyond CHILD_OUTPUT on
    its stdout + stderr, or in any one file, the model is refused."""
    monkeypatch.setattr(hdl, "CHILD_OUTPUT", 1 << 20)
    for name, sink, said in (("chatty.c", "stdout", "wrote more than 1 MiB to its standard output and error"),
                             ("filler.c", 'fopen("big.bin", "wb")', "tried to write a file larger than 1 MiB")):
        src = _write(tmp_path, name, HDR + "#include <string.h>\nint16_t m(int8_t a, int8_t b) {\n"
                     "  static int once; static char buf[1 << 16];\n"
                     f"  if (!once) {{ once = 1; memset(buf, 'x', sizeof buf); FILE *f = {sink};\n"
                     "    for (int i = 0; i < 64; ++i) fwrite(buf, 1, sizeof buf, f); fflush(f); }\n"
                     "  return a * b; }\n")
        with pytest.raises(ValueError, match=rf"^{re.escape(src)}: function m: the compiled model {said}"):
            lutcore.Units.from_c(src, "m")
    # what a model may write is not lost by the cap: a line per pair is fine
    talker = _write(tmp_path, "talker.c", HDR + "int16_t m(int8_t a, int8_t b) { printf(\"%d %d\\n\", a, b); "
                                                "return a * b; }\n")
    assert lutcore.Units.from_c(talker, "m").is_exact


_CALLER = """import sys, lutcore
lutcore.Units.from_c(sys.argv[1], "m", timeout=600)
"""


@pytest.mark.skipif(not PROC, reason="reads /proc")
def test_model_ends_with_a_caller_killed_by_sigkill(tmp_path):
    """Issue 38 (14): a model that never returns, tabulated by a caller that is then killed with
    SIGKILL, kept running forever.  It must end with its caller, and so must a grandchild it
    detached from its session (double fork + setsid); the keeper removes the temporary
    directory the caller can no longer remove."""
    me, grand, where = tmp_path / "model.pid", tmp_path / "grandchild.pid", tmp_path / "model.cwd"
    path = _write(tmp_path, "forever.c", HDR + DETACH + "int16_t m(int8_t a, int8_t b) {\n"
                  f"  char cwd[4096]; FILE *w = fopen(\"{where}\", \"w\"); fputs(getcwd(cwd, sizeof cwd), w); "
                  f"fclose(w);\n"
                  f"  FILE *f = fopen(\"{me}\", \"w\"); fprintf(f, \"%d\", (int)getpid()); fclose(f);\n"
                  f"  detach(\"{grand}\");\n"
                  "  for (;;) sleep(1);\n  return a * b; }\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    caller = subprocess.Popen([sys.executable, "-c", _CALLER, path], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pids = [_read_pid(grand, caller), _read_pid(me, caller)]
        assert all(_alive(p) for p in pids)
    finally:
        caller.kill()
        caller.communicate()
    assert _left_after(pids, 10) == []
    tmp = where.read_text()                              # lutcore's temporary directory goes too
    assert os.path.basename(tmp).startswith("lutcore-cc-")
    end = time.monotonic() + 10
    while os.path.exists(tmp) and time.monotonic() < end:
        time.sleep(0.05)
    assert not os.path.exists(tmp)


@pytest.mark.skipif(not PROC, reason="reads /proc")
def test_detached_grandchild_ends_with_the_call(tmp_path):
    """Issue 38 (also noticed): a model that double-forks and calls setsid() outlived from_c,
    whose kill reached only the model's process group."""
    grand = tmp_path / "grandchild.pid"
    path = _write(tmp_path, "detach.c", HDR + DETACH + "int16_t m(int8_t a, int8_t b) {\n"
                  f"  static int once; if (!once) {{ once = 1; detach(\"{grand}\"); }}\n  return a * b; }}\n")
    assert lutcore.Units.from_c(path, "m").is_exact
    assert _left_after([_read_pid(grand, seconds=1)], 10) == []


# ---------------------------------------------------------------- exactly the named file, any function name
@pytest.mark.parametrize("folder", ['we"ird', "back\\slash", "sp ace $`'", "new\nline"])
def test_any_path_compiles_exactly_that_file(tmp_path, folder):
    """Issue 38 (15): a `"` in the path compiled another file (the decoy below, whose name is
    the path cut at the quote); a `\\` made a valid model fail."""
    (tmp_path / "we\\").write_text("short m(signed char a, signed char b) { return 0; }\n")      # the decoy
    d = tmp_path / folder
    d.mkdir()
    (d / "helper.h").write_text("#define PRODUCT(a, b) ((a) * (b))\n")                  # found beside it
    path = _write(d, "m.c", '#include "helper.h"\nshort m(signed char a, signed char b) '
                            '{ return (short)PRODUCT(a, b); }\n')
    u = lutcore.Units.from_c(path, "m")
    assert u.is_exact and u.loaded_from == f"{path}:m"
    assert lutcore.units.resolve(path).is_exact


@pytest.mark.parametrize("name", ["a", "b", "out", "f", "argc", "argv", "main", "int64_t", "fopen_",
                                  "lutcore_user_main_", "check", "tabulate"])
def test_any_function_name(tmp_path, name):
    """Issue 38 (15): a model whose function is named a, b or out was refused with a compiler
    error about lutcore's own driver."""
    path = _write(tmp_path, "n.c", f"short {name}(signed char a, signed char b) {{ return (short)(a * b); }}\n")
    u = lutcore.Units.from_c(path, name)
    assert u.is_exact and u.name == name
    assert lutcore.Units.from_c(path).name == name                     # found as the only one too


def test_compile_error_names_the_users_file_and_line(tmp_path):
    path = _write(tmp_path, "typo.c", "short m(signed char a, signed char b)\n{\n  return a * ;\n}\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(path)}: the C compiler failed: {re.escape(path)}:3:\d+: "
                                         rf"error"):
        lutcore.Units.from_c(path, "m")
    link = _write(tmp_path, "link.c", "int nowhere(int);\nshort m(signed char a, signed char b) "
                                      "{ return (short)nowhere(a * b); }\n")
    with pytest.raises(ValueError, match=r"link\.c: the C compiler failed: .*undefined reference to .nowhere"):
        lutcore.Units.from_c(link, "m")


def test_a_named_pipe_is_not_opened(tmp_path):
    """Issue 38 (17): a named pipe called *.c is refused (or skipped by a library), never opened."""
    fifo = tmp_path / "pipe.c"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(fifo))}: a named pipe, not a regular file"):
        lutcore.Units.from_c(str(fifo), "m")
    vfifo = tmp_path / "pipe.v"
    os.mkfifo(vfifo)
    with pytest.raises(ValueError, match=r"pipe\.v: a named pipe, not a regular file"):
        lutcore.Units.from_verilog(str(vfifo))
