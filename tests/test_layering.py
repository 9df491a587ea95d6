"""The Python layering, read from the imports (ast): one door into the native core and no
import circles (docs/DESIGN.md, "The Python layers").

* Only ``lutcore/ops/`` (the kernel families' rooms) and the modules that describe the build
  (``_threads``, ``_simd``, ``_alloc``, ``_workspace``, the package ``__init__``) import
  ``lutcore._native`` or its alias ``lutcore.kernels``.
* No two modules of lutcore import each other, at module level or inside a function (a
  package and its own submodules excepted: importing a submodule runs its package).
* Dependencies point one way: the kernel rooms know no quant, model, trainer, pipeline or
  torch bridge; a model knows no trainer or pipeline; training and pipeline serving do not
  import each other.
"""
import ast
import functools
import os

import lutcore

ROOT = os.path.dirname(lutcore.__file__)
NATIVE_OK = ("lutcore.ops", "lutcore._threads", "lutcore._simd", "lutcore._alloc", "lutcore._workspace",
             "lutcore._native", "lutcore.kernels")


def _modules():
    out = {}
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                name = rel[:-len(".__init__")] if rel.endswith(".__init__") else rel
                out[name] = os.path.join(d, f)
    return out


def _imports(name, path, known):
    """The lutcore modules ``name`` imports (``from a import b`` counts b when b is a module)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    pkg = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    got = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            got.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            got.add(base)
            got.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)
    return {m for m in got if m == "lutcore" or m.startswith("lutcore.")}


@functools.lru_cache(maxsize=None)
def _graph():
    mods = _modules()
    return {n: _imports(n, p, mods) for n, p in mods.items()}


def _related(a, b):
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def test_only_the_rooms_import_the_native_modules():
    bad = sorted(f"{n} imports {m}" for n, deps in _graph().items() for m in deps
                 if (m == "lutcore._native" or m.startswith(("lutcore._native.", "lutcore.kernels")) or
                     m == "lutcore.kernels")
                 and not (n == "lutcore" or any(n == ok or n.startswith(ok + ".") for ok in NATIVE_OK)))
    assert not bad, bad


def test_no_two_modules_import_each_other():
    g = _graph()
    pairs = sorted({tuple(sorted((a, b))) for a, deps in g.items() for b in deps
                    if b in g and a in g[b] and not _related(a, b)})
    assert not pairs, pairs


FORBIDDEN = [("lutcore.ops", ("lutcore.quant", "lutcore.models", "lutcore.train", "lutcore.pipeline", "lutcore.torch")),
             ("lutcore.models", ("lutcore.train", "lutcore.pipeline", "lutcore.torch")),
             ("lutcore.train", ("lutcore.pipeline",)),
             ("lutcore.pipeline", ("lutcore.train",))]


def _under(m, pkg):
    return m == pkg or m.startswith(pkg + ".")


def test_dependencies_point_one_way():
    bad = sorted(f"{n} imports {m}" for n, deps in _graph().items() for m in deps
                 for low, high in FORBIDDEN if _under(n, low) and any(_under(m, h) for h in high))
    assert not bad, bad
