"""Test circuits for the adders: gate-level adders written in EvoApproxLib's Verilog and C
forms (its *style*, not its files), with headers of metrics computed here, and a plain C
reference of each circuit, compiled apart.

Design: a circuit is one gate list (``gate_list``: single-bit AND / OR / XOR / NOT gates
named ``sig_N``) over two ``n``-bit operands A (the accumulator's register) and B, giving
``q`` output bits: a family (``FAMILIES``) says n, the signedness and q -- ``8u`` 8-bit
unsigned with the carry out (9 outputs), ``8se`` signed with the sign-extended sum (9), ``8s``
signed and wrapping (8 outputs), as EvoApproxLib's add8u / add8se / add8s.  Bits at and above
``k`` (= ``cut(n)``) are a ripple-carry adder (full adders: t = x ^ y, s = t ^ c, c' = x & y |
t & c; a signed family's extra output bit is a_{n-1} ^ b_{n-1} ^ c_n); the variants differ
below k:

    exact      every bit added (k ignored)
    loa        lower-part OR adder: bit i < k is a_i | b_i, the carry into bit k a_{k-1} & b_{k-1}
    trunc      bits below k are 0 and no carry reaches bit k
    copya      bits below k are A's own (the register's low bits kept; B's dropped): not
               symmetric in A and B, so an operand order read wrongly shows
    seg        the carry chain cut into segments of k bits: no carry crosses a segment's top
               (the last segment's carry still reaches the extra output bit)

``write(family, variant, dir, form)`` writes the one gate list as

    verilog     ``module add8se_XXX (A, B, O); input [7:0] A; ...`` (``input [7:0] A, B;`` unsigned)
    verilog_ba  the same with B's port declared first (``module ... (B, A, O)``)
    c           the family's EvoApproxLib C form: signed ``uint64_t add8se_XXX(const uint64_t B,const
                uint64_t A)`` with ``dout_N=((A >> i)&1)&((B >> i)&1);``; unsigned ``uint64_t
                add8u_XXX(uint64_t a, uint64_t b)`` over bit arrays ``wa[]``, ``wb[]``
    c_ab        the signed form with the parameters in (A, B) order
    c_value     not EvoApproxLib's: ``int32_t adder_<family>_<variant>(int32_t a, int32_t b)``
                returning the output as a value (sign-extended for a signed family)

under the same header of EvoApproxLib's adder metrics, computed here from the gate list:

    err = O - (A + B)     (O read at q bits, both signed for a signed family)
    over every pair when 2n <= 20, else 2^20 fixed-seed random pairs and every pair of edge
    patterns; for a wrapping family (q = n) only the pairs whose exact sum fits in n bits
    MAE = mean|err|, WCE = max|err|, MSE = mean(err^2), EP% = 100 P(err != 0),
    WCRE% / MRE% = 100 max / mean of |err| / |A + B| over the pairs with A + B != 0,
    MAE% = 100 round(MAE, 1) / R, WCE% = 100 WCE / R  with R = 2^(q-1) signed, 2^q unsigned
    (EvoApproxLib derives MAE% from its MAE rounded to one decimal; so do these headers);
    PDK45_* proxies from the gate count (not synthesis).

``reference_c()`` is every circuit written again as arithmetic on the operands' patterns (one
function per family and variant, ``ref_<family>_<variant>``), and ``compile_references``
builds it once with the system C compiler (``circuits_wide.compile_c_batch``).
"""
import functools
import hashlib
import os

import numpy as np

from circuits_wide import compile_c_batch, evaluate_gates as _evaluate_wide

FAMILIES = ("8u", "8s", "8se", "9se", "12u", "12se", "16u", "16se")
VARIANTS = ("exact", "loa", "trunc", "copya", "seg")
FORMS = ("verilog", "verilog_ba", "c", "c_ab", "c_value")


def shape(family):
    """'8se' -> (8, True, 9): operand bits, signed, output bits."""
    kind = family.lstrip("0123456789")
    n = int(family[:len(family) - len(kind)])
    return n, kind != "u", n if kind == "s" else n + 1


