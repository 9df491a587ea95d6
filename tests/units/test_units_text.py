"""Text tables (``Units.from_text``, ``resolve("mul.txt")``): one ``a b product`` line a pair.

The expected table is built here by a plain loop over the pairs (the contract's layout,
``(a & 0xff) * 256 + (b & 0xff)``), never by the loader.  Bad files — a missing or repeated
pair, a non-integer, a product outside int16, another operand format (unsigned, narrow,
mixed) — are ValueErrors naming the file and what is wrong."""
import os
import re

import numpy as np
import pytest

import lutcore
from lutcore.units import resolve
from reference.units_ref import exact_mul_lut

S8 = range(-128, 128)


def _table_of(fn):
    """The int16 table of fn over signed 8-bit pairs, by the contract's layout (a plain loop)."""
    t = np.empty(65536, np.int16)
    for a in S8:
        for b in S8:
            t[(a & 0xFF) * 256 + (b & 0xFF)] = fn(a, b)
    return t


def _write(tmp_path, name, pairs, sep=" ", header="# a b product\n", extra=""):
    p = tmp_path / name
    p.write_text(header + "".join(f"{a}{sep}{b}{sep}{c}\n" for a, b, c in pairs) + extra)
    return str(p)


def test_exact_table_in_any_order_and_separator_loads_as_the_exact_units(tmp_path):
    pairs = [(a, b, a * b) for a in S8 for b in S8]
    rng = np.random.default_rng(3)
    shuffled = [pairs[i] for i in rng.permutation(len(pairs))]
    for name, sep in (("mul.txt", " "), ("mul.csv", ","), ("mul.lut", "\t")):
        u = lutcore.Units.from_text(_write(tmp_path, name, shuffled, sep=sep, extra="\n# end\n"))
        assert u.is_exact and u.name == "mul" and np.array_equal(u.mul.ravel(), exact_mul_lut().ravel())


def test_approximate_table_has_the_bits_of_its_function_and_resolves_by_name(tmp_path):
    def trunc(a, b):
        return (a * b) & ~0xF
    f = _write(tmp_path, "t4.txt", [(a, b, trunc(a, b)) for a in S8 for b in S8])
    u = resolve(f)
    want = _table_of(trunc)
    assert np.array_equal(u.mul.ravel().view(np.uint16), want.view(np.uint16)) and not u.is_exact
    assert u.loaded_from == os.path.abspath(f) and "text table, 65,536 pairs" in u.source


@pytest.mark.parametrize("case,message", [
    ("missing", r"the pair a=-128, b=-128 is missing: a table of 8-bit signed x 8-bit signed operands"),
    ("repeated", r"the pair a=5, b=7 is given twice \(lines \d+ and \d+\)"),
    ("text", r"line 3: expected three integers 'a b product', got '1 x 2'"),
    ("two", r"line 2: expected three integers 'a b product', got '1 2'"),
    ("wide", r"the product of a=3, b=4 is 40000, outside the 16-bit signed product \[-32768, 32767\] of "
             r"format 8s x 8s -> 16s"),
    ("twelve", r"operands 12-bit unsigned \(a\) x 2-bit unsigned \(b\): a unit whose operands both fit in 8 "
               r"bits is a table; a wider one is a circuit"),
    ("empty", r"no 'a b product' lines"),
])
def test_bad_tables_are_refused_naming_the_file(tmp_path, case, message):
    full = [(a, b, a * b) for a in S8 for b in S8]
    files = {
        "missing": lambda: _write(tmp_path, "m.txt", full[1:]),
        "repeated": lambda: _write(tmp_path, "m.txt", full + [(5, 7, 35)]),
        "text": lambda: _write(tmp_path, "m.txt", [], extra="0 0 0\n1 x 2\n"),
        "two": lambda: _write(tmp_path, "m.txt", [], header="", extra="0 0 0\n1 2\n"),
        "wide": lambda: _write(tmp_path, "m.txt", [(a, b, 40000 if (a, b) == (3, 4) else a * b) for a in S8
                                                   for b in S8]),
        "twelve": lambda: _write(tmp_path, "m.txt", [(a, b, a * b) for a in range(4096) for b in range(4)]),
        "empty": lambda: _write(tmp_path, "m.txt", [], extra="\n# nothing\n"),
    }
    f = files[case]()
    with pytest.raises(ValueError, match="^" + re.escape(f) + ": " + message):
        lutcore.Units.from_text(f)


def test_not_a_regular_file_and_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such text table file"):
        lutcore.Units.from_text(str(tmp_path / "nope.txt"))
    os.mkfifo(tmp_path / "pipe.txt")
    with pytest.raises(ValueError, match="pipe.txt"):
        lutcore.Units.from_text(str(tmp_path / "pipe.txt"))


@pytest.mark.parametrize("a_vals,b_vals,fmt", [
    (range(256), range(256), "8u x 8u -> 16u"),          # EvoApproxLib's mul8u family
    (range(128), range(128), "7u x 7u -> 14u"),
    (range(256), range(16), "8u x 4u -> 12u"),             # a narrow-weight unit
    (range(256), range(4), "8u x 2u -> 10u"),
    (S8, range(16), "8s x 4u -> 12s"),
    (range(-8, 8), range(-8, 8), "4s x 4s -> 8s"),
])
def test_every_format_up_to_8x8_loads_with_its_format_and_bits(tmp_path, a_vals, b_vals, fmt):
    def approx(a, b):
        return (a * b) & ~0x3                  # two low product bits dropped
    rows = [(a, b, approx(a, b)) for a in a_vals for b in b_vals]
    f = _write(tmp_path, "u.txt", rows)
    u = lutcore.Units.from_text(f)
    assert str(u.format) == fmt and fmt in repr(u) and fmt in u.source
    t = u.table()
    ma, mb = t.shape[0] - 1, t.shape[1] - 1
    for a, b, p in rows[::97]:                  # the table's [a & mask, b & mask] is the file's product
        assert t[a & ma, b & mb] == p
    assert not u.is_exact and lutcore.Units.from_text(f, format=fmt) == u


def test_a_stated_format_that_the_values_contradict_is_refused(tmp_path):
    f = _write(tmp_path, "u.txt", [(a, b, a * b) for a in range(256) for b in range(16)])
    with pytest.raises(ValueError, match=r"operand a holds 0..255 \(8-bit unsigned, inferred\), but "
                                         r"format=8s x 4u -> 12s states 8-bit signed \(-128..127\)"):
        lutcore.Units.from_text(f, format="8s x 4u")
