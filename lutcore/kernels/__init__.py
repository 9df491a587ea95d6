"""Old name of ``lutcore._native`` (its modules, its list), kept while the last callers move
to ``lutcore.ops``."""
from lutcore import _native
from lutcore._native import MODULES  # noqa: F401

__all__ = list(MODULES)


def __getattr__(name):
    return getattr(_native, name)
