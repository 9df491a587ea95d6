"""The layout's registries are derived from one list (docs/DESIGN.md, Layout).

``lutcore/_native/__init__.py`` ``MODULES`` names the native modules; setup.py builds one
extension per name and stops at a ``.pyx`` the list does not name; ``_threads.record`` and
``_simd.bodies`` (``show_config``) walk the same list."""
import glob
import os
import shutil
import subprocess
import sys

import lutcore
import lutcore._native as native
from lutcore import _simd, _threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(lutcore.__file__)))
NATIVE_DIR = os.path.join(ROOT, "lutcore", "_native")


def _pyx_modules():
    return sorted(os.path.basename(f)[:-4] for f in glob.glob(os.path.join(NATIVE_DIR, "*.pyx"))
                  if not os.path.basename(f).startswith("_simde"))


def test_every_pyx_is_in_the_one_list_and_every_listed_module_is_built():
    assert _pyx_modules() == sorted(native.MODULES)
    for name in native.MODULES:
        assert getattr(native, name).__name__ == f"lutcore._native.{name}"


def test_setup_refuses_a_pyx_the_list_does_not_name(tmp_path):
    """The build reads the list as text and stops, naming the stray module."""
    shutil.copy(os.path.join(ROOT, "setup.py"), tmp_path / "setup.py")
    d = tmp_path / "lutcore" / "_native"
    d.mkdir(parents=True)
    shutil.copy(os.path.join(NATIVE_DIR, "__init__.py"), d / "__init__.py")
    for name in native.MODULES:
        (d / f"{name}.pyx").write_text("")
    (d / "stray.pyx").write_text("")
    r = subprocess.run([sys.executable, "setup.py", "--name"], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "LUTCORE_NO_OPENMP": "1"}, timeout=120)
    assert r.returncode != 0
    assert "lutcore/_native/stray.pyx is not in lutcore/_native/__init__.py MODULES" in r.stderr


def test_record_wraps_every_threaded_native_function():
    """Every module's functions that take nthreads are recorded (gradtables and models too)."""
    import inspect
    want = set()
    for name in native.MODULES:
        mod = getattr(native, name)
        for fname, f in vars(mod).items():
            if fname.startswith("_") or isinstance(f, type) or not callable(f) or fname.endswith("work_size"):
                continue
            try:
                if "nthreads" in inspect.signature(f).parameters:
                    want.add((name, fname))
            except (TypeError, ValueError):
                pass
    assert {m for m, _ in want} >= {"gemm", "gradtables", "models", "im2col", "exactsum"}
    with _threads.record():
        wrapped = {(m, f) for m, f in want if getattr(getattr(native, m), f).__name__ == "call"}
    assert wrapped == want


def test_bodies_names_every_module_that_names_its_bodies():
    names = _simd.bodies()
    for name in native.MODULES:
        f = getattr(getattr(native, name), "body_names", None)
        if f is not None:
            assert set(f(_simd.isa())) <= set(names), name
    for key in ("direct conv (exact table)", "gradient tables (backward='table')", "softmax", "sgemm (ops.matmul)",
                "decode layer"):
        assert key in names


# ------------------------------------------------------------------ the layering, read from the imports
INFRA = {"lutcore", "lutcore._threads", "lutcore._simd", "lutcore._alloc", "lutcore._workspace"}


def _modules():
    """{dotted module name: source} of every lutcore Python module (not the native ones)."""
    out = {}
    for d, _, files in os.walk(os.path.join(ROOT, "lutcore")):
        if "_native" in d.split(os.sep):
            continue
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), ROOT)[:-3].replace(os.sep, ".")
                out[rel[:-9] if rel.endswith(".__init__") else rel] = open(os.path.join(d, f)).read()
    return out


def _imports(src, mods):
    """The lutcore modules a source imports (at module level or inside functions)."""
    import ast
    found = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m in mods or m.startswith("lutcore._native")}


def test_every_test_sits_in_a_room():
    """tests/<room>/test_*.py only; conftest.ROOMS names every room (their helpers import
    each other by module name)."""
    import conftest
    tests = os.path.join(ROOT, "tests")
    assert not [f for f in os.listdir(tests) if f.startswith("test_")]
    rooms = sorted(d for d in os.listdir(tests) if glob.glob(os.path.join(tests, d, "test_*.py")))
    assert rooms == sorted(conftest.ROOMS)
