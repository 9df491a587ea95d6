"""The error metrics of an 8-bit multiplier table, as EvoApproxLib defines them.

Design: one function, ``error_metrics(table)``, over all 65,536 operand pairs
against the exact product ``e = a * b`` (err = table - e, in int64):

    mae       mean |err|
    mae_pct   mae / 2^16 * 100             (the output range of a 16-bit product)
    wce       max |err|
    wce_pct   wce / 2^16 * 100
    wcre_pct  max |err| / |e| over pairs with e != 0, * 100
    ep_pct    share of pairs with err != 0, * 100
    mre_pct   mean |err| / |e| over pairs with e != 0, * 100
    mse       mean err^2

``Units.verify()`` puts them in its multiplier report; they are plain floats.
"""
from __future__ import annotations

import numpy as np

__all__ = ["error_metrics", "METRICS"]

METRICS = ("mae", "mae_pct", "wce", "wce_pct", "wcre_pct", "ep_pct", "mre_pct", "mse")


def error_metrics(table) -> dict:
    """{metric: float} for a (65536,) or (256, 256) int16 table indexed (a & 0xff) * 256 + (b & 0xff)."""
    from lutcore.units import exact_mul_table
    t = np.asarray(table).reshape(-1).astype(np.int64)
    if t.size != 65536:
        raise ValueError(f"table: expected 65536 entries, got {t.size}")
    e = exact_mul_table().astype(np.int64)                  # (65536,)
    err = t - e                                             # (65536,)
    ae = np.abs(err)
    nz = e != 0
    rel = ae[nz] / np.abs(e[nz])                            # (n_nonzero,)
    mae, wce = float(ae.mean()), float(ae.max())
    return {"mae": mae, "mae_pct": mae / 65536 * 100, "wce": wce, "wce_pct": wce / 65536 * 100,
            "wcre_pct": float(rel.max()) * 100, "ep_pct": float(np.count_nonzero(err)) / err.size * 100,
            "mre_pct": float(rel.mean()) * 100, "mse": float((err * err).mean())}
