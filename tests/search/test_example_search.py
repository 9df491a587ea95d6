"""examples/search_digits.py: its unit library (the stated cell-count costs and the test
circuits' header costs) is what the README's outcome table was computed with."""
from _paths import ROOT  # noqa: F401
import importlib.util
import os
import warnings



def _example():
    spec = importlib.util.spec_from_file_location("search_digits", os.path.join(ROOT, "examples", "search_digits.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_library_has_thirteen_units_with_power():
    ex = _example()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        units = ex.library()
    names = [u.name for u in units]
    assert len(names) == len(set(names)) == 13, names
    assert all(u.cost.get("power_mw") is not None for u in units)
    assert [u.name for u in units if u.is_exact] == ["exact"]
    # the cell-count model: 64 cells for exact; truncated:K keeps the cells with i + j >= K
    assert ex.cells_power("exact") == ex.EXACT_MW
    assert ex.cells_power("truncated:8") == ex.EXACT_MW * 28 / 64
    assert ex.cells_power("reduced:3") == ex.EXACT_MW * 25 / 64