def cut(n):
    """The variants' k: where the exact upper part starts (and the segments' length)."""
    return max(2, n // 3)


def name_of(family, variant, form="c"):
    """EvoApproxLib's spelling (``add8se_XXX``), or for ``c_value`` a plain name."""
    if form == "c_value":
        return f"adder_{family}_{variant}"
    tag = hashlib.sha256(f"adder/{family}/{variant}".encode()).hexdigest()
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return f"add{family}_" + "".join(alphabet[int(tag[2 * i:2 * i + 2], 16) % 36] for i in range(3))


# ------------------------------------------------------------------------ the gate list
def gate_list(family, variant):
    """-> (gates, outputs): gates [(out, op, x, y)] in order (op AND/OR/XOR/NOT, y None for NOT),
    signals 'A[i]', 'B[i]', 'sig_N' or '0'; outputs: the q output signals, LSB first."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    n, signed, q = shape(family)
    k = cut(n)
    gates, counter = [], [3 * n]

    def new(op, x, y=None):
        out = f"sig_{counter[0]}"
        counter[0] += 1
        gates.append((out, op, x, y))
        return out

    def full(x, y, c):                                  # -> (sum, carry); c may be '0'
        t = new("XOR", x, y)
        if c == "0":
            return t, new("AND", x, y)
        return new("XOR", t, c), new("OR", new("AND", x, y), new("AND", t, c))

    outs, c = [], "0"
    for i in range(n):
        a, b = f"A[{i}]", f"B[{i}]"
        if variant == "exact" or i >= k and variant != "seg":
            s, c = full(a, b, c)
        elif variant == "loa":
            s = new("OR", a, b)
            if i == k - 1:
                c = new("AND", a, b)
        elif variant == "trunc":
            s = "0"
        elif variant == "copya":
            s = a
        else:                                           # seg: a segment starts at every multiple of k
            s, c = full(a, b, "0" if i % k == 0 else c)
        outs.append(s)
    if q == n + 1:
        outs.append(new("XOR", new("XOR", f"A[{n - 1}]", f"B[{n - 1}]"), c) if signed else c)
    return gates, outs


def evaluate_gates(gates, outputs, a, b, n):
    """The gate list on operand patterns (numpy): the output's bit pattern (int64) -- the wide
    multipliers' evaluator with two n-bit operands."""
    return _evaluate_wide(gates, outputs, a, b, n, n)


def value(pattern, bits, signed):
    p = np.asarray(pattern, np.int64)
    return p - (((p >> (bits - 1)) & 1) << bits) if signed else p


def metric_pairs(n):
    """Operand patterns: every pair when 2n <= 20, else 2^20 fixed-seed pairs and the edge pairs."""
    if 2 * n <= 20:
        i = np.arange(1 << (2 * n), dtype=np.int64)
        return i >> n, i & ((1 << n) - 1)
    rng = np.random.default_rng(4242)
    m = (1 << n) - 1
    e = np.array(sorted({0, 1, 2, m >> 1, (m >> 1) + 1, m - 1, m}), np.int64)
    return (np.concatenate([rng.integers(0, 1 << n, 1 << 20), np.repeat(e, e.size)]),
            np.concatenate([rng.integers(0, 1 << n, 1 << 20), np.tile(e, e.size)]))


@functools.lru_cache(maxsize=None)
def metrics(family, variant):
    """{header key: value} of the circuit (the module docstring's definitions); cached: do not
    change the dict."""
    n, signed, q = shape(family)
    gates, outs = gate_list(family, variant)
    a, b = metric_pairs(n)
    O = value(evaluate_gates(gates, outs, a, b, n), q, signed)
    E = value(a, n, signed) + value(b, n, signed)
    if q == n:                                          # a wrapping adder: the sums that fit
        lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
        keep = (E >= lo) & (E <= hi)
        O, E = O[keep], E[keep]
    err = np.abs(O - E).astype(np.float64)
    rel = err[E != 0] / np.abs(E[E != 0])
    R = float(1 << (q - 1 if signed else q))
    depth = {}
    for o, _, x, y in gates:
        depth[o] = 1 + max(depth.get(x, 0), depth.get(y, 0) if y else 0)
    return {"MAE%": 100 * round(float(err.mean()), 1) / R, "MAE": err.mean(), "WCE%": 100 * err.max() / R,
            "WCE": err.max(), "WCRE%": 100 * rel.max(), "EP%": 100 * float(np.mean(err != 0)),
            "MRE%": 100 * rel.mean(), "MSE": float(np.mean(err ** 2)),
            "PDK45_PWR": 0.0011 * len(gates), "PDK45_AREA": 1.06 * len(gates),
            "PDK45_DELAY": 0.04 * max(depth.values(), default=0)}


def header(family, variant, mt=None):
    mt = metrics(family, variant) if mt is None else mt
    lines = [f"// Approximate adder {name_of(family, variant)} ({family}, {variant}): generated for lutcore's tests",
             "// Metrics (computed from the function; PDK45 lines are gate-count proxies)"]
    for key, unit in (("MAE%", " %"), ("MAE", ""), ("WCE%", " %"), ("WCE", ""), ("WCRE%", " %"), ("EP%", " %"),
                      ("MRE%", " %"), ("MSE", ""), ("PDK45_PWR", " mW"), ("PDK45_AREA", " um2"),
                      ("PDK45_DELAY", " ns")):
        v = mt[key]
        txt = f"{v:.3g}" if key.endswith("%") or key.startswith("PDK") else f"{v:.6g}"
        lines.append(f"// {key} = {txt}{unit}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the forms
def _verilog(family, variant, form):
    n, signed, q = shape(family)
    name = name_of(family, variant)
    gates, outs = gate_list(family, variant)
    ports = "B, A, O" if form == "verilog_ba" else "A, B, O"
    if signed or form == "verilog_ba":
        decl = [f"input [{n - 1}:0] {p};" for p in ports.split(", ")[:2]]
    else:
        decl = [f"  input [{n - 1}:0] A, B;"]
    t = [header(family, variant), "", f"module {name} ({ports});", *decl, f"output [{q - 1}:0] O;"]
    wires = [g[0] for g in gates]
    for i in range(0, len(wires), 16):
        t.append("wire " + ",".join(wires[i:i + 16]) + ";")
    t.append("")
    sym = {"AND": "&", "OR": "|", "XOR": "^"}
    for o, op, x, y in gates:
        t.append(f"assign {o} = ~{x};" if op == "NOT" else f"assign {o} = {x} {sym[op]} {y};")
    lit = {"0": "1'b0"}
    for j, s in enumerate(outs):
        t.append(f"assign O[{j}] = {lit.get(s, s)};")
    t += ["endmodule", ""]
    return "\n".join(t), name


def _c(family, variant, form):
    n, signed, q = shape(family)
    name = name_of(family, variant, form)
    gates, outs = gate_list(family, variant)
    sym = {"AND": "&", "OR": "|", "XOR": "^"}
    t = [header(family, variant), "#include <stdint.h>", "#include <stdlib.h>", ""]
    if form == "c_value" or (form == "c" and not signed):
        # bit arrays: the unsigned EvoApproxLib form, and the plain one
        ta = "int32_t" if form == "c_value" else "uint64_t"
        ret = "int32_t" if form == "c_value" else "uint64_t"
        t += [f"{ret} {name}({ta} a, {ta} b) {{", f"  int wa[{n}];", f"  int wb[{n}];", f"  {ret} y = 0;"]
        for i in range(n):
            t.append(f"  wa[{i}] = (a >> {i}) & 0x01;")
            t.append(f"  wb[{i}] = (b >> {i}) & 0x01;")

        def s(x):
            return "0" if x == "0" else f"w{x[0].lower()}[{x[2:-1]}]" if x[1] == "[" else x
        for o, op, x, y in gates:
            t.append(f"  int {o} = {'~' + s(x) if op == 'NOT' else s(x) + ' ' + sym[op] + ' ' + s(y)};")
        for j, sig in enumerate(outs):
            t.append(f"  y |= ({s(sig)} & 0x01) << {j};")
        if form == "c_value" and signed:            # the output's value: its top bit extended
            t.append(f"  y = (y ^ (1 << {q - 1})) - (1 << {q - 1});")
        t += ["  return y;", "}", ""]
        return "\n".join(t), name
    params = "const uint64_t A,const uint64_t B" if form == "c_ab" else "const uint64_t B,const uint64_t A"
    ren = {g[0]: g[0].replace("sig_", "dout_") for g in gates}

    def s(x):
        return "0" if x == "0" else f"(({x[0]} >> {x[2:-1]})&1)" if x[1] == "[" else ren[x]
    t += [f"uint64_t {name}({params})", "{", "   uint64_t " + ", ".join(ren.values()) + ";", "   uint64_t O;", ""]
    for o, op, x, y in gates:
        t.append(f"   {ren[o]}={'~' + s(x) if op == 'NOT' else s(x) + sym[op] + s(y)};")
    t += ["", "   O = 0;"]
    for j, sig in enumerate(outs):
        t.append(f"   O |= ({s(sig)}&1) << {j};")
    t += ["   return O;", "}", ""]
    return "\n".join(t), name


def source(family, variant, form):
    """(text, function / module name) of the circuit in ``form``."""
    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    if form in ("verilog", "verilog_ba"):
        return _verilog(family, variant, form)
    if form in ("c", "c_ab", "c_value"):
        if form == "c_ab" and not shape(family)[1]:
            raise ValueError("form 'c_ab' is the signed families' (A, B) order")
        return _c(family, variant, form)
    raise ValueError(f"form: expected one of {FORMS}, got {form!r}")


def write(family, variant, dir, form):
    """Write the circuit into ``dir`` -> (path, function or module name)."""
    text, name = source(family, variant, form)
    path = os.path.join(os.fspath(dir), f"{name}_{form}{'.v' if form.startswith('verilog') else '.c'}")
    with open(path, "w") as f:
        f.write(text)
    return path, name


# ------------------------------------------------------------------------ the references
_REF_HEAD = """#include <stdint.h>
/* Every test adder as arithmetic: the output's bit pattern for operand patterns a (the
   register) and b, n bits each; low k bits as the variant says, the rest added exactly. */
static int64_t val(uint64_t p, int n, int s)
{ return s ? (int64_t)p - (int64_t)((p >> (n - 1) & 1) << n) : (int64_t)p; }
static int64_t upper(int64_t x, int k) { return x >= 0 ? x >> k : -((-x - 1) >> k) - 1; }   /* floor(x / 2^k) */
"""
_REF = """
uint64_t {fn}(uint64_t a, uint64_t b)
{{
    const int N = {n}, Q = {q}, S = {signed}, K = {k}, MODE = {mode};   /* exact, loa, trunc, copya, seg */
    uint64_t qmask = (1ULL << Q) - 1, kmask = (1ULL << K) - 1;
    int64_t x = val(a, N, S), y = val(b, N, S), s;
    if (MODE == 0)
        s = x + y;
    else if (MODE == 1)                    /* OR below k, a_{{k-1}} b_{{k-1}} carried in */
        s = (upper(x, K) + upper(y, K) + (int64_t)((a & b) >> (K - 1) & 1)) * (1LL << K) + (int64_t)((a | b) & kmask);
    else if (MODE == 2)
        s = (upper(x, K) + upper(y, K)) * (1LL << K);
    else if (MODE == 3)
        s = (upper(x, K) + upper(y, K)) * (1LL << K) + (int64_t)(a & kmask);
    else {{                                 /* segments of K bits, each without a carry in */
        int last = ((N - 1) / K) * K;
        s = (upper(x, last) + upper(y, last)) * (1LL << last);
        for (int lo = 0; lo < last; lo += K)
            s += (int64_t)((((a >> lo) & kmask) + ((b >> lo) & kmask)) & kmask) << lo;
    }}
    return (uint64_t)s & qmask;
}}
"""


def reference_c():
    """(C source, [function names]): ``uint64_t ref_<family>_<variant>(uint64_t a, uint64_t b)``."""
    parts, fns = [_REF_HEAD], []
    for family in FAMILIES:
        n, signed, q = shape(family)
        for variant in VARIANTS:
            fn = f"ref_{family}_{variant}"
            parts.append(_REF.format(fn=fn, n=n, q=q, signed=int(signed), k=cut(n), mode=VARIANTS.index(variant)))
            fns.append(fn)
    return "".join(parts), fns


def compile_references(dir):
    """{(family, variant): f(a_patterns, b_patterns) -> int64 output patterns}, compiled once."""
    text, fns = reference_c()
    fs = compile_c_batch(text, fns, dir, "ref_adders")
    return {tuple(fn[4:].split("_", 1)): f for fn, f in fs.items()}
