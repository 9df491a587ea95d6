"""The Python layering, read from the imports (test_layout's ``_modules`` / ``_imports``: every
import, at module level or inside a function): one door into the native core, no import
circles, dependencies pointing one way (docs/DESIGN.md, "The Python layers").

* Only ``lutcore/ops/`` (the kernel families' rooms) and the modules that describe the build
  (test_layout's ``INFRA``: the package ``__init__``, ``_threads``, ``_simd``, ``_alloc``,
  ``_workspace``) import ``lutcore._native``.
* No two modules of lutcore import each other (a package and its own submodules excepted:
  importing a submodule runs its package).
* The kernel rooms know no quant, model, trainer, pipeline or torch bridge; a model knows no
  trainer, pipeline or torch bridge; training and pipeline serving do not import each other.
"""
import functools

from test_layout import INFRA, _imports, _modules


@functools.lru_cache(maxsize=None)
def _graph():
    mods = _modules()
    return {n: _imports(src, mods) for n, src in mods.items()}


def _under(m, pkg):
    return m == pkg or m.startswith(pkg + ".")


def test_only_the_rooms_import_the_native_modules():
    bad = sorted(f"{n} imports {m}" for n, deps in _graph().items() for m in deps
                 if _under(m, "lutcore._native") and not (n in INFRA or _under(n, "lutcore.ops")))
    assert not bad, bad


def test_no_two_modules_import_each_other():
    g = _graph()
    pairs = sorted({tuple(sorted((a, b))) for a, deps in g.items() for b in deps
                    if b in g and a in g[b] and not (_under(a, b) or _under(b, a))})
    assert not pairs, pairs


FORBIDDEN = [("lutcore.ops", ("lutcore.quant", "lutcore.models", "lutcore.train", "lutcore.pipeline", "lutcore.torch")),
             ("lutcore.models", ("lutcore.train", "lutcore.pipeline", "lutcore.torch")),
             ("lutcore.train", ("lutcore.pipeline",)),
             ("lutcore.pipeline", ("lutcore.train",))]


def test_dependencies_point_one_way():
    bad = sorted(f"{n} imports {m}" for n, deps in _graph().items() for m in deps
                 for low, high in FORBIDDEN if _under(n, low) and any(_under(m, h) for h in high))
    assert not bad, bad
