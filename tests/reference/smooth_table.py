"""A smooth stand-in for a multiplier, F(a, b) = a*b plus a slow wobble, with its exact
partial derivatives: the gradient-table backward's finite-difference checks use F between
the grid points and (dF/da, dF/db) on the grid as the unit's gradient tables."""
import numpy as np


def F(a, b):
    return a * b + 9.0 * np.sin(a / 17.0) * np.cos(b / 23.0) + 0.004 * a * a * b


def dF_da(a, b):
    return b + 9.0 / 17.0 * np.cos(a / 17.0) * np.cos(b / 23.0) + 0.008 * a * b


def dF_db(a, b):
    return a - 9.0 / 23.0 * np.sin(a / 17.0) * np.sin(b / 23.0) + 0.004 * a * a


def smooth_units():
    """The exact units carrying F's partials (on the int8 grid, table order) as gradient tables."""
    from lutcore.units import Units
    v = np.arange(256).astype(np.uint8).view(np.int8).astype(np.float64)
    A, B = np.meshgrid(v, v, indexing="ij")
    return Units.exact().with_gradients(dF_da(A, B), dF_db(A, B))
