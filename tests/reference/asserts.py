"""Assertions the kernel tests share: raw-bit equality (the determinism
contract) and "the error message names the argument"."""
import re

import numpy as np


def bits(a):
    """The raw bits of a float32/float64 array (NaN payloads and signed zeros included)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


def assert_bits_equal(name, a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
    same = bits(a) == bits(b)
    if not np.all(same):
        i = np.unravel_index(np.argmin(same), a.shape)
        raise AssertionError(f"{name}: {np.count_nonzero(~same)} elements differ, first at {i}: "
                             f"{a[i]!r} vs {b[i]!r}")


def names_arg(msg, name) -> bool:
    """Whether an error message names ``name`` as a whole word."""
    return re.search(rf"(^|[^A-Za-z0-9_]){name}([^A-Za-z0-9_]|$)", msg) is not None
