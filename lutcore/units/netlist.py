"""Wide multipliers as gate netlists: from Verilog (Yosys) and from C models (a symbolic tracer).

Design: a multiplier too wide for a lookup table (11 x 11 .. 16 x 16 bits) runs through a
bit-sliced kernel that takes the circuit as a ``Netlist`` — 3-input gates, each a truth
table, in topological order (the IR below; fixed, the kernel reads it as is).  This module
makes one and checks one; it runs nothing of the kernel's.

* ``from_verilog`` has Yosys map the module to simple gates (``hdl.synthesise``, the same
  script and time limit as the 8-bit path) and ``from_yosys`` turns the flat JSON module into
  the IR: every ``$_AND_``/``$_OR_``/``$_XOR_``/``$_MUX_``/``$_AOI3_``... cell one gate (an
  ``$_AOI4_``/``$_OAI4_`` two), the operands and the product chosen by hdl.py's port rules
  (two inputs, the first declared is ``a``, one output), widths read from the ports.
* ``from_c`` traces a C model symbolically: the file is compiled as C++ with its integer
  types (``uint16_t``, ``int``, ``unsigned char``...) replaced by symbolic integers whose
  value is a vector of netlist nodes (``TRACER_HPP``: every operator builds gates, with C's
  promotions, conversions and shifts), and the traced function is called once on symbolic
  operands.  The same child run compiles the file as plain C and evaluates it on fixed-seed
  random and edge pairs; the parent holds the traced netlist to those products, so a
  tracer bug or a C semantics the tracer does not follow is an error, never a wrong
  circuit.  Compilers, tracer and model run under hdl.py's keeper (``_run_limited``): user
  code never runs in this process.  Both readers return the gates as made (Yosys's, the
  tracer's, constant-folded as it goes); ``optimise`` them before running them.
* ``optimise`` shrinks a netlist without changing its function (constant propagation,
  NOT/BUF folding, structural hashing, dead gates, a re-cover by 3-input cuts chosen by
  area flow and exact local area as ABC's ``if -K 3`` does, then collapsing a gate into its
  consumers when each keeps at most 3 inputs): a full adder becomes one XOR3 and one MAJ
  gate, an exact 16 x 16 array multiplier about 735 gates (Yosys gave 1,408).
* ``Netlist.evaluate`` is the plain evaluator (numpy, 64 pairs per uint64 word), the
  reference the kernel is held to.

The tracer follows: the C integer types as on x86-64 Linux (``int8_t`` .. ``uint64_t``,
``char`` (signed), ``short``, ``int``, ``unsigned``, ``long`` (64 bits), ``long long``,
``_Bool``/``bool``: the keyword spellings rewritten in the traced copy, the ``<stdint.h>``
names ``#define``d; C++'s own keywords used as names renamed away), integer literals, C's promotions and usual arithmetic conversions,
truncation and sign/zero extension on assignment, casts and returns (to ``_Bool``: != 0);
``& | ^ ~ ! + - *`` (ripple adders and a shift-and-add array of gates, symbolic on both
sides), ``<< >>`` by constant amounts (``>>`` arithmetic on signed types), ``/`` and ``%``
by a constant power of two (C's truncation toward zero) or between constants, ``== != <
> <= >=`` and ``&& ||`` as symbolic bits (no short circuit), ``abs``, compound
assignments, ``++``/``--``, helper functions, arrays indexed by constants, loops and
branches whose conditions are constant (a loop counter).  It refuses, naming the
construct: a condition (``if``, a loop, ``?:`` — which C++ cannot overload) on a value that
depends on the operands, a shift or divisor that depends on them, an operand-dependent
array index, ``switch`` or library call (the value used as a plain number), and anything
C++ does not compile (``sizeof`` of an integer type is the symbolic type's size: do not
use it).  State kept between calls is caught by the check against the compiled C.

The IR.  Nodes: 0 = constant 0, 1 = constant 1, 2 .. 2+a_bits-1 = bit i of operand a (LSB
first), then the b_bits bits of b, then gate g is node 2+a_bits+b_bits+g.  ``gates`` (G, 4)
int32 rows ``[x, y, z, tt]``: x, y, z nodes below the gate's own id, out = (tt >> (4x + 2y +
z)) & 1 (vpternlog's imm8, x first); unused inputs point at node 0.  ``outputs`` (p_bits,)
int32: the node of product bit p.  Operands and product are bit patterns; signedness is the
caller's format, not the netlist's.

    Netlist(a_bits, b_bits, p_bits, gates, outputs)   .digest .gate_count .validate() .evaluate(a, b)
                                                      .save(path)  Netlist.load(path)
    optimise(netlist) -> Netlist
    from_yosys(module, a_port, b_port, out_port, path="netlist") -> Netlist
    from_verilog(path, top=None, *, timeout=120) -> (Netlist, info)
    from_c(path, function, *, a_bits, b_bits, p_bits, timeout=60) -> (Netlist, info)
"""
from __future__ import annotations

import dataclasses
import hashlib
import numbers
import os
import re
import shutil
import tempfile

import numpy as np

from lutcore.units import hdl

__all__ = ["Netlist", "optimise", "from_yosys", "from_verilog", "from_c", "TRACER_HPP", "MAX_OPERAND_BITS",
           "MAX_PRODUCT_BITS"]

MAX_OPERAND_BITS = 16
MAX_PRODUCT_BITS = 32
_FORMAT = "lutcore-netlist/1"


def _width_arg(v, name, hi):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: expected an int in 1..{hi}, got {type(v).__name__} {v!r}")
    if not 1 <= int(v) <= hi:
        raise ValueError(f"{name}: expected 1..{hi} bits, got {int(v)}")
    return int(v)


def _frozen(x, name, shape_tail):
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.size == 0:
        arr = arr.reshape((0,) + shape_tail)
    if arr.ndim != 1 + len(shape_tail) or arr.shape[1:] != shape_tail:
        want = "(G, 4)" if shape_tail else "(p_bits,)"
        raise ValueError(f"{name}: expected shape {want}, got {arr.shape}")
    if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{name}: values out of int32 range")
    out = np.array(arr, dtype=np.int32, order="C", copy=True)
    out.setflags(write=False)
    return out


# --------------------------------------------------------------------------- evaluation
def _fn2(t):
    """A function of two uint64 word vectors (y, z) with 4-bit truth table t (index 2y + z)."""
    return (lambda y, z: np.zeros_like(y), lambda y, z: ~(y | z), lambda y, z: ~y & z, lambda y, z: ~y,
            lambda y, z: y & ~z, lambda y, z: ~z, lambda y, z: y ^ z, lambda y, z: ~(y & z),
            lambda y, z: y & z, lambda y, z: ~(y ^ z), lambda y, z: z.copy(), lambda y, z: ~y | z,
            lambda y, z: y.copy(), lambda y, z: y | ~z, lambda y, z: y | z,
            lambda y, z: np.full_like(y, np.uint64(0xFFFFFFFFFFFFFFFF)))[t]


def _fn3(tt):
    """A function of three word vectors (x, y, z) with truth table tt (index 4x + 2y + z)."""
    if tt == 0x96:
        return lambda x, y, z: x ^ y ^ z
    if tt == 0xE8:
        return lambda x, y, z: (x & y) | (z & (x | y))
    lo, hi = _fn2(tt & 15), _fn2(tt >> 4)
    if tt & 15 == tt >> 4:
        return lambda x, y, z: lo(y, z)
    return lambda x, y, z: (lambda g0: g0 ^ (x & (g0 ^ hi(y, z))))(lo(y, z))   # x ? hi : lo


_FN3 = [_fn3(t) for t in range(256)]


def _pack_bits(v, nbits):
    """(N,) int64 codes -> (nbits, words) uint64: row i is bit i of every pair."""
    n = v.shape[0]
    words = (n + 63) // 64
    bits = ((v[None, :] >> np.arange(nbits, dtype=np.int64)[:, None]) & 1).astype(np.uint8)
    if words * 64 != n:
        bits = np.pad(bits, ((0, 0), (0, words * 64 - n)))
    return np.packbits(bits, axis=1, bitorder="little").view("<u8").reshape(nbits, words)


