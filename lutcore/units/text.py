"""A multiplier given as a text table: one ``a b product`` line per operand pair.

Design: the form retraining frameworks ship their LUTs in (one line a pair; whitespace or
commas between the three integers; ``#`` starts a comment; blank lines are skipped).  The
operand formats are inferred from the values: an operand with a negative value is signed,
and its width is the fewest bits whose two's-complement (or, unsigned, binary) range holds
every value; the grid of that format must then be complete — every pair exactly once — so a
missing or repeated pair is a ValueError naming the file, the pair and its lines.  The unit
has that format (``lutcore.units.formats``: 8u x 8u -> 16u for codes 0..255, 8s x 4s -> 12s
...; ``format=`` states it instead), its product a_bits + b_bits wide.  Operands of at most 8
bits make a table; a wider one is refused (a circuit, not a table).

    file line    a        b        product
    value        int      int      int (fits the product's format)
    table        [a & mask_a, b & mask_b] -> product   (Units.table()'s layout)
"""
from __future__ import annotations

import os
import re

import numpy as np

__all__ = ["from_text", "read_text_table"]

_SEP = re.compile(r"[,\s]+")


def _fail(path, msg):
    return ValueError(f"{path}: {msg}")


def _format(lo: int, hi: int) -> tuple[int, bool]:
    """(bits, signed) of the smallest operand format holding every value in [lo, hi]."""
    if lo < 0:
        bits = max(int(-lo - 1).bit_length(), int(hi).bit_length()) + 1
        return bits, True
    return max(1, int(hi).bit_length()), False


def _name(bits, signed):
    return f"{bits}-bit {'signed' if signed else 'unsigned'}"


def read_text_table(path) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple, tuple]:
    """(a, b, product, (a bits, a signed), (b bits, b signed)) of a text table, every pair of
    the inferred grid present exactly once (checked); int64 arrays in file order."""
    from lutcore.units.hdl import _check_file
    path = _check_file(path, (".txt", ".lut", ".csv"), "text table")
    rows, lines = [], []
    with open(path, "r", encoding="utf-8", errors="strict") as f:
        try:
            for k, line in enumerate(f, 1):
                text = line.split("#", 1)[0].strip()
                if not text:
                    continue
                parts = [p for p in _SEP.split(text) if p]
                if len(parts) != 3:
                    raise _fail(path, f"line {k}: expected three integers 'a b product', got {line.strip()!r}")
                try:
                    rows.append(tuple(int(p) for p in parts))
                except ValueError:
                    raise _fail(path, f"line {k}: expected three integers 'a b product', got "
                                      f"{line.strip()!r}") from None
                lines.append(k)
                if len(rows) > (1 << 20):
                    raise _fail(path, "more than 2^20 pairs: a table of at most 16-bit x 4-bit operands "
                                      "(2^20 pairs) is read from text")
        except UnicodeDecodeError as e:
            raise _fail(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not rows:
        raise _fail(path, "no 'a b product' lines")
    t = np.array(rows, dtype=object)
    if max(abs(int(v)) for v in t.ravel()) >= 1 << 62:
        raise _fail(path, "a value does not fit in 62 bits")
    t = t.astype(np.int64)
    a, b, p = t[:, 0], t[:, 1], t[:, 2]
    fa, fb = _format(int(a.min()), int(a.max())), _format(int(b.min()), int(b.max()))
    if fa[0] > 16 or fb[0] > 16:
        which, fmt = ("a", fa) if fa[0] > 16 else ("b", fb)
        raise _fail(path, f"operand {which} needs {fmt[0]} bits (values {int(t[:, 0 if which == 'a' else 1].min())}"
                          f"..{int(t[:, 0 if which == 'a' else 1].max())}): operands of at most 16 bits")
    lo_a, lo_b = (-(1 << (fa[0] - 1)) if fa[1] else 0), (-(1 << (fb[0] - 1)) if fb[1] else 0)
    na, nb = 1 << fa[0], 1 << fb[0]
    key = (a - lo_a) * nb + (b - lo_b)                                   # the pair's place in the grid
    seen = np.full(na * nb, -1, np.int64)
    order = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[order][1:] == key[order][:-1])
    if dup.size:
        i, j = order[dup[0]], order[dup[0] + 1]
        raise _fail(path, f"the pair a={int(a[j])}, b={int(b[j])} is given twice (lines {lines[i]} and "
                          f"{lines[j]})")
    seen[key] = np.arange(key.size)
    missing = np.flatnonzero(seen < 0)
    if missing.size:
        m = int(missing[0])
        raise _fail(path, f"the pair a={m // nb + lo_a}, b={m % nb + lo_b} is missing: a table of "
                          f"{_name(*fa)} x {_name(*fb)} operands (inferred from the values) gives all "
                          f"{na * nb:,} pairs, this file {key.size:,}")
    return a, b, p, fa, fb


def from_text(path, *, name: str | None = None, format=None):
    """A ``Units`` from a text table (see the module's docstring); its name defaults to the
    file's stem.  The operands' formats are inferred from the values (``format`` states them
    instead: the file must then hold exactly that format's grid); the product's width is
    a_bits + b_bits (or ``format``'s), every product checked to fit.  An operand wider than 8
    bits is a ValueError naming the file: such a unit is a circuit, not a table."""
    from lutcore.units import Units
    from lutcore.units.formats import Format, format_arg
    declared = format_arg(format)
    a, b, p, fa, fb = read_text_table(path)
    path = os.fspath(path)
    if declared is not None:
        for which, want, got in (("a", (declared.a_bits, declared.a_signed), fa),
                                 ("b", (declared.b_bits, declared.b_signed), fb)):
            if want != got:
                vals = a if which == "a" else b
                lo, hi = declared.range(which)
                raise _fail(path, f"operand {which} holds {int(vals.min())}..{int(vals.max())} ({_name(*got)}, "
                                  f"inferred), but format={declared} states {_name(*want)} ({lo}..{hi})")
        fmt = declared
    else:
        fmt = Format(fa[0], fa[1], fb[0], fb[1])
    if not fmt.is_table:
        raise _fail(path, f"operands {_name(fmt.a_bits, fmt.a_signed)} (a) x {_name(fmt.b_bits, fmt.b_signed)} "
                          f"(b): a unit whose operands both fit in 8 bits is a table; a wider one is a circuit "
                          f"(give its Verilog or C model)")
    lo, hi = fmt.p_range
    bad = np.flatnonzero((p < lo) | (p > hi))
    if bad.size:
        i = int(bad[0])
        raise _fail(path, f"the product of a={int(a[i])}, b={int(b[i])} is {int(p[i])}, outside the {fmt.p_bits}-bit "
                          f"{'signed' if fmt.p_signed else 'unsigned'} product [{lo}, {hi}] of format {fmt}")
    ma, mb = (1 << fmt.a_bits) - 1, (1 << fmt.b_bits) - 1
    table = np.empty(fmt.table_shape[0] * fmt.table_shape[1], np.int64)
    table[(a & ma) * (mb + 1) + (b & mb)] = p
    u = Units.from_mul(table.astype(np.int16 if fmt.legacy else np.int32),
                       name=name or os.path.splitext(os.path.basename(path))[0], format=fmt)
    u.source = f"{os.path.basename(path)}: text table, {a.size:,} pairs, {fmt}"
    u.loaded_from = os.path.abspath(path)
    return u
