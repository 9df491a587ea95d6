"""Test circuits for the wide-multiplier netlists: generators of gate-level multipliers
written in EvoApproxLib's Verilog and C forms (its *style*, not its files), and a plain
scalar C reference of each circuit, compiled apart.

Design: a circuit is one gate list (``gate_list``: single-bit AND / OR / XOR / NOT gates,
named ``sig_N``), built by column compression of the partial-product matrix — every column,
lowest first, reduced by full adders (and a half adder for a last pair) into its sum bit,
the carries going to the next column.  Unsigned operands give the plain matrix a_i b_j;
signed ones the Baugh–Wooley matrix (the a_{n-1} b_j and a_i b_{m-1} terms complemented,
constants 2^{n-1} + 2^{m-1} + 2^{n+m-1} added, all mod 2^{n+m}).  Variants:

    exact      every term
    trunc      the terms of the K lowest columns dropped (K = ``cut_column``; the
               Baugh–Wooley constants kept): a truncated multiplier
    cut        every term kept, but the carries out of column K-1 into column K cut:
               product = (sum of the low columns' terms mod 2^K) + (sum of the others)

``write(family, variant, dir, form)`` writes the one gate list as Verilog (``"verilog"``:
``module mul12s_XXX (A, B, O)``, ``assign sig_N = A[i] & B[j];``) or C (``"c"``: the
family's EvoApproxLib form — the ``dout`` form for the wide unsigned ones, the ``S/C`` form
with Baugh–Wooley ``^1`` terms for the signed ones, ``uint16_t f(uint8_t, uint8_t)`` for
8-bit operands; ``"c_dout"``, ``"c64"`` (``uint64_t f(uint64_t A, uint64_t B)``) on
request), under the same header of metrics computed from the circuit's function:

    err = P - E   (P the circuit's product, E = A*B, both read signed for a signed family)
    MAE = mean|err|, MAE% = 100 MAE / 2^(n+m), WCE = max|err|, WCE% = 100 WCE / 2^(n+m),
    WCRE% = 100 max(|err| / |E|), MRE% = 100 mean(|err| / |E|) over the pairs with E != 0,
    EP% = 100 P(err != 0), MSE = mean(err^2)
    over every pair when n + m <= 16, else over 65,536 fixed-seed random pairs and every pair of
    the operands' edge patterns (where a truncated multiplier's worst case sits);
    PDK45_* are proxies from the gate count (AREA = 1.06 um2 per 2-input gate, PWR =
    0.0009 mW per gate, DELAY = 0.03 ns per gate on the longest path), not synthesis.

``reference_c(family, variant)`` is the same function written differently — plain
arithmetic on the operand codes (``a * b`` for exact, the matrix's rows as bit masks for
the others) — and ``compile_reference`` builds it with the system C compiler into a shared
library loaded by ctypes (``compile_c_batch``, which tests/units/circuits_adders.py uses too):
the circuits are checked against a C model compiled apart.
"""
import ctypes
import hashlib
import os
import shutil
import subprocess

import numpy as np

FAMILIES = ("8x8u", "7x7u", "8x4u", "8x2u", "11x11u", "12x12s", "12x12u", "16x16s", "16x16u")
VARIANTS = ("exact", "trunc", "cut")
FORMS = ("verilog", "c", "c_dout", "c64")


def shape(family):
    """'12x12s' -> (12, 12, True)."""
    a, rest = family.split("x")
    return int(a), int(rest[:-1]), rest[-1] == "s"


