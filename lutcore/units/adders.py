"""Adders for a declared accumulator: exact, or approximate adder circuits (EvoApproxLib's add8u,
add8s, add8se, add9se, add12u, add12se, add16u, add16se; any Verilog or C adder).

Design: an adder is a gate netlist (``lutcore.units.netlist.Netlist``, the IR the bit-sliced
kernels run) with two ``bits``-bit operands -- a, the accumulator's register, and b, the
addend -- and ``out_bits`` = bits + 1 (the carry out, or the sign-extended sum) or bits
output bits, plus whether it reads its operands as ``signed``.  ``lutcore.units.accumulator``
says how a register uses it; the kernels (``lutcore.ops.accum``) evaluate it bit-sliced.

    Adder.exact(bits, signed, out_bits=None)    a ripple-carry adder's netlist (out_bits: bits + 1)
    Adder.from_netlist(net, signed, name=)      any netlist of the shape
    Adder.from_verilog(path, top=None, *, signed=None, timeout=120)
    Adder.from_c(path, function=None, *, signed=None, bits=None, out_bits=None, timeout=60)
    adder.add(a, b) -> int64                    its outputs on operand values, read as a number
                                                (out_bits wide, signed as the adder is)
    adder.error_metrics() -> dict               EvoApproxLib's adder metrics (lutcore.units.metrics)
    adder.verify() -> AdderReport               the metrics, cost and published figures, printable
    adder.save(dir) / Adder.load(dir)           adder.json + adder.net
    evoapprox_adder_name(name)                  add8se_72D -> (8, True, 9); else None

Reading a circuit.  ``from_verilog`` has Yosys map the module to gates and ``from_c`` traces
the C model symbolically (checked against the model compiled as C, in a child process: user
code never runs here) -- ``lutcore.units.netlist``'s readers, the multipliers' own.  Then:

* operands: a (the register) is the input port / C parameter named ``A`` (any case), else the
  first declared; b the other.  EvoApproxLib's signed adders declare ``(B, A)``: mapped by name.
* signedness and widths: ``signed=`` (and for C ``bits=``, ``out_bits=``) as stated (the name
  is then not read for it); else as the module's / function's EvoApproxLib name says
  (``add<n>u_``: unsigned, n + 1 outputs; ``add<n>se_``: signed, n + 1; ``add<n>s_``: signed,
  n, wrapping); else (Verilog) both operand ports declared ``signed``; else a ValueError
  asking for ``signed=`` -- never a guess.  Both operands one width of 1..16 bits; a Verilog
  output of bits or bits + 1; a name read whose widths are not the ports' is an error naming
  the file.  A C model's return is read at bits + 2 bits: the
  output is its low ``out_bits`` (the name's; else bits when bit ``bits`` is always 0 or, for a
  signed adder, the sign extension of bit bits - 1; else bits + 1), the bits above must extend
  it.
* cost and published figures from the header / meta.json (``lutcore.units.cost.attach``),
  the published ones checked against ``error_metrics()`` (a ``PublishedFigureWarning``).

The netlist is ``optimise``d; it runs on ``lutcore.ops.netlist.products`` (numpy's
``Netlist.evaluate`` when the build lacks the family).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np

__all__ = ["Adder", "ripple_netlist", "AdderReport", "MAX_ADDER_BITS", "evoapprox_adder_name"]

MAX_ADDER_BITS = 16          # the netlist kernels' operand width
ADDER_JSON, ADDER_NET = "adder.json", "adder.net"

_EVO_ADDER = re.compile(r"(?i)(?:^|[^a-z0-9])add(\d+)(se|s|u)(?:_|$)")


def evoapprox_adder_name(name):
    """(bits, signed, out_bits) an EvoApproxLib adder's name states, else None:
    ``add8u_006`` -> (8, False, 9), ``add12se_54K`` -> (12, True, 13), ``add8s_6FR`` -> (8, True, 8)."""
    m = _EVO_ADDER.search(name or "")
    if not m:
        return None
    n, kind = int(m.group(1)), m.group(2).lower()
    return n, kind != "u", n if kind == "s" else n + 1



def ripple_netlist(n: int, signed: bool, out_bits: int, k: int = 0, low: str = "or"):
    """A ripple-carry adder's netlist (two n-bit operands, a the register, b the addend): from
    bit k up an exact full adder a bit (XOR3, majority); the k low sum bits as ``low`` says ("or":
    a_i | b_i, carry into bit k a_{k-1} & b_{k-1}; "zero": constant 0, no carry); then, for
    ``out_bits`` = n + 1, bit n (the sign extension when signed, else the carry out).  k = 0 is
    the exact adder (``Adder.exact``); ``lutcore.units.adder_designs`` builds the others."""
    from lutcore.units.netlist import Netlist
    gates: list = []

    def gate(x, y, z, tt):
        gates.append((x, y, z, tt))
        return 2 + 2 * n + len(gates) - 1

    a = [2 + i for i in range(n)]
    b = [2 + n + i for i in range(n)]
    outs, carry = [], 0                              # node 0: constant 0
    if low == "or":
        outs = [gate(a[i], b[i], 0, 0xFC) for i in range(k)]                 # x | y
        if k:
            carry = gate(a[k - 1], b[k - 1], 0, 0xC0)                        # x & y
    else:
        outs = [0] * k
    for i in range(k, n):
        outs.append(gate(a[i], b[i], carry, 0x96))                           # x ^ y ^ z
        carry = gate(a[i], b[i], carry, 0xE8)                                # majority
    if out_bits == n + 1:
        outs.append(gate(a[n - 1], b[n - 1], carry, 0x96) if signed else carry)
    return Netlist(n, n, out_bits, np.array(gates, np.int32).reshape(-1, 4), np.array(outs, np.int32))


@dataclasses.dataclass(frozen=True)

class AdderReport:
    """``Adder.verify()``: what the adder is and its EvoApproxLib metrics; ``str()`` prints it."""
    name: str
    digest: str
    bits: int
    signed: bool
    out_bits: int
    gates: int
    exact: bool
    metrics: dict
    cost: dict
    published: dict
    source: str | None = None

    @property
    def ok(self) -> bool:
        return self.exact

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "ok": self.ok}

    def __str__(self) -> str:
        m = self.metrics
        lines = [f"adder {self.name} {self.digest[:16]}  {self.bits}-bit {'signed' if self.signed else 'unsigned'}, "
                 f"{self.out_bits} output bits, {self.gates} gates: {'exact' if self.exact else 'APPROX'}"]
        if self.source:
            lines.append(f"  from {self.source}")
        pairs = int(m.get("pairs", 0))
        over = (f"{pairs:,} sampled pairs (fixed seed, and every pair of edge values)" if m.get("sampled")
                else f"all {pairs:,} pairs")
        if self.out_bits == self.bits:
            over += " whose sum does not overflow"
        lines.append(f"error metrics (EvoApproxLib; {over} vs the exact sum a + b):")
        lines.append("  " + "  ".join(f"{k} {m[k]:.4g}" for k in ("mae", "mae_pct", "wce", "wce_pct")))
        lines.append("  " + "  ".join(f"{k} {m[k]:.4g}" for k in ("wcre_pct", "ep_pct", "mre_pct", "mse")))
        if self.cost:
            figs = [f"{k} {self.cost[k]:g}" for k in ("power_mw", "area_um2", "delay_ns", "cells", "transistors")
                    if k in self.cost]
            lines.append(f"cost: {', '.join(figs) or 'none'} ({self.cost.get('source', 'source not stated')})")
        if self.published:
            lines.append("published: " + "  ".join(f"{k} {v:g}" for k, v in self.published.items()))
        return "\n".join(lines)


class Adder:
    """A ``bits``-bit adder as a gate netlist (the module docstring)."""

    def __init__(self, netlist, signed: bool, *, name: str | None = None):
        from lutcore.units.netlist import Netlist
        if not isinstance(netlist, Netlist):
            raise TypeError(f"netlist: expected a lutcore.units.netlist.Netlist, got {type(netlist).__name__}")
        if not isinstance(signed, bool):
            raise TypeError(f"signed: expected a bool, got {type(signed).__name__} {signed!r}")
        n = netlist.a_bits
        if netlist.b_bits != n:
            raise ValueError(f"netlist: an adder's operands have one width, got {netlist.a_bits} and {netlist.b_bits} bits")
        if not 1 <= n <= MAX_ADDER_BITS:
            raise ValueError(f"netlist: adder operands of 1..{MAX_ADDER_BITS} bits, got {n}")
        if netlist.p_bits not in (n, n + 1):
            raise ValueError(f"netlist: a {n}-bit adder has {n} or {n + 1} output bits, got {netlist.p_bits}")
        self.netlist = netlist
        self.bits, self.signed, self.out_bits = n, signed, int(netlist.p_bits)
        self.name = name or "adder"
        self.cost: dict = {}          # power_mw / area_um2 / delay_ns, source (lutcore.units.cost)
        self.published: dict = {}     # error figures a header states
        self.source = None            # what was read, and how
        self.loaded_from = None

    # ---------------------------------------------------------------- builders
    @classmethod
    def exact(cls, bits: int, signed: bool, out_bits: int | None = None) -> "Adder":
        """An exact ripple-carry adder of two ``bits``-bit operands; ``out_bits`` bits + 1 (default:
        the carry out, or for ``signed`` the sum's sign extension) or bits (the sum wraps)."""
        import numbers
        if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or not 1 <= int(bits) <= MAX_ADDER_BITS:
            raise ValueError(f"bits: expected an int in 1..{MAX_ADDER_BITS}, got {bits!r}")
        n = int(bits)
        out_bits = n + 1 if out_bits is None else out_bits
        if out_bits not in (n, n + 1):
            raise ValueError(f"out_bits: expected {n} or {n + 1}, got {out_bits!r}")
        u = cls(ripple_netlist(n, signed, out_bits), signed, name="exact")
        u.source = f"an exact {n}-bit ripple-carry adder, {out_bits} output bits"
        return u

    @classmethod
    def from_netlist(cls, netlist, signed: bool, *, name: str | None = None) -> "Adder":
        return cls(netlist, signed, name=name)

    @classmethod
    def from_verilog(cls, path, top: str | None = None, *, signed: bool | None = None,
                     timeout: float = 120) -> "Adder":
        """The adder a Verilog module describes, mapped to gates by Yosys (the module docstring:
        operands, signedness, widths); cost and published figures from its header or meta.json."""
        from lutcore.units import cost as _cost
        from lutcore.units import netlist as _nl
        signed = _signed_arg(signed)
        net, info = _nl.from_verilog(path, top, timeout=timeout)
        path = os.fspath(path)
        what = f"module {info['top']}"
        a, b = info["a"], info["b"]
        if b.upper() == "A" and a.upper() != "A":
            net, a, b = _swap_operands(net), b, a
        n = _operand_width(path, what, a, b, net.a_bits, net.b_bits)
        q = net.p_bits
        if q not in (n, n + 1):
            raise ValueError(f"{path}: {what}: output {info['out']} has {q} bits; a {n}-bit adder has {n + 1} "
                             f"(a carry out or the sign-extended sum) or {n} (the sum wraps)")
        named = evoapprox_adder_name(info["top"])
        if signed is not None:
            how = "signedness as stated"
        elif named is not None:
            signed, how = named[1], "signedness from its EvoApproxLib name"
        elif info["a_signed"] and info["b_signed"]:
            signed, how = True, "signed as its ports declare"
        else:
            raise ValueError(f"{path}: {what}: neither its name (EvoApproxLib's add<n>u_, add<n>s_, add<n>se_) nor "
                             f"its ports say whether the operands are signed: state signed=True or signed=False")
        if how.endswith("name") and named[::2] != (n, q):
            raise ValueError(f"{path}: {what}: its name says a {named[0]}-bit adder with {named[2]} output bits, but "
                             f"its ports have {n}-bit operands ({a}, {b}) and a {q}-bit output ({info['out']})")
        u = cls(_nl.optimise(net), signed, name=info["top"])
        u.source = (f"{os.path.basename(path)}: module {info['top']}, inputs {a} (a, the register) and {b}, output "
                    f"{info['out']}: {u.bits}-bit {'signed' if signed else 'unsigned'} adder, {q} output bits; "
                    f"{how}; a netlist of {u.netlist.gate_count} gates")
        u.loaded_from = path
        _cost.attach(u, path, stat=info.get("stat"), slack=u._published_slack(), computed="the netlist")
        return u

    @classmethod
    def from_c(cls, path, function: str | None = None, *, signed: bool | None = None, bits: int | None = None,
               out_bits: int | None = None, timeout: float = 60) -> "Adder":
        """The adder a C model computes, traced into its gate netlist (checked against the model
        compiled as C, run in a child process); the module docstring says how the operands,
        signedness and widths are chosen; cost and published figures from the header."""
        from lutcore.units import cost as _cost
        from lutcore.units import hdl
        from lutcore.units import netlist as _nl
        signed = _signed_arg(signed)
        path = hdl._check_file(path, (".c",), "C")
        function = hdl._function_arg(function)
        text = hdl._read_source(path).decode("utf-8", "replace")
        defs = hdl._c_definitions(text)
        if function is not None and function not in defs and not re.search(rf"\b{function}\s*\(", text):
            raise ValueError(f"{path}: no function {function!r} (found: {', '.join(defs) or 'none'})")
        if function is None:
            cands = hdl._c_candidates(defs)
            if len(cands) != 1:
                raise ValueError(f"{path}: name the adder's function (file.c:function): found "
                                 f"{', '.join(cands) if cands else 'no function of two integers'}")
            function = cands[0]
        what = f"function {function}"
        named = evoapprox_adder_name(function)
        if bits is not None:
            if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= MAX_ADDER_BITS:
                raise ValueError(f"bits: expected the operands' width, an int in 1..{MAX_ADDER_BITS}, got {bits!r}")
        missing = [k for k, v in (("signed", signed), ("bits", bits)) if v is None and named is None]
        if missing:
            said = " and ".join({"signed": "signedness", "bits": "width"}[k] for k in missing)
            raise ValueError(f"{path}: {what}: its name is not EvoApproxLib's (add<n>u_, add<n>s_, add<n>se_), "
                             f"which would say the operands' {said}: state {' and '.join(k + '=' for k in missing)}")
        how = []
        if signed is None:
            signed = named[1]
            how.append("signedness")
        if bits is None:
            bits = named[0]
            how.append("width")
        if not 1 <= bits <= MAX_ADDER_BITS:
            raise ValueError(f"{path}: {what}: its name says {bits}-bit operands: an adder has 1..{MAX_ADDER_BITS}")
        n = bits
        if out_bits is not None:
            if isinstance(out_bits, bool) or out_bits not in (n, n + 1):
                raise ValueError(f"out_bits: expected {n} or {n + 1} (a {n}-bit adder's output), got {out_bits!r}")
        elif named is not None and named[0] == n:
            out_bits = named[2]
            how.append("output width")
        stated = [k for k, v in (("signedness", "signedness" not in how), ("width", "width" not in how),
                                  ("output width", out_bits is not None and "output width" not in how)) if v]
        how = ([f"{', '.join(how)} from its EvoApproxLib name"] if how else []) + \
              ([f"{', '.join(stated)} as stated"] if stated else [])
        params = hdl._c_params(defs[function][1]) if function in defs else []
        pnames = [(re.findall(r"[A-Za-z_]\w*", p) or ["?"])[-1] for p in params]
        swap = len(pnames) == 2 and pnames[1].upper() == "A" and pnames[0].upper() != "A"
        net, info = _nl.from_c(path, function, a_bits=n, b_bits=n, p_bits=n + 2, timeout=timeout)
        if swap:
            net, pnames = _swap_operands(net), pnames[::-1]
        net, out_bits, fit = _fit_c_output(path, what, _nl.optimise(net), n, signed, out_bits)
        if fit:
            how.append(fit)
        u = cls(net, signed, name=function)
        pa, pb = pnames if len(pnames) == 2 else ("the first", "the second")
        u.source = (f"{os.path.basename(path)}: function {function}, parameters {pa} (a, the register) and {pb}, "
                    f"traced into a netlist of {net.gate_count} gates (checked against the compiled model on "
                    f"{info.get('checked', 0)} pairs): {n}-bit {'signed' if signed else 'unsigned'} adder, "
                    f"{out_bits} output bits; {'; '.join(how)}")
        u.loaded_from = path
        _cost.attach(u, path, slack=u._published_slack(), computed="the netlist")
        return u

    # ---------------------------------------------------------------- evaluation
    def operand_range(self) -> tuple:
        n = self.bits
        return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if self.signed else (0, (1 << n) - 1)

    def add(self, a, b) -> np.ndarray:
        """int64: the adder's output on operand values a, b (in ``operand_range``; their low bits
        are its inputs), read as an ``out_bits``-bit number, signed as the adder is."""
        a = np.asarray(a, np.int64)
        b = np.asarray(b, np.int64)
        lo, hi = self.operand_range()
        for v, nm in ((a, "a"), (b, "b")):
            if v.size and (int(v.min()) < lo or int(v.max()) > hi):
                raise ValueError(f"{nm}: expected {self.bits}-bit {'signed' if self.signed else 'unsigned'} values in "
                                 f"[{lo}, {hi}], got {int(v.min())}..{int(v.max())}")
        a, b = np.broadcast_arrays(a, b)
        return _outputs(self.netlist, a.reshape(-1), b.reshape(-1), self.signed, self.signed).reshape(a.shape)

    def error_metrics(self) -> dict:
        """EvoApproxLib's metrics of the adder (``lutcore.units.metrics.adder_metrics``: mae, mae_pct,
        wce, wce_pct, wcre_pct, ep_pct, mre_pct, mse) over every pair (up to 2^20 pairs: 8 and 9
        bits), else 2^20 fixed-seed pairs and every pair of edge values (``Units``' rule);
        "pairs" counted, "sampled" 1.0 when sampled."""
        from lutcore.units.metrics import adder_metrics
        a, b = self._pairs()
        m = adder_metrics(self.add(a, b), a + b, out_bits=self.out_bits, signed=self.signed)
        m["sampled"] = float(a.size < (1 << (2 * self.bits)))
        return m

    def verify(self) -> AdderReport:
        """The adder's report: exact or not, EvoApproxLib's metrics, cost and published figures."""
        return AdderReport(name=self.name, digest=self.digest, bits=self.bits, signed=self.signed,
                           out_bits=self.out_bits, gates=self.netlist.gate_count, exact=self.is_exact,
                           metrics=self.error_metrics(), cost=dict(self.cost), published=dict(self.published),
                           source=self.source)

    def _published_slack(self) -> dict:
        """What EvoApproxLib's rounding of MAE (to 0.1, before its MAE%) adds to a published
        mae_pct's last printed digit."""
        from lutcore.units.metrics import ADDER_MAE_ROUNDING, adder_scale_bits
        return {"mae_pct": ADDER_MAE_ROUNDING / (1 << adder_scale_bits(self.out_bits, self.signed)) * 100}

    # ---------------------------------------------------------------- identity
    @property
    def is_exact(self) -> bool:
        """Whether the outputs are the exact sum (to out_bits bits) on every pair (exhaustive up to
        2^20 pairs, sampled beyond)."""
        a, b = self._pairs()
        s = a + b
        q = self.out_bits
        want = ((s - (-(1 << (q - 1)) if self.signed else 0)) & ((1 << q) - 1)) + (-(1 << (q - 1)) if self.signed
                                                                                   else 0)
        return bool(np.array_equal(self.add(a, b), want))

    def _pairs(self):
        """(a, b) int64 operand values: every pair up to 2^20 of them, else the multipliers' sample
        (``lutcore.units._sample_pairs``: 2^20 fixed-seed pairs and every pair of edge values)."""
        from lutcore.units import _sample_pairs
        from lutcore.units.formats import Format
        return _sample_pairs(Format(self.bits, self.signed, self.bits, self.signed))

    @property
    def digest(self) -> str:
        import hashlib
        h = hashlib.sha256(f"lutcore-adder:{self.bits}:{int(self.signed)}:{self.out_bits}\n".encode())
        h.update(self.netlist.digest.encode())
        return h.hexdigest()

    def __eq__(self, other) -> bool:
        return isinstance(other, Adder) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return (f"Adder(name={self.name!r}, {self.bits}-bit {'signed' if self.signed else 'unsigned'}, "
                f"{self.out_bits} output bits, {self.netlist.gate_count} gates, digest={self.digest[:16]})")

    # ---------------------------------------------------------------- files
    def save(self, path) -> None:
        """adder.json (name, signedness, cost, published, source) and adder.net (the netlist) in ``path``."""
        from lutcore._io import atomic_file
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        self.netlist.save(os.path.join(path, ADDER_NET))
        meta = {"name": self.name, "signed": self.signed, "bits": self.bits, "out_bits": self.out_bits,
                "cost": self.cost, "published": self.published, "source": self.source, "digest": self.digest}
        with atomic_file(os.path.join(path, ADDER_JSON)) as tmp:
            with open(tmp, "w") as f:
                json.dump(meta, f, indent=1, sort_keys=True)

    @classmethod
    def load(cls, path) -> "Adder":
        from lutcore.units.netlist import Netlist
        path = os.fspath(path)
        jf = os.path.join(path, ADDER_JSON)
        try:
            with open(jf) as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{jf}: cannot read an adder's description: {e}") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("signed"), bool):
            raise ValueError(f"{jf}: expected a JSON object with 'signed' (a bool)")
        net = Netlist.load(os.path.join(path, ADDER_NET))
        u = cls(net, meta["signed"], name=meta.get("name"))
        u.cost = dict(meta.get("cost") or {})
        u.published = dict(meta.get("published") or {})
        u.source = meta.get("source")
        u.loaded_from = path
        if meta.get("digest") not in (None, u.digest):
            raise ValueError(f"{jf}: digest {meta['digest'][:16]} does not match the adder in {ADDER_NET} "
                             f"({u.digest[:16]}): the files disagree")
        return u


# ------------------------------------------------------------------------ reading circuits
def _signed_arg(signed):
    if signed is not None and not isinstance(signed, bool):
        raise TypeError(f"signed: expected True, False or None (from the name), got {type(signed).__name__} "
                        f"{signed!r}")
    return signed


def _operand_width(path, what, a, b, wa, wb) -> int:
    if wa != wb:
        raise ValueError(f"{path}: {what}: an adder's operands have one width, got {a} {wa} bits and {b} {wb} bits")
    if not 1 <= wa <= MAX_ADDER_BITS:
        raise ValueError(f"{path}: {what}: operands of {wa} bits; an adder's have 1..{MAX_ADDER_BITS}")
    return wa


def _outputs(net, a, b, signed, out_signed):
    """(N,) int64: the netlist's outputs on operand values a, b (N,), read at its output width,
    signed when ``out_signed``: the bit-sliced kernel, numpy's evaluator when the build lacks it."""
    try:
        from lutcore.ops import netlist as _kernel
    except ImportError:                              # no native netlist family in this build
        raw = np.asarray(net.evaluate(a, b), np.int64)
        q = net.p_bits
        return np.where(raw >= (1 << (q - 1)), raw - (1 << q), raw) if out_signed else raw
    return _kernel.products(a, b, net.gates, net.outputs, a_bits=net.a_bits, b_bits=net.b_bits, a_signed=signed,
                            b_signed=signed, product_signed=out_signed)


def _swap_operands(net):
    """The netlist with operands a and b exchanged (their input nodes relabelled; equal widths)."""
    from lutcore.units.netlist import Netlist
    n = net.a_bits
    ids = np.arange(2 + 2 * n + net.gate_count, dtype=np.int32)
    ids[2:2 + n], ids[2 + n:2 + 2 * n] = np.arange(2 + n, 2 + 2 * n), np.arange(2, 2 + n)
    g = net.gates.copy()
    g[:, :3] = ids[g[:, :3]]
    return Netlist(n, n, net.p_bits, g, ids[net.outputs])


def _fit_c_output(path, what, net, n, signed, out_bits):
    """A traced C adder's return (n + 2 low bits) cut to its output: -> (netlist, out_bits, how
    it was inferred, or None when given).
    ``out_bits`` None: n when bit n is always 0 or (signed) always bit n - 1, else n + 1; the
    bits above the output must extend it (zeros, or for a signed adder copies of its top bit)."""
    from lutcore.units import _sample_pairs
    from lutcore.units.formats import Format
    from lutcore.units.netlist import Netlist
    a, b = _sample_pairs(Format(n, signed, n, signed))
    raw = _outputs(net, a, b, signed, False)                           # (N,) n + 2 low bits of the return
    bit = [(raw >> k) & 1 for k in range(n + 2)]
    how = None
    if out_bits is None:
        zero_n = not bit[n].any()
        ext_n = signed and np.array_equal(bit[n], bit[n - 1])
        out_bits = n if zero_n or ext_n else n + 1
        said = "always 0" if zero_n else f"the sign extension of bit {n - 1}" if ext_n else "the carry / sum's sign"
        how = f"{out_bits} output bits: bit {n} of the return is {said}"
    q = out_bits
    top = bit[q - 1]
    zeros = not any(bit[k].any() for k in range(q, n + 2))
    if not zeros and not (signed and all(np.array_equal(bit[k], top) for k in range(q, n + 2))):
        want = top if signed and np.array_equal(bit[q], top) else np.zeros_like(top)
        for k in range(q, n + 2):
            if not np.array_equal(bit[k], want):
                break
        i = int(np.flatnonzero(bit[k] != want)[0])
        raise ValueError(f"{path}: {what}: returns {int(raw[i])} (low {n + 2} bits) at A={int(a[i])}, "
                         f"B={int(b[i])}: a {n}-bit adder's output has {q} bits, and bit {k} of the return is "
                         f"not their {'sign' if signed else 'zero'} extension (state out_bits=, or check "
                         f"the model)")
    return Netlist(n, n, q, net.gates, net.outputs[:q]), q, how
