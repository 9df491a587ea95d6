"""The one place that turns ``threads=None`` into a number.

``None`` resolves at call time, in the calling thread: the value given to
``lutcore.set_num_threads`` if any, else OpenMP's max threads (so
``OMP_NUM_THREADS`` and threadpoolctl are honoured).  0, negative or more than
MAX_THREADS is an error.
Without OpenMP every kernel is serial and this returns 1.

Entry points (a model's forward/backward/generate, ``Trainer`` steps, a pipeline
``Stage``, the ``lutcore.torch`` layers) resolve their ``threads`` ONCE and run their
body inside ``scope(n)``: every kernel called below with ``threads=None`` then gets
that ``n`` (an explicit ``threads=`` still wins; a nested ``scope(None)`` inherits the
outer number).  The scope is a context variable, so it belongs to the calling thread.
``record()`` is the debug hook that checks it: the team size of every native call.

MAX_THREADS is the machine's CPU count times THREADS_PER_CPU (8): beyond that an
OpenMP team only oversubscribes, and at some size libgomp cannot create its
threads and ends the process ("libgomp: Thread creation failed", exit 1, no
exception).  A larger ``threads=`` is a ValueError; a larger OpenMP default
(``OMP_NUM_THREADS``) is capped to it.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os

from lutcore._native import _cpu

_default: int | None = None

THREADS_PER_CPU = 8
MAX_THREADS = max(1, os.cpu_count() or 1) * THREADS_PER_CPU


def _check(n, name="threads"):
    from lutcore._check import int_arg
    return int_arg(n, f"{name} (or None)", lo=1, hi=MAX_THREADS)


def host_cpus() -> int:
    """The CPUs this process may run on (its affinity; os.cpu_count() where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_threads(n: int | None) -> None:
    """Default thread count for every lutcore kernel (None: back to OpenMP's)."""
    global _default
    _default = None if n is None else _check(n, "n")


def get_num_threads() -> int:
    """The thread count a kernel called now with ``threads=None`` would use."""
    return resolve_threads(None)


def resolve_threads(threads) -> int:
    if threads is None:
        n = _scope.get()
        if n is None:
            n = _default if _default is not None else min(_cpu.max_threads(), MAX_THREADS)
    else:
        n = _check(threads)
    if not _cpu.openmp_enabled():
        return 1
    return max(1, int(n))


_scope: contextvars.ContextVar = contextvars.ContextVar("lutcore_threads", default=None)


@contextlib.contextmanager
def scope(threads):
    """Run the block with ``threads`` (resolved once, now) as the count of every kernel
    called with ``threads=None``; yields the number."""
    n = resolve_threads(threads)
    tok = _scope.set(n)
    try:
        yield n
    finally:
        _scope.reset(tok)


def entry(method):
    """Decorator for an entry point's method: its body runs in ``scope(self.threads)``."""
    @functools.wraps(method)
    def run(self, *args, **kw):
        with scope(self.threads):
            return method(self, *args, **kw)
    return run


# ---------------------------------------------------------------- the debug hook


@contextlib.contextmanager
def record():
    """Debug hook: ``with record() as calls: ...`` appends ``(function, nthreads)`` for every
    call of a native kernel that takes a thread count, however it is reached (the native
    modules' functions are wrapped for the block and restored after it; not thread-safe).
    Without OpenMP each kernel is serial whatever it is given."""
    import lutcore._native as native
    calls: list = []
    saved = []
    for mod_name in native.MODULES:
        mod = getattr(native, mod_name)
        for name, f in list(vars(mod).items()):
            if name.startswith("_") or isinstance(f, type) or not callable(f):
                continue
            try:
                params = list(inspect.signature(f).parameters)
            except (TypeError, ValueError):
                continue
            if "nthreads" not in params or name.endswith("work_size"):
                continue
            saved.append((mod, name, f))
            setattr(mod, name, _recording(f, f"{mod_name}.{name}", params.index("nthreads"), calls))
    try:
        yield calls
    finally:
        for mod, name, f in saved:
            setattr(mod, name, f)


def _recording(f, label, i, calls):
    def call(*args, **kw):
        calls.append((label, int(args[i] if len(args) > i else kw["nthreads"])))
        return f(*args, **kw)
    return call