def cut_column(family):
    """The variants' K: a third of the product's width (for a signed family, below both
    operands' top bits, where the Baugh-Wooley constants sit)."""
    n, m, signed = shape(family)
    return max(1, min((n + m) // 3, min(n, m) - 2)) if signed else (n + m) // 3


def name_of(family, variant):
    n, m, s = shape(family)
    tag = hashlib.sha256(f"{family}/{variant}".encode()).hexdigest()
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    code = "".join(alphabet[int(tag[2 * i:2 * i + 2], 16) % 36] for i in range(3))
    dims = f"{n}" if n == m else f"{n}x{m}"
    return f"mul{dims}{'s' if s else 'u'}_{code}"


# ------------------------------------------------------------------------ the gate list
def _matrix(n, m, signed):
    """Columns of terms: each term ('pp', i, j, neg) or ('one',)."""
    cols = [[] for _ in range(n + m)]
    for j in range(m):
        for i in range(n):
            neg = signed and ((i == n - 1) != (j == m - 1))
            cols[i + j].append(("pp", i, j, neg))
    if signed:
        const = ((1 << (n - 1)) + (1 << (m - 1)) + (1 << (n + m - 1))) % (1 << (n + m))
        for c in range(n + m):
            if const >> c & 1:
                cols[c].append(("one",))
    return cols


def gate_list(family, variant):
    """-> (gates, outputs): gates [(out, op, x, y)] in order, op in AND/OR/XOR/NOT (y None for
    NOT), signals 'A[i]', 'B[j]', 'sig_N' or the constants '0'/'1'; outputs: the product's
    signals, LSB first."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    n, m, signed = shape(family)
    p = n + m
    k = cut_column(family)
    gates = []
    counter = [n + m]                          # EvoApproxLib's wires start above the port bits

    def new(op, x, y=None):
        out = f"sig_{counter[0]}"
        counter[0] += 1
        gates.append((out, op, x, y))
        return out

    cols = []
    for c, terms in enumerate(_matrix(n, m, signed)):
        col = []
        for t in terms:
            if variant == "trunc" and c < k and t[0] == "pp":
                continue
            if t[0] == "one":
                col.append("1")
            else:
                _, i, j, neg = t
                s = new("AND", f"A[{i}]", f"B[{j}]")
                col.append(new("NOT", s) if neg else s)
        cols.append(col)
    out = []
    for c in range(p):
        col = cols[c]
        while len(col) > 1:
            if len(col) >= 3:
                x, y, z = col.pop(0), col.pop(0), col.pop(0)
                t = new("XOR", x, y)
                s = new("XOR", t, z)
                cy = new("OR", new("AND", x, y), new("AND", t, z))
            else:
                x, y = col.pop(0), col.pop(0)
                s, cy = new("XOR", x, y), new("AND", x, y)
            col.append(s)
            if c + 1 < p and not (variant == "cut" and c == k - 1):
                cols[c + 1].append(cy)
        out.append(col[0] if col else "0")
    return gates, out


def evaluate_gates(gates, outputs, a, b, n, m):
    """The gate list on operand codes (numpy): the product's bit pattern (int64)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    val = {"0": np.zeros(a.shape, np.uint8), "1": np.ones(a.shape, np.uint8)}
    for i in range(n):
        val[f"A[{i}]"] = ((a >> i) & 1).astype(np.uint8)
    for j in range(m):
        val[f"B[{j}]"] = ((b >> j) & 1).astype(np.uint8)
    for out, op, x, y in gates:
        if op == "NOT":
            val[out] = 1 - val[x]
        elif op == "AND":
            val[out] = val[x] & val[y]
        elif op == "OR":
            val[out] = val[x] | val[y]
        else:
            val[out] = val[x] ^ val[y]
    r = np.zeros(a.shape, np.int64)
    for q, s in enumerate(outputs):
        r |= val[s].astype(np.int64) << q
    return r


def signed_value(code, bits):
    code = np.asarray(code, np.int64)
    return code - (((code >> (bits - 1)) & 1) << bits)


def metric_pairs(family):
    n, m, _ = shape(family)
    if n + m <= 16:
        i = np.arange(1 << (n + m), dtype=np.int64)
        return i >> m, i & ((1 << m) - 1)
    rng = np.random.default_rng(20260)
    # plus every pair of edge patterns (0, 1, the top bit alone, all ones ...): where a
    # truncated or cut multiplier's worst case sits
    ea = np.array(sorted({0, 1, 2, (1 << (n - 1)) - 1, 1 << (n - 1), (1 << (n - 1)) + 1, (1 << n) - 2, (1 << n) - 1}))
    eb = np.array(sorted({0, 1, 2, (1 << (m - 1)) - 1, 1 << (m - 1), (1 << (m - 1)) + 1, (1 << m) - 2, (1 << m) - 1}))
    return (np.concatenate([rng.integers(0, 1 << n, 1 << 16), np.repeat(ea, eb.size)]),
            np.concatenate([rng.integers(0, 1 << m, 1 << 16), np.tile(eb, ea.size)]))


def metrics(family, variant):
    n, m, signed = shape(family)
    gates, outs = gate_list(family, variant)
    a, b = metric_pairs(family)
    P = evaluate_gates(gates, outs, a, b, n, m)
    if signed:
        P, E = signed_value(P, n + m), signed_value(a, n) * signed_value(b, m)
    else:
        E = a * b
    err = np.abs(P - E).astype(np.float64)
    rel = err[E != 0] / np.abs(E[E != 0])           # relative errors over the pairs whose exact product is not 0
    depth = {}
    for o, _, x, y in gates:
        depth[o] = 1 + max(depth.get(x, 0), depth.get(y, 0) if y else 0)
    scale = float(1 << (n + m))
    return {"MAE%": 100 * err.mean() / scale, "MAE": err.mean(), "WCE%": 100 * err.max() / scale,
            "WCE": err.max(), "WCRE%": 100 * rel.max(), "EP%": 100 * float(np.mean(err != 0)),
            "MRE%": 100 * rel.mean(), "MSE": float(np.mean(err ** 2)),
            "PDK45_PWR": 0.0009 * len(gates), "PDK45_AREA": 1.06 * sum(g[1] != "NOT" for g in gates),
            "PDK45_DELAY": 0.03 * max(depth.values(), default=0)}


def _header(family, variant):
    mt = metrics(family, variant)
    lines = [f"// Approximate multiplier {name_of(family, variant)} ({family}, {variant}): generated for lutcore's "
             f"tests",
             "// Metrics (computed from the function; PDK45 lines are gate-count proxies)"]
    for key, unit in (("MAE%", " %"), ("MAE", ""), ("WCE%", " %"), ("WCE", ""), ("WCRE%", " %"), ("EP%", " %"),
                      ("MRE%", " %"), ("MSE", ""), ("PDK45_PWR", " mW"), ("PDK45_AREA", " um2"),
                      ("PDK45_DELAY", " ns")):
        v = mt[key]
        txt = f"{v:.3g}" if key.endswith("%") or key.startswith("PDK") else f"{v:.6g}"
        lines.append(f"// {key} = {txt}{unit}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the forms
def _verilog(family, variant):
    n, m, _ = shape(family)
    name = name_of(family, variant)
    gates, outs = gate_list(family, variant)
    lit = {"0": "1'b0", "1": "1'b1"}
    t = [_header(family, variant), "", f"module {name} (", "    A,", "    B,", "    O", ");", "",
         f"input [{n - 1}:0] A;", f"input [{m - 1}:0] B;", f"output [{n + m - 1}:0] O;", ""]
    wires = [g[0] for g in gates]
    for i in range(0, len(wires), 12):
        t.append("wire " + ",".join(wires[i:i + 12]) + ";")
    t.append("")
    sym = {"AND": "&", "OR": "|", "XOR": "^"}
    for o, op, x, y in gates:
        x, y = lit.get(x, x), lit.get(y, y)
        t.append(f"assign {o} = ~{x};" if op == "NOT" else f"assign {o} = {x} {sym[op]} {y};")
    t.append("")
    for q, s in enumerate(outs):
        t.append(f"assign O[{q}] = {lit.get(s, s)};")
    t += ["", "endmodule", ""]
    return "\n".join(t), name


def _c_types(family, form):
    n, m, signed = shape(family)
    if form == "c64":
        return "uint64_t", "uint64_t", "uint64_t"
    if signed:
        return "int32_t", "int16_t", "int16_t"
    if form == "c" and max(n, m) <= 8:
        return "uint16_t", "uint8_t", "uint8_t"
    return ("uint32_t" if n + m > 16 else "uint16_t"), ("const uint16_t" if n > 8 else "const uint8_t"), \
        ("const uint16_t" if m > 8 else "const uint8_t")


def _c(family, variant, form):
    n, m, signed = shape(family)
    p = n + m
    name = name_of(family, variant)
    gates, outs = gate_list(family, variant)
    ret, ta, tb = _c_types(family, form)
    sc = signed and form == "c"
    if sc:
        # the S/C form: sums S_c_k, carries and everything else C_k, NOT as ^1
        ren = {}
        for o, op, x, y in gates:
            k = len(ren)
            ren[o] = f"{'S' if op in ('XOR', 'NOT') else 'C'}_{k // 16}_{k % 16}"
    else:
        ren = {g[0]: g[0].replace("sig_", "dout_") for g in gates}

    def s(x):
        if x in ("0", "1"):
            return x
        if x.startswith("A[") or x.startswith("B["):
            v, i = x[0], int(x[2:-1])
            return f"(({v}>>{i})&1)" if sc else f"(({v} >> {i})&1)"
        return ren[x]
    t = [_header(family, variant), "#include <stdint.h>", "#include <stdlib.h>", ""]
    t.append(f"{ret} {name}({ta} A,{tb} B)" if not sc else f"{ret} {name}({ta} A, {tb} B)")
    t.append("{")
    names = [ren[g[0]] for g in gates]
    var_t = "uint16_t" if sc else "uint8_t"
    if sc:
        t.append(f"  {ret} P, P_;")
        t.append(f"  {var_t} tmp, " + ", ".join(names) + ";")
    else:
        t.append(f"  {var_t} " + ", ".join(names) + ";")
        t.append(f"  {ret} O;")
    t.append("")
    sym = {"AND": "&", "OR": "|", "XOR": "^"}
    for o, op, x, y in gates:
        if sc:
            rhs = f"(({s(x)})^1)" if op == "NOT" else f"({s(x)} {sym[op]} {s(y)})"
            t.append(f"  {ren[o]} = {rhs};")
        else:
            rhs = f"~{s(x)}" if op == "NOT" else f"{s(x)}{sym[op]}{s(y)}"
            t.append(f"  {ren[o]}={rhs};")
    t.append("")
    acc = "P" if sc else "O"
    t.append(f"  {acc} = 0;")
    for q, sig in enumerate(outs):
        t.append(f"  {acc} |= ({s(sig)}&1) << {q};")
    if sc and p < 32:
        # the product's sign bit extended through the int32 (Evo's signed models return a value)
        t.append(f"  tmp = 1;")
        t.append(f"  P_ = P ^ (tmp << {p - 1});")
        t.append(f"  P = P_ - (1 << {p - 1});")
    t.append(f"  return {acc};")
    t.append("}")
    t.append("")
    return "\n".join(t), name


def source(family, variant, form):
    """(text, function/module name) of the circuit in ``form``."""
    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    if form == "verilog":
        return _verilog(family, variant)
    if form in ("c", "c_dout", "c64"):
        if form != "c" and shape(family)[2]:
            raise ValueError(f"form {form!r} is for unsigned families")
        return _c(family, variant, form)
    raise ValueError(f"form: expected one of {FORMS}, got {form!r}")


def write(family, variant, dir, form):
    """Write the circuit into ``dir`` -> (path, function or module name)."""
    text, name = source(family, variant, form)
    ext = ".v" if form == "verilog" else ".c"
    path = os.path.join(os.fspath(dir), f"{name}_{form}{ext}")
    with open(path, "w") as f:
        f.write(text)
    return path, name


# ------------------------------------------------------------------------ the references
_REF = """#include <stdint.h>
/* {family}, {variant}: the product's bit pattern for operand codes a (n = {n} bits), b (m = {m}). */
static const int N = {n}, M = {m}, P = {p}, K = {k}, SIGNED = {signed}, MODE = {mode};   /* 0 exact, 1 trunc, 2 cut */

static int64_t value(int64_t code, int bits) {{ return SIGNED ? code - ((code >> (bits - 1) & 1) << bits) : code; }}

uint64_t {fn}(uint64_t a, uint64_t b)
{{
    uint64_t pmask = (P == 64) ? ~0ULL : ((1ULL << P) - 1), kmask = (1ULL << K) - 1;
    if (MODE == 0)
        return (uint64_t)(value((int64_t)a, N) * value((int64_t)b, M)) & pmask;
    /* the rows of the partial-product matrix, each a bit pattern (its bits in distinct columns) */
    uint64_t rows[80];
    int r = 0;
    int s = SIGNED;
    uint64_t alow = s ? (a & ((1ULL << (N - 1)) - 1)) : a;          /* a without its sign bit */
    uint64_t atop = s ? (a >> (N - 1) & 1) : 0, btop = s ? (b >> (M - 1) & 1) : 0;
    for (int j = 0; j < M - s; ++j)
        rows[r++] = ((b >> j) & 1) ? alow << j : 0;
    if (s) {{
        uint64_t blow = b & ((1ULL << (M - 1)) - 1);
        rows[r++] = (atop & btop) << (N + M - 2);
        rows[r++] = (~(atop ? blow : 0) & ((1ULL << (M - 1)) - 1)) << (N - 1);   /* ~(a_{{n-1}} b_j) */
        rows[r++] = (~(btop ? alow : 0) & ((1ULL << (N - 1)) - 1)) << (M - 1);   /* ~(a_i b_{{m-1}}) */
    }}
    uint64_t konst = s ? (((1ULL << (N - 1)) + (1ULL << (M - 1)) + (1ULL << (N + M - 1))) & pmask) : 0;
    uint64_t low = 0, high = 0;
    for (int q = 0; q < r; ++q) {{
        low += rows[q] & kmask;
        high += rows[q] & ~kmask;
    }}
    if (MODE == 1)                                    /* trunc: the low columns' terms dropped */
        return (high + konst) & pmask;
    /* cut: no carry from column K-1 into column K (the constants sit in their columns) */
    return ((low + (konst & kmask)) & kmask) + ((high + (konst & ~kmask)) & pmask & ~kmask);
}}
"""


def reference_c(family, variant):
    """(C source, function name): ``uint64_t fn(uint64_t a, uint64_t b)`` = the circuit's
    product bit pattern for operand codes a, b, written as arithmetic."""
    n, m, signed = shape(family)
    fn = "ref_" + name_of(family, variant)
    return _REF.format(family=family, variant=variant, n=n, m=m, p=n + m, k=cut_column(family),
                       signed=int(signed), mode=VARIANTS.index(variant), fn=fn), fn


def compile_reference(family, variant, dir):
    """Compile ``reference_c(family, variant)`` with the system C compiler into a shared
    library in ``dir`` -> f(a_codes, b_codes) -> int64 product patterns (numpy)."""
    text, fn = reference_c(family, variant)
    return compile_c_batch(text, [fn], dir, fn)[fn]


def compile_c_batch(text, fns, dir, stem):
    """Compile C source ``text`` defining ``uint64_t fn(uint64_t a, uint64_t b)`` for each name
    in ``fns`` (and a batch loop over each, added here) into ``dir``/``stem``.so with the system
    C compiler, loaded by ctypes -> {fn: f(a, b) -> int64 array} (a, b integer arrays, broadcast)."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler for the references")
    loops = "".join(f"\nvoid {fn}_batch(const int64_t *a, const int64_t *b, int64_t *out, long n)\n"
                    f"{{ for (long i = 0; i < n; ++i) out[i] = (int64_t){fn}((uint64_t)a[i], (uint64_t)b[i]); }}\n"
                    for fn in fns)
    src = os.path.join(os.fspath(dir), stem + ".c")
    so = os.path.join(os.fspath(dir), stem + ".so")
    with open(src, "w") as f:
        f.write(text + loops)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", so, src], check=True, capture_output=True)
    lib = ctypes.CDLL(so)
    p = ctypes.POINTER(ctypes.c_int64)
    out = {}
    for fn in fns:
        batch = getattr(lib, fn + "_batch")
        batch.argtypes = [p, p, p, ctypes.c_long]
        batch.restype = None

        def f(a, b, batch=batch):
            a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
            a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
            r = np.empty(a.shape, np.int64)
            batch(a.ctypes.data_as(p), b.ctypes.data_as(p), r.ctypes.data_as(p), a.size)
            return r
        f.lib = lib
        out[fn] = f
    return out
