"""The error metrics of a multiplier, as EvoApproxLib defines them.

Design: one function, ``error_metrics(table, format)``, over every operand pair of the
format (all 65,536 of a signed 8 x 8 unit) against the exact product ``e = a * b`` of the
operands' values (err = table - e, in int64; signed operands as signed values):

    mae       mean |err|
    mae_pct   mae / 2^(a_bits + b_bits) * 100   (the output range: 2^16 for 8 x 8, 2^12 for 8 x 4)
    wce       max |err|
    wce_pct   wce / 2^(a_bits + b_bits) * 100
    wcre_pct  max |err| / |e| over pairs with e != 0, * 100
    ep_pct    share of pairs with err != 0, * 100
    mre_pct   mean |err| / |e| over pairs with e != 0, * 100
    mse       mean err^2

``Units.verify()`` puts them in its multiplier report; they are plain floats.
"""
from __future__ import annotations

import numpy as np

__all__ = ["error_metrics", "metrics_of", "METRICS"]

METRICS = ("mae", "mae_pct", "wce", "wce_pct", "wcre_pct", "ep_pct", "mre_pct", "mse")


def error_metrics(table, format=None) -> dict:
    """{metric: float} for a table of ``format`` (default signed 8 x 8: (65536,) or (256, 256)
    indexed (a & 0xff) * 256 + (b & 0xff)); any format: (2^a_bits, 2^b_bits) or flat, indexed
    [a & mask, b & mask]."""
    from lutcore.units.formats import SIGNED8, format_arg
    fmt = format_arg(format) or SIGNED8
    t = np.asarray(table).reshape(-1).astype(np.int64)
    n = fmt.table_shape[0] * fmt.table_shape[1]
    if t.size != n:
        raise ValueError(f"table: expected {n} entries (format {fmt}), got {t.size}")
    a, b = fmt.grid()
    return metrics_of(t, (a * b).reshape(-1), fmt.a_bits + fmt.b_bits)


def metrics_of(values, exact, bits: int) -> dict:
    """The metrics of products ``values`` against ``exact`` (int64 arrays of the same pairs);
    the percentages relative to 2^bits, the output range."""
    t, e = np.asarray(values, np.int64), np.asarray(exact, np.int64)
    err = t - e
    ae = np.abs(err)
    nz = e != 0
    rel = ae[nz] / np.abs(e[nz])                            # (n_nonzero,)
    mae, wce = float(ae.mean()), float(ae.max())
    r = float(1 << bits)
    return {"mae": mae, "mae_pct": mae / r * 100, "wce": wce, "wce_pct": wce / r * 100,
            "wcre_pct": float(rel.max()) * 100 if rel.size else 0.0, "ep_pct": float(np.count_nonzero(err)) / err.size * 100,
            "mre_pct": float(rel.mean()) * 100 if rel.size else 0.0, "mse": float((err * err).mean())}