# ------------------------------------------------------------------------------ Netlist
@dataclasses.dataclass(frozen=True, eq=False)
class Netlist:
    """A multiplier as 3-input gates (the IR in the module docstring); immutable, validated
    when made.  ``gates``: (G, 4) int32 read-only, rows [x, y, z, tt]; ``outputs``:
    (p_bits,) int32 read-only."""
    a_bits: int
    b_bits: int
    p_bits: int
    gates: np.ndarray
    outputs: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "a_bits", _width_arg(self.a_bits, "a_bits", MAX_OPERAND_BITS))
        object.__setattr__(self, "b_bits", _width_arg(self.b_bits, "b_bits", MAX_OPERAND_BITS))
        object.__setattr__(self, "p_bits", _width_arg(self.p_bits, "p_bits", MAX_PRODUCT_BITS))
        object.__setattr__(self, "gates", _frozen(self.gates, "gates", (4,)))
        object.__setattr__(self, "outputs", _frozen(self.outputs, "outputs", ()))
        self.validate()

    @property
    def n_inputs(self) -> int:
        return self.a_bits + self.b_bits

    @property
    def gate_count(self) -> int:
        return int(self.gates.shape[0])

    @property
    def digest(self) -> str:
        """sha256 of the canonical bytes: format tag, the three widths, gates, outputs (int32 LE)."""
        h = hashlib.sha256(_FORMAT.encode())
        h.update(np.array([self.a_bits, self.b_bits, self.p_bits, self.gate_count], "<i4").tobytes())
        h.update(self.gates.astype("<i4").tobytes())
        h.update(self.outputs.astype("<i4").tobytes())
        return h.hexdigest()

    def __eq__(self, other):
        return isinstance(other, Netlist) and self.digest == other.digest

    def __hash__(self):
        return hash(self.digest)

    def __repr__(self):
        return (f"Netlist({self.a_bits}x{self.b_bits} -> {self.p_bits} bits, {self.gate_count} gates, "
                f"{self.digest[:12]})")

    def validate(self) -> None:
        """ValueError naming the first thing wrong: an output's length, a node id out of range
        or not below its gate (topological order), a truth table outside 0..255."""
        if self.outputs.shape != (self.p_bits,):
            raise ValueError(f"outputs: expected {self.p_bits} entries (p_bits), got {self.outputs.shape[0]}")
        base = 2 + self.n_inputs
        g = self.gates
        if g.shape[0]:
            own = base + np.arange(g.shape[0])
            ins = g[:, :3]
            bad = np.flatnonzero((ins < 0).any(axis=1) | (ins >= own[:, None]).any(axis=1))
            if bad.size:
                k = int(bad[0])
                raise ValueError(f"gates: gate {k} (node {base + k}) has inputs {g[k, :3].tolist()}: each must be "
                                 f"a node id in 0..{base + k - 1} (a constant, an operand bit or an earlier gate)")
            bad = np.flatnonzero((g[:, 3] < 0) | (g[:, 3] > 255))
            if bad.size:
                k = int(bad[0])
                raise ValueError(f"gates: gate {k} has truth table {int(g[k, 3])}, expected 0..255")
        n = base + g.shape[0]
        bad = np.flatnonzero((self.outputs < 0) | (self.outputs >= n))
        if bad.size:
            p = int(bad[0])
            raise ValueError(f"outputs: product bit {p} is node {int(self.outputs[p])}, expected a node id in "
                             f"0..{n - 1}")

    # --------------------------------------------------------------------------- I/O
    def save(self, path) -> None:
        """A ``.npz`` with ``gates``, ``outputs`` and the widths (``widths`` = [a, b, p])."""
        from lutcore._io import path_arg
        path = path_arg(path)
        with open(path, "wb") as f:
            np.savez(f, format=np.array(_FORMAT), widths=np.array([self.a_bits, self.b_bits, self.p_bits], np.int32),
                     gates=self.gates, outputs=self.outputs)

    @classmethod
    def load(cls, path) -> "Netlist":
        from lutcore._io import path_arg
        path = path_arg(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                fmt, widths, gates, outputs = (z[k] for k in ("format", "widths", "gates", "outputs"))
        except KeyError as e:
            raise ValueError(f"{path}: not a lutcore netlist (no {e} array)") from None
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a lutcore netlist .npz ({e})") from None
        if str(fmt) != _FORMAT:
            raise ValueError(f"{path}: format {str(fmt)!r}, expected {_FORMAT!r}")
        if widths.shape != (3,):
            raise ValueError(f"{path}: widths: expected 3 entries (a, b, p), got shape {widths.shape}")
        try:
            return cls(int(widths[0]), int(widths[1]), int(widths[2]), gates, outputs)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: {e}") from None

    # ---------------------------------------------------------------------- evaluate
    def evaluate(self, a, b) -> np.ndarray:
        """The product's bit pattern (int64, Σ bit_p 2^p, unsigned) for operand codes ``a``,
        ``b`` (integer arrays or scalars, broadcast; only the low a_bits / b_bits bits of each
        are read, so two's-complement values work as they are).

            a, b      (...) int     IN   operand codes
            returns   (...) int64  OUT   product bit patterns, 0 .. 2^p_bits - 1
        """
        a, b = np.asarray(a), np.asarray(b)
        for name, v in (("a", a), ("b", b)):
            if v.dtype.kind not in "iu":
                raise TypeError(f"{name}: expected integer operand codes, got dtype {v.dtype}")
        a, b = np.broadcast_arrays(a, b)
        shape = a.shape
        av = (a.reshape(-1).astype(np.int64) & ((1 << self.a_bits) - 1))
        bv = (b.reshape(-1).astype(np.int64) & ((1 << self.b_bits) - 1))
        n = av.shape[0]
        out = np.zeros(n, np.int64)
        if n == 0:
            return out.reshape(shape)
        base = 2 + self.n_inputs
        nodes = base + self.gate_count
        # pairs per chunk: every node's words of a chunk together in at most ~64 MiB
        words_per_chunk = max(64, min((n + 63) // 64, (64 << 20) // (8 * nodes)))
        chunk = words_per_chunk * 64
        gates = self.gates.tolist()
        fns = [_FN3[t] for _, _, _, t in gates]
        for s in range(0, n, chunk):
            ca, cb = av[s:s + chunk], bv[s:s + chunk]
            m = ca.shape[0]
            w = (m + 63) // 64
            V = np.empty((nodes, w), np.uint64)                   # node -> its bits for this chunk
            V[0] = 0
            V[1] = np.uint64(0xFFFFFFFFFFFFFFFF)
            V[2:2 + self.a_bits] = _pack_bits(ca, self.a_bits)
            V[2 + self.a_bits:base] = _pack_bits(cb, self.b_bits)
            for k, (x, y, z, _) in enumerate(gates):
                V[base + k] = fns[k](V[x], V[y], V[z])
            P = np.ascontiguousarray(V[self.outputs])            # (p_bits, w)
            bits = np.unpackbits(P.view(np.uint8), axis=1, bitorder="little")[:, :m]
            acc = np.zeros(m, np.int64)
            for p in range(self.p_bits):
                acc |= bits[p].astype(np.int64) << p
            out[s:s + m] = acc
        return out.reshape(shape)


# ----------------------------------------------------------------------------- optimise
# Internally a gate is (vars, tt): vars a tuple of k <= 3 distinct nodes in ascending order,
# tt over k variables with the first var the most significant index bit (so k = 3 is the
# IR's convention).  A signal is a literal (node, neg).

def _mask(k):
    return (1 << (1 << k)) - 1


def _table(U, f):
    """Truth table over the nodes ``U`` (first the most significant) of ``f(assignment dict)``."""
    k = len(U)
    tt = 0
    for idx in range(1 << k):
        asg = {u: (idx >> (k - 1 - j)) & 1 for j, u in enumerate(U)}
        if f(asg):
            tt |= 1 << idx
    return tt


def _shrink(U, tt):
    """Drop the variables ``tt`` does not depend on."""
    U = list(U)
    j = 0
    while j < len(U):
        k = len(U)
        w = 1 << (k - 1 - j)
        lo = [i for i in range(1 << k) if not i & w]
        if all(((tt >> i) & 1) == ((tt >> (i | w)) & 1) for i in lo):
            tt = sum(((tt >> i) & 1) << r for r, i in enumerate(lo))
            # lo enumerates indices with bit w clear in increasing order: exactly the new index order
            del U[j]
        else:
            j += 1
    return tuple(U), tt


def _function(lits, tt):
    """The function ``tt`` (over len(lits) inputs, first = MSB) of the literals ``lits``, on the
    distinct non-constant nodes it depends on: -> (vars ascending, tt)."""
    U = sorted({n for n, _ in lits if n > 1})

    def f(asg):
        idx = 0
        for n, neg in lits:
            v = (n if n <= 1 else asg[n]) ^ neg
            idx = (idx << 1) | v
        return (tt >> idx) & 1
    return _shrink(U, _table(U, f))


def _to_ir(vars_, tt):
    """(vars, tt over k) -> IR row [x, y, z, tt3], unused leading inputs at node 0."""
    k = len(vars_)
    row = [0] * (3 - k) + list(vars_)
    tt3 = 0
    for i in range(8):
        if (tt >> (i & ((1 << k) - 1))) & 1:
            tt3 |= 1 << i
    return row + [tt3]


def _rebuild(base, gates, outputs):
    """Constant propagation, NOT/BUF folding (negations ride on literals into the consumers),
    structural hashing, dead-gate removal.  ``gates``: [(lits, tt)] in topological order over
    nodes numbered from ``base``; ``outputs``: literals.  -> (gates as [(vars, tt)], outputs as
    literals), every gate of >= 2 inputs with tt(0..0) = 0."""
    lit = {n: (n, 0) for n in range(base)}
    lit[0], lit[1] = (0, 0), (0, 1)
    new, seen = [], {}
    for g, (ins, tt) in enumerate(gates):
        U, t = _function([(lit[n][0], lit[n][1] ^ neg) for n, neg in ins], tt)
        me = base + g
        if not U:
            lit[me] = (0, t & 1)
        elif len(U) == 1:
            lit[me] = (U[0], 0 if t == 0b10 else 1)
        else:
            neg = t & 1
            if neg:
                t ^= _mask(len(U))
            key = (U, t)
            if key not in seen:
                seen[key] = base + len(new)
                new.append(key)
            lit[me] = (seen[key], neg)
    outs = [(lit[n][0], lit[n][1] ^ neg) for n, neg in outputs]
    # dead gates: keep what the outputs reach
    live = [False] * len(new)
    for n, _ in outs:
        if n >= base:
            live[n - base] = True
    for g in range(len(new) - 1, -1, -1):
        if live[g]:
            for v in new[g][0]:
                if v >= base:
                    live[v - base] = True
    ren = {n: n for n in range(base)}
    kept = []
    for g, (U, t) in enumerate(new):
        if live[g]:
            ren[base + g] = base + len(kept)
            kept.append((tuple(ren[v] for v in U), t))
    return kept, [(ren[n], neg) for n, neg in outs]


def _collapse(base, gates, outputs):
    """Collapse a gate into every consumer when each keeps at most 3 distinct inputs (the gate
    is then dead: a single-fanout gate merged into its consumer, a full adder's shared XOR
    into both its sum and its carry).  -> ([(lits, tt)], outputs) for ``_rebuild``."""
    fn = {base + g: (list(U), t) for g, (U, t) in enumerate(gates)}
    users = {}
    for g, (U, _) in enumerate(gates):
        for v in U:
            users.setdefault(v, set()).add(base + g)
    in_out = {n for n, _ in outputs}
    for c in range(base, base + len(gates)):
        if c in in_out or c not in users or not users[c]:
            continue
        cU, ct = fn[c]
        plan = {}
        for p in users[c]:
            pU, pt = fn[p]
            W = sorted(set(pU) - {c} | set(cU))
            if len(W) > 3:
                break

            def f(asg, pU=pU, pt=pt):
                cv = (ct >> sum(asg[u] << (len(cU) - 1 - j) for j, u in enumerate(cU))) & 1
                idx = 0
                for u in pU:
                    idx = (idx << 1) | (cv if u == c else asg[u])
                return (pt >> idx) & 1
            plan[p] = _shrink(W, _table(W, f))
        else:
            for p, (W, t) in plan.items():
                for u in fn[p][0]:
                    users[u].discard(p)
                fn[p] = (list(W), t)
                for u in W:
                    users.setdefault(u, set()).add(p)
            for u in cU:
                users[u].discard(c)
            users[c] = set()
            fn[c] = ([], 0)                     # dead: a constant, dropped by _rebuild
    out_gates = [([(v, 0) for v in fn[base + g][0]], fn[base + g][1]) for g in range(len(gates))]
    return out_gates, outputs


_CUTS_PER_NODE = 10


def _map3(base, gates, outputs):
    """Re-cover the network with 3-input gates (a 3-LUT mapping by cut enumeration and
    area flow, as ABC's ``if -K 3``): every gate's cuts of at most 3 leaves, a cover chosen
    from the outputs by the lowest area flow (fanouts estimated from the previous cover,
    a few rounds).  -> ([(lits, tt)], outputs) for ``_rebuild``: the cover's gates as the
    functions of their leaves, every other gate dead."""
    n_nodes = base + len(gates)
    fn = {base + g: (U, t) for g, (U, t) in enumerate(gates)}
    cuts = {n: [(n,)] for n in range(base)}
    for g, (U, _) in enumerate(gates):
        me = base + g
        acc = [()]
        for v in U:
            nxt = set()
            for c1 in acc:
                for c2 in cuts[v]:
                    u = tuple(sorted(set(c1) | set(c2)))
                    if len(u) <= 3:
                        nxt.add(u)
            acc = nxt
        acc = sorted(acc, key=lambda c: (len(c), c))
        kept = []
        for c in acc:                                   # drop a cut that contains a kept one
            if not any(set(k).issubset(c) for k in kept):
                kept.append(c)
        cuts[me] = [(me,)] + kept[:_CUTS_PER_NODE]
    fo = [0] * n_nodes
    for U, _ in gates:
        for v in U:
            fo[v] += 1
    for n, _ in outputs:
        fo[n] += 1
    best_cover, best_cut = None, None
    for _ in range(3):
        af = [0.0] * n_nodes
        choice = {}
        for g in range(len(gates)):
            me = base + g
            top = None
            for c in cuts[me][1:]:
                a = 1.0 + sum(af[l] / max(1, fo[l]) for l in c)
                if top is None or a < top[0] - 1e-9:
                    top = (a, c)
            af[me], choice[me] = top
        refs = [0] * n_nodes
        for n, _ in outputs:
            refs[n] += 1

        def ref(n):                             # reference n's cut: -> the gates it brings in
            area, stack = 0, [n]
            while stack:
                x = stack.pop()
                area += 1
                for leaf in choice[x]:
                    if leaf >= base:
                        refs[leaf] += 1
                        if refs[leaf] == 1:
                            stack.append(leaf)
            return area

        def deref(n):                           # the reverse: -> the gates it frees
            area, stack = 0, [n]
            while stack:
                x = stack.pop()
                area += 1
                for leaf in choice[x]:
                    if leaf >= base:
                        refs[leaf] -= 1
                        if refs[leaf] == 0:
                            stack.append(leaf)
            return area
        for n in {n for n, _ in outputs if n >= base}:
            ref(n)
        for _ in range(2):                      # exact local area: each covered gate's cheapest cut
            for g in range(len(gates)):
                me = base + g
                if refs[me] == 0:
                    continue
                deref(me)
                top = None
                for c in cuts[me][1:]:
                    choice[me] = c
                    a = ref(me)
                    deref(me)
                    if top is None or a < top[0]:
                        top = (a, c)
                choice[me] = top[1]
                ref(me)
        cover = {base + g for g in range(len(gates)) if refs[base + g] > 0}
        if best_cover is None or len(cover) < len(best_cover):
            best_cover, best_cut = cover, dict(choice)
        fo = [max(1, r) for r in refs]
    out = []
    for g in range(len(gates)):
        me = base + g
        if me not in best_cover:
            out.append(([], 0))
            continue
        c = best_cut[me]

        def value(n, asg):
            if n in asg:
                return asg[n]
            U, t = fn[n]
            idx = 0
            for v in U:
                idx = (idx << 1) | value(v, asg)
            asg[n] = (t >> idx) & 1
            return asg[n]
        tt = 0
        for idx in range(1 << len(c)):
            asg = {l: (idx >> (len(c) - 1 - j)) & 1 for j, l in enumerate(c)}
            if value(me, asg):
                tt |= 1 << idx
        out.append(([(l, 0) for l in c], tt))
    return out, outputs


def optimise(netlist: Netlist) -> Netlist:
    """The same function in fewer gates: constant propagation, NOT/BUF folding into the
    consumers' truth tables, structural hashing (a gate and its complement are one), dead
    gates removed, and a gate collapsed into its consumers when each keeps at most 3 inputs,
    repeated until the count stops falling.  An output that needs a complement gets one NOT
    gate only where no gate can be flipped instead."""
    if not isinstance(netlist, Netlist):
        raise TypeError(f"netlist: expected a Netlist, got {type(netlist).__name__}")
    base = 2 + netlist.n_inputs
    gates = [([(int(x), 0), (int(y), 0), (int(z), 0)], int(t)) for x, y, z, t in netlist.gates.tolist()]
    outputs = [(int(n), 0) for n in netlist.outputs.tolist()]
    g, o = _rebuild(base, gates, outputs)
    for _ in range(20):                 # 3-input cover first, while the fine structure is there
        g2, o2 = _rebuild(base, *_map3(base, g, o))
        if len(g2) >= len(g):
            break
        g, o = g2, o2
    for _ in range(20):
        g2, o2 = _rebuild(base, *_collapse(base, g, o))
        if len(g2) >= len(g):
            break
        g, o = g2, o2
    return _materialise(netlist, base, g, o)


def _materialise(netlist, base, gates, outs):
    """Internal gates + literal outputs -> Netlist.  A gate whose output is wanted complemented
    more often than plain is stored complemented (its consumers' tables absorb it); a
    complement still wanted after that is one NOT gate per node."""
    votes = {}
    for n, neg in outs:
        if n >= base:
            votes[n] = votes.get(n, 0) + (1 if neg else -1)
    flip = {n for n, v in votes.items() if v > 0}
    rows = []
    for g, (U, t) in enumerate(gates):
        me = base + g
        lits = [(v, 1 if v in flip else 0) for v in U]
        U2, t2 = _function(lits, t)
        if me in flip:
            t2 ^= _mask(len(U2))
        rows.append(_to_ir(U2, t2))             # flipping inputs keeps the support
    nots, out_nodes = {}, []
    for n, neg in outs:
        neg ^= 1 if n in flip else 0
        if n <= 1:
            out_nodes.append(n ^ neg)
        elif not neg:
            out_nodes.append(n)
        else:
            if n not in nots:
                nots[n] = base + len(rows)
                rows.append([0, 0, n, 0x55])
            out_nodes.append(nots[n])
    gates_arr = np.array(rows, np.int32).reshape(-1, 4)
    return Netlist(netlist.a_bits, netlist.b_bits, netlist.p_bits, gates_arr, np.array(out_nodes, np.int32))


# ------------------------------------------------------------------------------ Yosys
def _gate_tt(fn):
    return sum(1 << i for i in range(8) if fn((i >> 2) & 1, (i >> 1) & 1, i & 1))


# cell type -> [(inputs of the step: port names or "t" (the previous step's output), truth table)]
_CELLS = {
    "$_BUF_": [("A", _gate_tt(lambda x, y, z: x))],
    "$_NOT_": [("A", _gate_tt(lambda x, y, z: 1 - x))],
    "$_AND_": [("AB", _gate_tt(lambda x, y, z: x & y))],
    "$_NAND_": [("AB", _gate_tt(lambda x, y, z: 1 - (x & y)))],
    "$_OR_": [("AB", _gate_tt(lambda x, y, z: x | y))],
    "$_NOR_": [("AB", _gate_tt(lambda x, y, z: 1 - (x | y)))],
    "$_XOR_": [("AB", _gate_tt(lambda x, y, z: x ^ y))],
    "$_XNOR_": [("AB", _gate_tt(lambda x, y, z: 1 - (x ^ y)))],
    "$_ANDNOT_": [("AB", _gate_tt(lambda x, y, z: x & (1 - y)))],
    "$_ORNOT_": [("AB", _gate_tt(lambda x, y, z: x | (1 - y)))],
    "$_MUX_": [("ABS", _gate_tt(lambda x, y, z: y if z else x))],
    "$_NMUX_": [("ABS", _gate_tt(lambda x, y, z: 1 - (y if z else x)))],
    "$_AOI3_": [("ABC", _gate_tt(lambda x, y, z: 1 - ((x & y) | z)))],
    "$_OAI3_": [("ABC", _gate_tt(lambda x, y, z: 1 - ((x | y) & z)))],
    "$_AOI4_": [("AB", _gate_tt(lambda x, y, z: x & y)), ("tCD", _gate_tt(lambda x, y, z: 1 - (x | (y & z))))],
    "$_OAI4_": [("AB", _gate_tt(lambda x, y, z: x | y)), ("tCD", _gate_tt(lambda x, y, z: 1 - (x & (y | z))))],
}


def _src(c):
    s = c.get("attributes", {}).get("src", "")
    return f" at {s}" if s else ""


def from_yosys(module: dict, a_port: str, b_port: str, out_port: str, path: str = "netlist") -> Netlist:
    """The IR of a flat gate-level Yosys JSON module (what ``hdl.synthesise`` returns): inputs
    ``a_port`` (operand a) and ``b_port``, output ``out_port``; widths from the ports (operands
    1..16 bits, product 1..32).  An output bit that is, or depends on, a constant x or z or
    an undriven net is a ValueError naming the net and the cell where it entered (the 8-bit
    path follows them in three-valued logic; a netlist has two values, so any dependence is
    refused); so are a register or latch, a cell that is not a gate and an output driven by
    a combinational loop.  Messages start with ``path``."""
    ports = module.get("ports", {})
    cells = module.get("cells", {})
    names = {}
    for v, nm in (("a_port", a_port), ("b_port", b_port), ("out_port", out_port)):
        if nm not in ports:
            raise hdl._fail(path, f"{v}: no port {nm!r} (ports: {', '.join(ports) or 'none'})")
        names[v] = nm
    pa, pb, po = ports[a_port], ports[b_port], ports[out_port]
    for v, p, want, hi in (("a_port", pa, "input", MAX_OPERAND_BITS), ("b_port", pb, "input", MAX_OPERAND_BITS),
                           ("out_port", po, "output", MAX_PRODUCT_BITS)):
        if p.get("direction") != want:
            raise hdl._fail(path, f"{v}: port {names[v]} is an {p.get('direction')}, expected an {want}")
        if not 1 <= len(p["bits"]) <= hi:
            raise hdl._fail(path, f"port {hdl._port_desc(names[v], p)} is {len(p['bits'])} bits wide: "
                                  f"{'an operand' if want == 'input' else 'the product'} may have 1..{hi} bits")
    a_bits, b_bits, p_bits = len(pa["bits"]), len(pb["bits"]), len(po["bits"])
    base = 2 + a_bits + b_bits
    node: dict = {"0": 0, "1": 1}
    for i, bit in enumerate(pa["bits"]):
        if bit in node:
            raise hdl._fail(path, f"input {a_port} bit {i} is a constant or shared with another input")
        node[bit] = 2 + i
    for j, bit in enumerate(pb["bits"]):
        if bit in node:
            raise hdl._fail(path, f"input {b_port} bit {j} is a constant or shared with another input")
        node[bit] = 2 + a_bits + j
    pending = []
    for cname, c in cells.items():
        t = c.get("type", "")
        if hdl._SEQUENTIAL.search(t):
            raise hdl._fail(path, f"sequential logic (a register or latch, cell {t}{_src(c)}): only a "
                                  f"combinational multiplier can be a netlist")
        if t in hdl._IGNORED:
            continue
        if t not in _CELLS:
            what = "a memory" if t.startswith("$mem") else "not a logic gate (a module used but not defined?)"
            raise hdl._fail(path, f"cell {cname!r} of type {t}{_src(c)} is {what}: only combinational logic "
                                  f"can be a netlist")
        conn = c.get("connections", {})
        try:
            ins = {p: conn[p][0] for step in _CELLS[t] for p in step[0] if p != "t"}
            y = conn["Y"][0]
        except (KeyError, IndexError):
            raise hdl._fail(path, f"cell {cname!r} ({t}) lacks a connection") from None
        pending.append((cname, c, t, ins, y))
    driven = {}
    for k, (cname, _, _, _, y) in enumerate(pending):
        if y in ("0", "1", "x", "z") or y in node or y in driven:
            raise hdl._fail(path, f"net {y} is driven twice (cell {cname!r} and another driver)")
        driven[y] = k
    # x, z and undriven nets: a gate that reads one is poisoned (its row reads node 0), and
    # so is every gate after it; an output that is poisoned is refused naming where it began
    unknown = {}
    for cname, c, t, ins, _ in pending:
        for p, b in ins.items():
            if b in ("x", "z"):
                unknown.setdefault(b, f"the constant {b} (cell {cname!r} {t} input {p}{_src(c)}): a netlist has no "
                                      f"unknown (x) or high-impedance (z) values")
            elif b not in node and b not in driven:
                unknown.setdefault(b, f"net {b}, which is not driven (cell {cname!r} {t} input {p}{_src(c)})")
    poison = {}
    # topological order (Kahn), the cells' own order where free
    need, waiting, ready = [], {}, []
    for k, (_, _, _, ins, _) in enumerate(pending):
        miss = {b for b in ins.values() if b not in node and b not in unknown}
        need.append(len(miss))
        for b in miss:
            waiting.setdefault(b, []).append(k)
        if not miss:
            ready.append(k)
    import heapq
    heapq.heapify(ready)
    rows = []
    while ready:
        k = heapq.heappop(ready)
        cname, c, t, ins, y = pending[k]
        why = next((unknown.get(b) or poison.get(node.get(b)) for b in ins.values()
                    if b in unknown or node.get(b) in poison), None)
        prev = None
        for step_ports, tt in _CELLS[t]:
            ids = [prev if p == "t" else node.get(ins[p], 0) for p in step_ports]
            ids = ids + [0] * (3 - len(ids))
            rows.append(ids + [tt])
            prev = base + len(rows) - 1
        node[y] = prev
        if why is not None:
            poison[prev] = why
        for k2 in waiting.pop(y, ()):
            need[k2] -= 1
            if need[k2] == 0:
                heapq.heappush(ready, k2)
    outputs = []
    for j, bit in enumerate(po["bits"]):
        if bit in ("x", "z"):
            raise hdl._fail(path, f"output {out_port} bit {j} is the constant {bit}: a netlist has no unknown "
                                  f"(x) or high-impedance (z) values")
        if bit not in node:
            why = "is driven by a combinational loop" if bit in driven else "is not driven"
            raise hdl._fail(path, f"output {out_port} bit {j} {why}")
        if node[bit] in poison:
            raise hdl._fail(path, f"output {out_port} bit {j} depends on {poison[node[bit]]}")
        outputs.append(node[bit])
    return Netlist(a_bits, b_bits, p_bits, np.array(rows, np.int32).reshape(-1, 4), np.array(outputs, np.int32))


def _choose_ports(module, path):
    """hdl.py's port rules, any widths: two inputs (the first declared is a), one output."""
    ports = module.get("ports", {})
    ins = [(n, p) for n, p in ports.items() if p.get("direction") == "input"]
    outs = [(n, p) for n, p in ports.items() if p.get("direction") == "output"]
    other = [n for n, p in ports.items() if p.get("direction") not in ("input", "output")]
    if other:
        raise hdl._fail(path, f"ports must be inputs or outputs, got inout port(s) {other}")
    if len(ins) != 2 or any(not 1 <= len(p["bits"]) <= MAX_OPERAND_BITS for _, p in ins):
        raise hdl._fail(path, f"expected two inputs of 1..{MAX_OPERAND_BITS} bits (the operands a, b), got "
                              + (", ".join(hdl._port_desc(n, p) for n, p in ins) or "none"))
    if len(outs) != 1 or not 1 <= len(outs[0][1]["bits"]) <= MAX_PRODUCT_BITS:
        raise hdl._fail(path, f"expected one output of 1..{MAX_PRODUCT_BITS} bits (the product), got "
                              + (", ".join(hdl._port_desc(n, p) for n, p in outs) or "none"))
    return ins[0], ins[1], outs[0]


_vcache: dict = {}          # (realpath, mtime_ns, size, top) -> (Netlist, info)


def from_verilog(path, top: str | None = None, *, timeout: float = 120, progress: bool = True):
    """Map ``path`` to gates with Yosys (``hdl.synthesise``) and read the top module as a
    netlist: -> (Netlist, info).  Ports as hdl.py chooses them: two inputs (the first
    declared is ``a``) of 1..16 bits, one output of 1..32 bits.  info: {"top", "a", "b",
    "out" (port names), "a_bits", "b_bits", "p_bits", "a_signed", "b_signed", "out_signed"
    (declared ``signed``), "gates", "stat" (Yosys's cell statistics after constant folding,
    ``lutcore.units.cost``'s area proxy; None when Yosys gave none)}.  The netlist is Yosys's
    gates one for one; ``optimise`` it before running it.  Results are cached per file (path,
    mtime, size) and top."""
    path = hdl._check_file(path, (".v", ".sv"), "Verilog")
    timeout = hdl._timeout_arg(timeout)
    if top is not None and not isinstance(top, str):
        raise TypeError(f"top: expected a module name (str) or None, got {type(top).__name__}")
    if top is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", top):
        raise ValueError(f"top: expected a module name, got {top!r}")
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, top)
    if key not in _vcache:
        name, module, stat = hdl._synthesise(path, top, progress=progress, timeout=timeout)
        (na, pa), (nb, pb), (no, po) = _choose_ports(module, path)
        nl = from_yosys(module, na, nb, no, path)
        info = {"top": name, "a": na, "b": nb, "out": no, "a_bits": nl.a_bits, "b_bits": nl.b_bits,
                "p_bits": nl.p_bits, "a_signed": bool(pa.get("signed")), "b_signed": bool(pb.get("signed")),
                "out_signed": bool(po.get("signed")), "gates": nl.gate_count, "stat": stat}
        _vcache[key] = (nl, info)
    nl, info = _vcache[key]
    return nl, dict(info)


# --------------------------------------------------------------------------- C models
TRACER_HPP = r"""
// lutcore's symbolic tracer: integers whose value is a vector of netlist nodes.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <map>
#include <vector>

namespace lc_trace {
struct G { int x, y, z, tt; };
static std::vector<G> gates;
static std::map<std::array<int, 4>, int> seen;
static int base = 2;                              // 2 + a_bits + b_bits

[[noreturn]] static void unsupported(const char *what) {
    std::fprintf(stderr, "lutcore-trace: %s\n", what);
    std::fflush(stderr);
    std::_Exit(86);
}
static int cof(int tt, int w, int c) {            // tt with the variable of index weight w fixed to c
    int r = 0;
    for (int i = 0; i < 8; ++i) { int j = c ? (i | w) : (i & ~w); if ((tt >> j) & 1) r |= 1 << i; }
    return r;
}
static int gate(int x, int y, int z, int tt) {    // folds constants, repeated and unused inputs; hashes
    int v[3] = {x, y, z};
    const int w[3] = {4, 2, 1};
    for (int k = 0; k < 3; ++k)
        if (v[k] <= 1) { tt = cof(tt, w[k], v[k]); v[k] = 0; }
    for (int k = 0; k < 3; ++k)
        for (int l = k + 1; l < 3; ++l)
            if (v[k] > 1 && v[k] == v[l]) {       // variable l is variable k
                int r = 0;
                for (int i = 0; i < 8; ++i) {
                    int j = (i & w[k]) ? (i | w[l]) : (i & ~w[l]);
                    if ((tt >> j) & 1) r |= 1 << i;
                }
                tt = cof(r, w[l], 0);
                v[l] = 0;
            }
    int live = -1, n = 0;
    for (int k = 0; k < 3; ++k) {
        if (v[k] > 1 && cof(tt, w[k], 0) == cof(tt, w[k], 1)) { tt = cof(tt, w[k], 0); v[k] = 0; }
        if (v[k] > 1) { live = k; ++n; }
    }
    if (n == 0) return tt & 1;
    if (n == 1 && ((tt >> 0) & 1) == 0 && ((tt >> w[live]) & 1) == 1) return v[live];
    std::array<int, 4> key = {v[0], v[1], v[2], tt};
    auto it = seen.find(key);
    if (it != seen.end()) return it->second;
    gates.push_back({v[0], v[1], v[2], tt});
    int id = base + (int)gates.size() - 1;
    seen.emplace(key, id);
    return id;
}
static int NOT(int a) { return gate(0, 0, a, 0x55); }
static int AND(int a, int b) { return gate(0, a, b, 0x88); }
static int OR(int a, int b) { return gate(0, a, b, 0xEE); }
static int XOR(int a, int b) { return gate(0, a, b, 0x66); }
static int XOR3(int a, int b, int c) { return gate(a, b, c, 0x96); }
static int MAJ(int a, int b, int c) { return gate(a, b, c, 0xE8); }
static int MUX(int s, int t, int f) { return gate(s, t, f, 0xCA); }     // s ? t : f

template <int W, bool S> struct Sym;
template <class T> struct is_sym : std::false_type {};
template <int W, bool S> struct is_sym<Sym<W, S>> : std::true_type {};
template <class T> struct sym_of {                 // a plain integer type's symbolic twin
    using type = Sym<std::is_same<T, bool>::value ? 1 : (int)(8 * sizeof(T)),
                     std::is_same<T, bool>::value ? false : std::is_signed<T>::value>;
};
template <int W, bool S> struct promoted {           // C's integer promotions (x86-64: int is 32 bits)
    static constexpr int w = W < 32 ? 32 : W;
    static constexpr bool s = W < 32 ? true : S;
    using type = Sym<w, s>;
};
template <int W1, bool S1, int W2, bool S2> struct common {   // the usual arithmetic conversions
    using P1 = promoted<W1, S1>;
    using P2 = promoted<W2, S2>;
    static constexpr int w = P1::w > P2::w ? P1::w : P2::w;
    static constexpr bool s = P1::w == P2::w ? (P1::s && P2::s) : (P1::w > P2::w ? P1::s : P2::s);
    using type = Sym<w, s>;
};

template <int W, bool S> struct Sym {
    static_assert(W >= 1 && W <= 64, "width");
    static constexpr int width = W;
    static constexpr bool is_signed = S;
    std::array<int, W> b;
    Sym() { b.fill(0); }
    template <class T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
    Sym(T v) {
        unsigned long long u = (unsigned long long)v;
        if (W == 1) { b[0] = v != 0; return; }
        for (int i = 0; i < W; ++i) b[i] = i < 64 ? (int)((u >> i) & 1) : 0;
    }
    template <int W2, bool S2>
    Sym(const Sym<W2, S2> &o) {                      // conversion: truncate or extend; to _Bool: != 0
        if (W == 1 && W2 > 1) { int r = 0; for (int i = 0; i < W2; ++i) r = OR(r, o.b[i]); b[0] = r; return; }
        for (int i = 0; i < W; ++i) b[i] = i < W2 ? o.b[i] : (S2 ? o.b[W2 - 1] : 0);
    }
    int any() const { int r = 0; for (int i = 0; i < W; ++i) r = OR(r, b[i]); return r; }
    bool constant() const { for (int i = 0; i < W; ++i) if (b[i] > 1) return false; return true; }
    long long value() const {                        // a constant's value, as C reads it
        unsigned long long u = 0;
        for (int i = 0; i < W; ++i) u |= (unsigned long long)b[i] << i;
        if (S && W < 64 && b[W - 1]) u |= ~0ULL << W;
        return (long long)u;
    }
    explicit operator bool() const {
        int r = any();
        if (r > 1) unsupported("the model branches on its operands (an if, a loop or ?: condition, or && / || "
                               "in a condition, on a value that depends on A or B)");
        return r == 1;
    }
    operator long long() const {
        if (!constant()) unsupported("the model uses an operand-dependent value as a plain number (an array "
                                     "index, a switch, a call of a library function, a float or a pointer)");
        return value();
    }
    template <class R> Sym &operator=(const R &r) { *this = Sym(r); return *this; }
    Sym &operator=(const Sym &) = default;
    Sym(const Sym &) = default;
};

template <class T> using S_of = typename std::conditional<is_sym<T>::value, T, typename sym_of<T>::type>::type;
template <class T> struct ok : std::integral_constant<bool, is_sym<T>::value || std::is_integral<T>::value> {};
template <class A, class B> struct both_ok
    : std::integral_constant<bool, ok<A>::value && ok<B>::value && (is_sym<A>::value || is_sym<B>::value)> {};
template <class A, class B> using C_of = typename common<S_of<A>::width, S_of<A>::is_signed,
                                                          S_of<B>::width, S_of<B>::is_signed>::type;
template <class A> using P_of = typename promoted<S_of<A>::width, S_of<A>::is_signed>::type;
#define LC_BIN(A, B) template <class A, class B, typename std::enable_if<both_ok<A, B>::value, int>::type = 0>

template <std::size_t W>
static std::array<int, W> add(const std::array<int, W> &x, const std::array<int, W> &y, int c) {
    std::array<int, W> r;
    for (std::size_t i = 0; i < W; ++i) { r[i] = XOR3(x[i], y[i], c); c = MAJ(x[i], y[i], c); }
    return r;
}
template <std::size_t W> static int carry(const std::array<int, W> &x, const std::array<int, W> &y, int c) {
    for (std::size_t i = 0; i < W; ++i) c = MAJ(x[i], y[i], c);
    return c;
}
template <class T> static T inv(T x) { for (auto &v : x.b) v = NOT(v); return x; }

LC_BIN(A, B) C_of<A, B> operator&(const A &a, const B &b) {
    C_of<A, B> x(a), y(b), r; for (int i = 0; i < r.width; ++i) r.b[i] = AND(x.b[i], y.b[i]); return r; }
LC_BIN(A, B) C_of<A, B> operator|(const A &a, const B &b) {
    C_of<A, B> x(a), y(b), r; for (int i = 0; i < r.width; ++i) r.b[i] = OR(x.b[i], y.b[i]); return r; }
LC_BIN(A, B) C_of<A, B> operator^(const A &a, const B &b) {
    C_of<A, B> x(a), y(b), r; for (int i = 0; i < r.width; ++i) r.b[i] = XOR(x.b[i], y.b[i]); return r; }
LC_BIN(A, B) C_of<A, B> operator+(const A &a, const B &b) {
    C_of<A, B> x(a), y(b), r; r.b = add(x.b, y.b, 0); return r; }
LC_BIN(A, B) C_of<A, B> operator-(const A &a, const B &b) {
    C_of<A, B> x(a), y(b), r; r.b = add(x.b, inv(y).b, 1); return r; }
LC_BIN(A, B) C_of<A, B> operator*(const A &a, const B &b) {     // shift-and-add, low bits of the type
    C_of<A, B> x(a), y(b), acc;
    constexpr int W = C_of<A, B>::width;
    for (int i = 0; i < W; ++i) {
        if (y.b[i] == 0) continue;
        std::array<int, W> row;
        for (int j = 0; j < W; ++j) row[j] = j < i ? 0 : AND(x.b[j - i], y.b[i]);
        acc.b = add(acc.b, row, 0);
    }
    return acc;
}
template <int W, bool S> static Sym<W, S> shifted(const Sym<W, S> &x, long long n, bool left) {
    Sym<W, S> r;
    for (int i = 0; i < W; ++i) {
        long long j = left ? i - n : i + n;
        r.b[i] = (j >= 0 && j < W) ? x.b[j] : (!left && S ? x.b[W - 1] : 0);
    }
    return r;
}
template <class B> static long long amount(const B &n) {
    S_of<B> s(n);
    if (!s.constant()) unsupported("the model shifts by an operand-dependent amount");
    return s.value();
}
LC_BIN(A, B) P_of<A> operator<<(const A &a, const B &n) {
    long long k = amount(n); P_of<A> x(a); return k < 0 ? shifted(x, -k, false) : shifted(x, k, true); }
LC_BIN(A, B) P_of<A> operator>>(const A &a, const B &n) {
    long long k = amount(n); P_of<A> x(a); return k < 0 ? shifted(x, -k, true) : shifted(x, k, false); }
template <class A, class B> static void divisor(const A &a, const B &b, long long &d, int &k) {
    S_of<B> y(b);
    if (!y.constant()) unsupported("the model divides by an operand-dependent value (/ or %)");
    d = y.value();
    k = -1;
    for (int i = 0; i < 63; ++i) if (d == (1LL << i)) k = i;
    if (k < 0 && !S_of<A>(a).constant())
        unsupported("the model divides an operand-dependent value by a constant other than a power of two (/ or %)");
}
template <class T> static T quotient(const T &x, int k) {     // x / 2^k, C's truncation toward zero
    if (!T::is_signed) return shifted(x, k, false);
    T bias;                                                   // 2^k - 1 where x is negative
    for (int i = 0; i < T::width; ++i) bias.b[i] = i < k ? x.b[T::width - 1] : 0;
    T s; s.b = add(x.b, bias.b, 0);
    return shifted(s, k, false);
}
LC_BIN(A, B) C_of<A, B> operator/(const A &a, const B &b) {
    long long d; int k; divisor(a, b, d, k);
    C_of<A, B> x(a);
    if (k >= 0) return quotient(x, k);
    if (d == 0) unsupported("the model divides by zero");
    if (C_of<A, B>::is_signed) return C_of<A, B>(x.value() / d);
    return C_of<A, B>((long long)((unsigned long long)x.value() / (unsigned long long)d));
}
LC_BIN(A, B) C_of<A, B> operator%(const A &a, const B &b) {
    long long d; int k; divisor(a, b, d, k);
    C_of<A, B> x(a);
    if (k >= 0) { C_of<A, B> q = shifted(quotient(x, k), k, true), r; r.b = add(x.b, inv(q).b, 1); return r; }
    if (d == 0) unsupported("the model divides by zero");
    if (C_of<A, B>::is_signed) return C_of<A, B>(x.value() % d);
    return C_of<A, B>((long long)((unsigned long long)x.value() % (unsigned long long)d));
}
using Int = Sym<32, true>;
static Int bit(int v) { Int r; r.b[0] = v; return r; }
template <int W, bool S> static int less(const Sym<W, S> &x, const Sym<W, S> &y) {   // x < y
    std::array<int, W> a = x.b, c = inv(y).b;
    if (S) { a[W - 1] = NOT(a[W - 1]); c[W - 1] = NOT(c[W - 1]); }   // signed: flip the sign bits
    return NOT(carry<W>(a, c, 1));                                   // x - y borrows
}
template <int W, bool S> static int equal(const Sym<W, S> &x, const Sym<W, S> &y) {
    int r = 0; for (int i = 0; i < W; ++i) r = OR(r, XOR(x.b[i], y.b[i])); return NOT(r);
}
LC_BIN(A, B) Int operator==(const A &a, const B &b) { C_of<A, B> x(a), y(b); return bit(equal(x, y)); }
LC_BIN(A, B) Int operator!=(const A &a, const B &b) { C_of<A, B> x(a), y(b); return bit(NOT(equal(x, y))); }
LC_BIN(A, B) Int operator<(const A &a, const B &b) { C_of<A, B> x(a), y(b); return bit(less(x, y)); }
LC_BIN(A, B) Int operator>(const A &a, const B &b) { C_of<A, B> x(a), y(b); return bit(less(y, x)); }
LC_BIN(A, B) Int operator<=(const A &a, const B &b) { C_of<A, B> x(a), y(b); return bit(NOT(less(y, x))); }
LC_BIN(A, B) Int operator>=(const A &a, const B &b) { C_of<A, B> x(a), y(b); return bit(NOT(less(x, y))); }
LC_BIN(A, B) Int operator&&(const A &a, const B &b) { return bit(AND(S_of<A>(a).any(), S_of<B>(b).any())); }
LC_BIN(A, B) Int operator||(const A &a, const B &b) { return bit(OR(S_of<A>(a).any(), S_of<B>(b).any())); }
template <int W, bool S> Int operator!(const Sym<W, S> &a) { return bit(NOT(a.any())); }
template <int W, bool S> typename promoted<W, S>::type operator~(const Sym<W, S> &a) {
    return inv(typename promoted<W, S>::type(a)); }
template <int W, bool S> typename promoted<W, S>::type operator-(const Sym<W, S> &a) {
    typename promoted<W, S>::type x(a), z; z.b = add(z.b, inv(x).b, 1); return z; }
template <int W, bool S> typename promoted<W, S>::type operator+(const Sym<W, S> &a) {
    return typename promoted<W, S>::type(a); }
template <int W, bool S> typename promoted<W, S>::type abs(const Sym<W, S> &a) {
    typename promoted<W, S>::type x(a), n = -x, r;
    constexpr int PW = promoted<W, S>::w;
    int neg = S ? x.b[PW - 1] : 0;
    for (int i = 0; i < PW; ++i) r.b[i] = MUX(neg, n.b[i], x.b[i]);
    return r;
}
#define LC_ASSIGN(op, aop) \
    template <int W, bool S, class B, typename std::enable_if<ok<B>::value, int>::type = 0> \
    Sym<W, S> &operator aop(Sym<W, S> &a, const B &b) { a = Sym<W, S>(a op b); return a; }
LC_ASSIGN(+, +=) LC_ASSIGN(-, -=) LC_ASSIGN(*, *=) LC_ASSIGN(/, /=) LC_ASSIGN(%, %=) LC_ASSIGN(&, &=)
LC_ASSIGN(|, |=) LC_ASSIGN(^, ^=) LC_ASSIGN(<<, <<=) LC_ASSIGN(>>, >>=)
template <int W, bool S> Sym<W, S> &operator++(Sym<W, S> &a) { a += 1; return a; }
template <int W, bool S> Sym<W, S> &operator--(Sym<W, S> &a) { a -= 1; return a; }
template <int W, bool S> Sym<W, S> operator++(Sym<W, S> &a, int) { Sym<W, S> o = a; a += 1; return o; }
template <int W, bool S> Sym<W, S> operator--(Sym<W, S> &a, int) { Sym<W, S> o = a; a -= 1; return o; }
}  // namespace lc_trace

typedef lc_trace::Sym<8, false> lc_sym_u8;   typedef lc_trace::Sym<8, true> lc_sym_i8;
typedef lc_trace::Sym<16, false> lc_sym_u16; typedef lc_trace::Sym<16, true> lc_sym_i16;
typedef lc_trace::Sym<32, false> lc_sym_u32; typedef lc_trace::Sym<32, true> lc_sym_i32;
typedef lc_trace::Sym<64, false> lc_sym_u64; typedef lc_trace::Sym<64, true> lc_sym_i64;
typedef lc_trace::Sym<1, false> lc_sym_bool;
using lc_trace::abs;
"""

# The tracer's translation unit: the C headers a model may include, first (their include
# guards keep them from being read again under the symbolic names), the tracer, the type
# names, the model (its keyword types already rewritten to the symbolic names), then main.
_TRACE_COPY, _TRACE_TU = "lutcore-model-sym.c", "lutcore-trace.cpp"
_TRACE_MAIN = r"""#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <limits.h>
#include <stdbool.h>
#include "lutcore-tracer.hpp"
#define int8_t lc_sym_i8
#define uint8_t lc_sym_u8
#define int16_t lc_sym_i16
#define uint16_t lc_sym_u16
#define int32_t lc_sym_i32
#define uint32_t lc_sym_u32
#define int64_t lc_sym_i64
#define uint64_t lc_sym_u64
#define bool lc_sym_bool
#define _Bool lc_sym_bool
// C++'s own keywords, which a C model may use as names
#define new lc_cxx_new
#define delete lc_cxx_delete
#define class lc_cxx_class
#define this lc_cxx_this
#define template lc_cxx_template
#define typename lc_cxx_typename
#define private lc_cxx_private
#define public lc_cxx_public
#define protected lc_cxx_protected
#define virtual lc_cxx_virtual
#define operator lc_cxx_operator
#define namespace lc_cxx_namespace
#define using lc_cxx_using
#define friend lc_cxx_friend
#define throw lc_cxx_throw
#define try lc_cxx_try
#define catch lc_cxx_catch
#define explicit lc_cxx_explicit
#define mutable lc_cxx_mutable
#define typeid lc_cxx_typeid
#define main __lutcore_user_main
#include "{copy}"
#undef main
#undef new
#undef delete
#undef class
#undef this
#undef template
#undef typename
#undef private
#undef public
#undef protected
#undef virtual
#undef operator
#undef namespace
#undef using
#undef friend
#undef throw
#undef try
#undef catch
#undef explicit
#undef mutable
#undef typeid
#undef int8_t
#undef uint8_t
#undef int16_t
#undef uint16_t
#undef int32_t
#undef uint32_t
#undef int64_t
#undef uint64_t
#undef bool
#undef _Bool
namespace lc_trace {{
template <class R, class P, class Q> static int run(R (*f)(P, Q), const char *out, int ab, int bb, int pb) {{
    typedef typename std::decay<P>::type A;
    typedef typename std::decay<Q>::type B;
    static_assert(is_sym<A>::value && is_sym<B>::value && is_sym<R>::value, "lutcore_trace_signature");
    const char *narrow = "lutcore-trace: %s=%d but the %s parameter has %d bits\n";
    if (ab > A::width) {{ std::fprintf(stderr, narrow, "a_bits", ab, "first", A::width); return 88; }}
    if (bb > B::width) {{ std::fprintf(stderr, narrow, "b_bits", bb, "second", B::width); return 88; }}
    base = 2 + ab + bb;
    A a; B b;
    for (int i = 0; i < A::width; ++i) a.b[i] = i < ab ? 2 + i : (A::is_signed ? 2 + ab - 1 : 0);
    for (int j = 0; j < B::width; ++j) b.b[j] = j < bb ? 2 + ab + j : (B::is_signed ? 2 + ab + bb - 1 : 0);
    R r = f(a, b);
    std::vector<int> o(pb);
    for (int p = 0; p < pb; ++p) o[p] = p < R::width ? r.b[p] : (R::is_signed ? r.b[R::width - 1] : 0);
    int head[11] = {{0x4c43544e, ab, bb, pb, A::width, A::is_signed, B::width, B::is_signed, R::width,
                    R::is_signed, (int)gates.size()}};
    FILE *fp = std::fopen(out, "wb");
    if (!fp) return 98;
    bool okw = std::fwrite(head, sizeof(int), 11, fp) == 11;
    for (const G &g : gates) {{
        int row[4] = {{g.x, g.y, g.z, g.tt}};
        okw = okw && std::fwrite(row, sizeof(int), 4, fp) == 4;
    }}
    okw = okw && std::fwrite(o.data(), sizeof(int), pb, fp) == (size_t)pb;
    if (std::fclose(fp) != 0 || !okw) return 99;
    return 0;
}}
}}  // namespace lc_trace
int main(int argc, char **argv) {{
    if (argc < 5) return 97;
    return lc_trace::run(&{fn}, argv[1], std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
}}
"""

# The plain-C check: the model's own translation unit (a byte copy, its main renamed away)
# with one function the driver calls on long long operands (converted to the parameters'
# types by C), and a driver that reads the pairs and the operands' signedness (from the
# tracer's output header) and writes the products.
_CHECK_TU = """#define main __lutcore_user_main
#include "{copy}"
#undef main
long long __lutcore_call(long long __lutcore_a, long long __lutcore_b);
long long __lutcore_call(long long __lutcore_a, long long __lutcore_b)
{{ return (long long){fn}(__lutcore_a, __lutcore_b); }}
"""
_CHECK_DRIVER = r"""#include <stdio.h>
#include <stdlib.h>
long long __lutcore_call(long long, long long);
int main(int argc, char **argv) {
    int head[11];
    if (argc < 4) return 97;
    FILE *h = fopen(argv[2], "rb");
    if (!h || fread(head, sizeof(int), 11, h) != 11) return 96;
    fclose(h);
    int ab = head[1], bb = head[2], as = head[5], bs = head[7];
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 96;
    long long n;
    if (fread(&n, sizeof n, 1, f) != 1 || n < 0 || n > (1 << 22)) return 96;
    long long *buf = malloc(sizeof(long long) * (size_t)(2 * n + 1));
    if (!buf || fread(buf, sizeof(long long), (size_t)(2 * n), f) != (size_t)(2 * n)) return 96;
    fclose(f);
    for (long long i = 0; i < n; ++i) {
        long long a = buf[2 * i], b = buf[2 * i + 1];
        if (as && (a >> (ab - 1) & 1)) a -= 1LL << ab;          /* the operand's value: sign-extended */
        if (bs && (b >> (bb - 1) & 1)) b -= 1LL << bb;
        buf[i] = __lutcore_call(a, b);
    }
    FILE *o = fopen(argv[3], "wb");
    if (!o) return 98;
    if (fwrite(buf, sizeof(long long), (size_t)n, o) != (size_t)n || fclose(o) != 0) return 99;
    return 0;
}
"""
_TRACE_CODES = {86: "used a construct the tracer does not support", 88: "has a parameter narrower than the operand",
                96: "could not read its inputs", 97: "got too few arguments", 98: "could not create its output file",
                99: "could not write its output"}
CHECK_PAIRS = 4096          # random pairs the compiled model is evaluated on (plus the edge pairs)


def _cxx_compiler():
    return hdl.find_compiler("CXX", ("c++", "g++", "clang++"))


_C_KEYWORD_TYPE = re.compile(r"\b(?:(?:unsigned|signed|short|long|int|char|_Bool)\b\s*)+(?!\s*double\b)")
_C_SKIP = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


def _sym_name(words):
    ws = words.split()
    if "_Bool" in ws:
        return "lc_sym_bool"
    uns = "unsigned" in ws
    if "char" in ws:
        bits = 8
    elif "short" in ws:
        bits = 16
    elif "long" in ws:
        bits = 64
    else:
        bits = 32
    return f"lc_sym_{'u' if uns else 'i'}{bits}"


def _symbolic_source(text: str) -> str:
    """The model with its keyword integer types (``unsigned char``, ``int``, ``long long``...,
    which no macro can rename) replaced by the symbolic names; comments and literals kept."""
    out, pos = [], 0
    for m in _C_SKIP.finditer(text):
        out.append(_C_KEYWORD_TYPE.sub(lambda t: _sym_name(t.group(0)) + " ", text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_C_KEYWORD_TYPE.sub(lambda t: _sym_name(t.group(0)) + " ", text[pos:]))
    return "".join(out)


def _check_pairs(a_bits, b_bits):
    """Fixed-seed random operand codes plus the edge pairs (0, 1, all ones, the sign bit, the
    largest positive, each with each): (N, 2) int64."""
    def edges(bits):
        m = (1 << bits) - 1
        return sorted({0, 1, m, 1 << (bits - 1), m >> 1, 2 & m, (m - 1) & m})
    ea, eb = edges(a_bits), edges(b_bits)
    e = np.array([(x, y) for x in ea for y in eb], np.int64)
    rng = np.random.default_rng(0x6C75)
    r = np.stack([rng.integers(0, 1 << a_bits, CHECK_PAIRS), rng.integers(0, 1 << b_bits, CHECK_PAIRS)], 1)
    return np.concatenate([e, r.astype(np.int64)])


def _operand_value(code, bits, signed):
    return int(code) - (int(code) >> (bits - 1) & 1) * (1 << bits) if signed else int(code)


def from_c(path, function: str, *, a_bits: int, b_bits: int, p_bits: int, timeout: float = 60):
    """Trace ``function(A, B)`` of C file ``path`` into a netlist: -> (Netlist, info).

    The function takes two integers and returns one (any of C's integer types, as on x86-64
    Linux).  Operand a is ``a_bits`` input bits fed to the first parameter — zero above them
    for an unsigned parameter type, copies of bit a_bits-1 (sign extension) for a signed one
    — and likewise b; the product is the low ``p_bits`` bits of the return value (extended
    by the return type's signedness when p_bits is wider).  What the tracer follows and
    refuses: ``TRACER_HPP`` and DESIGN.md; a model that branches on its operands (``if``,
    ``?:``, a loop condition), indexes an array or calls a library function with them,
    shifts by them or divides by them is refused naming the construct — give such a circuit
    as Verilog.  The traced netlist is held to the model compiled as plain C on
    ``CHECK_PAIRS`` fixed-seed random pairs plus the edge pairs; a disagreement is a
    ValueError naming the first pair.  The compilers, the tracer and the model run under
    hdl.py's keeper with its limits (``timeout`` seconds for the compiles, again for the
    runs).  info: {"function", "a_bits", "b_bits", "p_bits", "a_type", "b_type",
    "return_type" (e.g. "uint16_t"-like "16-bit unsigned"), "gates", "checked" (pairs)}."""
    path = hdl._check_file(path, (".c",), "C")
    timeout = hdl._timeout_arg(timeout)
    if function is None:
        raise TypeError("function: expected the name of the C function to trace (str), got None")
    function = hdl._function_arg(function)
    a_bits = _width_arg(a_bits, "a_bits", MAX_OPERAND_BITS)
    b_bits = _width_arg(b_bits, "b_bits", MAX_OPERAND_BITS)
    p_bits = _width_arg(p_bits, "p_bits", MAX_PRODUCT_BITS)
    source = hdl._read_source(path)
    text = source.decode("utf-8", "replace")
    defs = hdl._c_definitions(text)
    if function not in defs and not re.search(rf"\b{function}\s*\(", text):
        raise hdl._fail(path, f"no function {function!r} (found: {', '.join(defs) or 'none'})")
    declared = f"{defs[function][0]} {function}({defs[function][1]})" if function in defs else None
    if declared is not None and len(hdl._c_params(defs[function][1])) != 2:
        raise hdl._fail(path, f"function {function} is declared `{declared}`: expected two integer parameters "
                              f"(the operands) and an integer return")
    cc, cxx = hdl._c_compiler(), _cxx_compiler()
    if cc is None or cxx is None:
        raise FileNotFoundError(f"{path}: no {'C' if cc is None else 'C++'} compiler found (looked for "
                                f"{'$CC, cc, gcc, clang' if cc is None else '$CXX, c++, g++, clang++'}); a C "
                                f"model is traced as C++ and checked as C: install both (e.g. apt-get install g++)")
    fn = "__lutcore_user_main" if function == "main" else function
    where = f"function {function}"
    tmp = tempfile.mkdtemp(prefix="lutcore-trace-")
    try:
        def put(name, data):
            with open(os.path.join(tmp, name), "wb" if isinstance(data, bytes) else "w") as f:
                f.write(data)
        put(hdl._C_MODEL_COPY, source)
        put(hdl._C_MODEL_TU, _CHECK_TU.format(copy=hdl._C_MODEL_COPY, fn=fn))
        put(hdl._C_DRIVER_TU, _CHECK_DRIVER)
        put(_TRACE_COPY, _symbolic_source(text))
        put("lutcore-tracer.hpp", TRACER_HPP)
        put(_TRACE_TU, _TRACE_MAIN.format(copy=_TRACE_COPY, fn=fn))
        pairs = _check_pairs(a_bits, b_bits)
        with open(os.path.join(tmp, "pairs.bin"), "wb") as f:
            f.write(np.array([pairs.shape[0]], "<i8").tobytes() + pairs.astype("<i8").tobytes())
        include = os.path.dirname(os.path.abspath(path))
        end = hdl._run_limited(
            [cc + ["-O0", "-Wall", "-Wextra", "-I", include, "-c", hdl._C_MODEL_TU, "-o", "model.o"],
             cc + ["-O0", "-o", "check", hdl._C_DRIVER_TU, "model.o", "-lm"],
             cxx + ["-std=c++17", "-O0", "-w", "-I", include, "-o", "trace", _TRACE_TU, "-lm"]],
            tmp, timeout, hdl.COMPILER_FILES, keep=hdl._COMPILER_LOG)
        _compile_failed(path, end, timeout, function, declared)
        end = hdl._run_limited([[os.path.join(tmp, "trace"), "trace.bin", str(a_bits), str(b_bits), str(p_bits)],
                                [os.path.join(tmp, "check"), "pairs.bin", "trace.bin", "check.bin"]],
                               tmp, timeout, hdl.CHILD_OUTPUT)
        _run_failed(path, end, timeout, where)
        head = np.fromfile(os.path.join(tmp, "trace.bin"), dtype="<i4")
        got = np.fromfile(os.path.join(tmp, "check.bin"), dtype="<i8")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    G = int(head[10])
    if head[0] != 0x4C43544E or head.size != 11 + 4 * G + p_bits or got.size != pairs.shape[0]:
        raise hdl._fail(path, f"{where}: the tracer's output is incomplete")
    gates = head[11:11 + 4 * G].reshape(G, 4)
    nl = Netlist(a_bits, b_bits, p_bits, gates, head[11 + 4 * G:])
    want = got & ((1 << p_bits) - 1)
    have = nl.evaluate(pairs[:, 0], pairs[:, 1])
    bad = np.flatnonzero(have != want)
    a_signed, b_signed, r_signed = bool(head[5]), bool(head[7]), bool(head[9])
    if bad.size:
        i = int(bad[0])
        va, vb = (_operand_value(pairs[i, 0], a_bits, a_signed), _operand_value(pairs[i, 1], b_bits, b_signed))
        raise hdl._fail(path, f"{where}: the traced netlist disagrees with the compiled model at A={va}, B={vb} "
                              f"(low {p_bits} bits {int(have[i]):#x}, the model's {int(want[i]):#x}; "
                              f"{bad.size} of {pairs.shape[0]} checked pairs differ): the model uses C semantics "
                              f"the tracer does not follow; give the circuit as Verilog")

    def ty(w, s):
        return "_Bool" if w == 1 else f"{'int' if s else 'uint'}{w}_t"
    info = {"function": function, "a_bits": a_bits, "b_bits": b_bits, "p_bits": p_bits,
            "a_type": ty(int(head[4]), a_signed), "b_type": ty(int(head[6]), b_signed),
            "return_type": ty(int(head[8]), r_signed), "a_signed": a_signed, "b_signed": b_signed,
            "return_signed": r_signed, "gates": nl.gate_count, "checked": int(pairs.shape[0])}
    return nl, info


def _compile_failed(path, end, timeout, function, declared):
    where = f"function {function}: the {'C' if end.step < 2 else 'C++ (tracer)'} compiler"
    if end.how == "timeout":
        raise hdl._fail(path, f"{where} gave no result within {timeout:g} s (killed, with every process it "
                              f"started)")
    if end.how == "output":
        raise hdl._fail(path, f"{where} wrote more than {hdl._mib(hdl.CHILD_OUTPUT)} of messages (killed)")
    if end.how == "error":
        raise hdl._fail(path, f"{where} could not be run: {end.message}")
    if end.how == "signal":
        raise hdl._fail(path, f"{where} was killed by {hdl._signal_name(end.code)}")
    if end.code == 0:
        return
    log = end.head.decode("utf-8", "replace")
    if end.step < 2:                                            # the plain C compile: hdl.py's message
        err = hdl._compiler_message(path, log, function, declared)
        raise hdl._fail(path, f"function {function}: {str(err)[len(path) + 2:]}")
    log = log.replace(_TRACE_COPY, path).replace(_TRACE_TU, "<tracer>")
    if "lutcore_trace_signature" in log:
        raise hdl._fail(path, f"function {function}"
                              f"{' is declared `' + declared + '`, which' if declared else ''} does not take two "
                              f"integers and return an integer (the tracer needs C integer types)")
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.search(r"\berror\b", ln)]
    msg = (errs or lines or ["?"])[0][:400]
    raise hdl._fail(path, f"function {function}: the tracer (the model compiled as C++ with symbolic integer "
                          f"types) did not compile: {msg}; a model the tracer cannot read can be given as Verilog")


def _run_failed(path, end, timeout, where):
    what = "the tracer" if end.step == 0 else "the compiled model"
    if end.how == "exit" and end.code == 0:
        return
    last = hdl._last_line(end.tail)
    if end.how == "exit" and end.step == 0 and end.code == 86:
        said = last.split("lutcore-trace: ", 1)[-1]
        hint = "give the circuit as Verilog (a netlist cannot branch)" if "branches" in said else \
               "give the circuit as Verilog"
        raise hdl._fail(path, f"{where}: cannot be traced: {said}; {hint}")
    if end.how == "exit" and end.step == 0 and end.code == 88:
        raise hdl._fail(path, f"{where}: {last.split('lutcore-trace: ', 1)[-1]}")
    if end.how == "timeout":
        how = f"gave no result within {timeout:g} s (killed)"
    elif end.how == "exit" and end.code in _TRACE_CODES:
        how = _TRACE_CODES[end.code]
    else:
        how = hdl._model_ended(end, timeout, True) or f"exited with status {end.code}"
    raise hdl._fail(path, f"{where}: {what} {how}{' (its last words: ' + last + ')' if last else ''}")


# ------------------------------------------------------------------ wide circuits as Units
def decide_netlist_format(path, net, *, stated=None, named=None, declared=None, out_signed=False,
                          what="the circuit"):
    """(Format, the netlist with its outputs fitted to the product's width, how) of a circuit
    too wide for a table: ``decide_format``'s rules, the values read on the pairs a wide unit's
    metrics read (``Units._sample_pairs``); a wider output's bits above the product must be its
    extension (the same node, or equal on every sampled pair), a narrower one is extended as the
    port says."""
    from lutcore.units import _sample_pairs
    from lutcore.units.formats import Format
    wa, wb = net.a_bits, net.b_bits
    net = optimise(net)
    if stated is not None:
        if (stated.a_bits, stated.b_bits) != (wa, wb):
            raise hdl._fail(path, f"format={stated} states {stated.a_bits} x {stated.b_bits}-bit operands, but {what} "
                              f"has {wa} x {wb}")
        fmt, how = stated, "format as stated"
    elif declared is not None and any(declared):
        fmt, how = Format(wa, declared[0], wb, declared[1]), "signedness as the ports declare it"
    elif named is not None and (named.a_bits, named.b_bits) == (wa, wb):
        fmt, how = named, "format from its EvoApproxLib name"
    else:
        errs = {}
        for sg in (True, False):
            f = Format(wa, sg, wb, sg)
            a, b = _sample_pairs(f)
            v = _fit_values(net.evaluate(a, b), net.p_bits, f.p_bits, out_signed)
            errs[sg] = float(np.abs(f.read_product(v) - a * b).mean())
        sg = errs[True] <= errs[False]
        fmt = Format(wa, sg, wb, sg)
        how = (f"{'signed' if sg else 'unsigned'} operands: the products are closer to a*b of "
               f"{'signed' if sg else 'unsigned'} codes (mean |error| {errs[sg]:.4g} against {errs[not sg]:.4g} "
               f"on sampled pairs)")
    p, q = fmt.p_bits, net.p_bits
    outs = [int(o) for o in net.outputs]
    if q > p:
        top = outs[p - 1]
        want = top if fmt.p_signed else 0
        if any(o != want for o in outs[p:]):
            a, b = _sample_pairs(fmt)
            raw = net.evaluate(a, b)
            hi = raw >> p
            ext = ((raw >> (p - 1)) & 1) * ((1 << (q - p)) - 1) if fmt.p_signed else 0
            bad = np.flatnonzero(hi != ext)
            if bad.size:
                i = int(bad[0])
                raise hdl._fail(path, f"{what} gives {int(raw[i])} at a={int(a[i])}, b={int(b[i])}: a {fmt} product "
                                  f"has {p} bits, and the output's bits above them are not an extension of the "
                                  f"product (state a wider product with format=)")
        outs = outs[:p]
        how += f"; {q} output bits, bits {p}..{q - 1} {'a sign' if fmt.p_signed else 'a zero'} extension (checked)"
    elif q < p:
        outs = outs + [outs[-1] if out_signed else 0] * (p - q)
        how += f"; the {q}-bit output {'sign' if out_signed else 'zero'}-extended to {p}"
    net = Netlist(wa, wb, p, net.gates, np.array(outs, np.int32))
    return fmt, net, how


def _fit_values(raw, q, p, out_signed):
    """Output patterns of q bits as p-bit patterns (cut, or extended as the port says)."""
    raw = np.asarray(raw, np.int64)
    if q >= p:
        return raw & ((1 << p) - 1)


_ucache: dict = {}          # (realpath, mtime_ns, size, top, stated) -> (Format, Netlist, source)


def units_from_verilog(path, top, wide, *, timeout: float = 120, progress: bool = True):
    """The Units of a Verilog circuit too wide for a table (``hdl.from_verilog`` raised ``wide``,
    an ``hdl.WideCircuit`` carrying the module's name, Yosys's stat and the stated format)."""
    from lutcore.units import Units
    from lutcore.units import cost as _cost
    from lutcore.units.formats import evoapprox_name
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size, top, str(wide.stated))
    if key not in _ucache:
        net, info = from_verilog(path, top, timeout=timeout, progress=progress)
        fmt, net, how = decide_netlist_format(
            path, net, stated=wide.stated, named=evoapprox_name(wide.name),
            declared=(info["a_signed"], info["b_signed"]), out_signed=info["out_signed"], what=f"module {wide.name}")
        src = (f"{os.path.basename(path)}: module {wide.name}, inputs {info['a']} (row) and {info['b']}, output "
               f"{info['out']} ({info['p_bits']} bits): {fmt}; {how}; a netlist of {net.gate_count} gates")
        _ucache[key] = (fmt, net, src)
    fmt, net, src = _ucache[key]
    u = Units.from_netlist(net, fmt, name=wide.name)
    u.source, u.loaded_from = src, path
    _cost.attach(u, path, stat=wide.stat)
    return u


def units_from_c(path, wide, *, timeout: float = 60):
    """The Units of a C model too wide for a table (``hdl.from_c`` raised ``wide``, carrying the
    function and the format its name or ``format=`` gives): traced into its netlist."""
    from lutcore.units import Units
    from lutcore.units import cost as _cost
    fmt, function = wide.format, wide.function
    net, info = from_c(path, function, a_bits=fmt.a_bits, b_bits=fmt.b_bits, p_bits=fmt.p_bits, timeout=timeout)
    net = optimise(net)
    u = Units.from_netlist(net, fmt, name=function)
    u.source = (f"{os.path.basename(path)}: function {function}, traced into a netlist of {net.gate_count} "
                f"gates (checked against the compiled model on {info.get('checked', 0)} pairs): {fmt}; "
                f"{'format as stated' if wide.stated is not None else 'format from its EvoApproxLib name'}")
    u.loaded_from = path
    _cost.attach(u, path)
    return u


def exact_netlist(fmt) -> Netlist:
    """The exact product a*b of ``fmt`` (a ``Format``) as a netlist: the partial products of the
    operands extended to the product's width (sign or zero, as each operand is), reduced column by
    column with full adders (one XOR3 and one MAJ gate) and half adders, modulo 2^p_bits."""
    wa, wb, p = fmt.a_bits, fmt.b_bits, fmt.p_bits
    gates: list = []
    base = 2 + wa + wb

    def gate(x, y, z, tt):
        gates.append((x, y, z, tt))
        return base + len(gates) - 1

    def bit(which, i):                                   # operand bit i, extended beyond the width
        w, signed, first = (wa, fmt.a_signed, 2) if which == "a" else (wb, fmt.b_signed, 2 + wa)
        if i < w:
            return first + i
        return first + w - 1 if signed else 0

    cols = [[] for _ in range(p)]
    for i in range(p):
        ai = bit("a", i)
        if ai == 0:
            continue
        for j in range(p - i):
            bj = bit("b", j)
            if bj:
                cols[i + j].append(gate(ai, bj, 0, 0x40))             # AND
    for c in range(p):
        col = cols[c]
        while len(col) > 1:
            if len(col) >= 3:
                x, y, z = col.pop(), col.pop(), col.pop()
                col.insert(0, gate(x, y, z, 0x96))                   # XOR3: the sum stays
                if c + 1 < p:
                    cols[c + 1].append(gate(x, y, z, 0xE8))           # MAJ: the carry moves up
            else:
                x, y = col.pop(), col.pop()
                col.insert(0, gate(x, y, 0, 0x14))                    # XOR2
                if c + 1 < p:
                    cols[c + 1].append(gate(x, y, 0, 0x40))           # AND2
    outputs = [col[0] if col else 0 for col in cols]
    return Netlist(wa, wb, p, np.array(gates, np.int32).reshape(-1, 4), np.array(outputs, np.int32))
