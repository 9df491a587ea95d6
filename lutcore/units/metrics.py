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

An adder's (``adder_metrics``; ``Adder.error_metrics``) are the same eight against the exact
sum ``e = a + b`` of the operands' values (signed or unsigned as the adder reads them), with
the output read at its width (``out_bits``) and signedness; EvoApproxLib's definitions for its
add8u .. add16se, found by computing them on its circuits and matching their headers:

    pairs     every pair whose exact sum the output can hold: all of them for an adder with
              a carry out or a sign-extended sum (bits + 1 outputs: add8u, add8se, add12se...);
              for one with bits outputs (add8s, which wraps) those whose sum does not overflow
    scale     mae_pct and wce_pct relative to the output's magnitude: 2^(out_bits - 1) when
              signed (2^8 for add8se, 2^7 for add8s), 2^out_bits unsigned (2^9 for add8u)
    relative  wcre_pct and mre_pct over the pairs with e != 0

EvoApproxLib derives its MAE% from its MAE rounded to one decimal (add8se_7C9: MAE 0.25
printed 0.2, MAE% 0.078 = 0.2 / 2^8); ``ADDER_MAE_ROUNDING`` is that 0.05, which a comparison with a
published MAE% allows (``Adder`` passes it to ``lutcore.units.cost``).

A floating-point multiplier's (``lutcore.units.fpmul.fp_metrics``) are on real values, products p
against exact products e (float64, exact), err = p - e:

    relative_metrics   over pairs with e finite and nonzero, rel = err / e (> 0: p further from 0
                       than e, whatever the sign), weights w >= 0
                       normalised to sum 1 (None: uniform):
        mred         sum w |rel|            mean relative error distance
        max_red      max |rel| (w > 0)      worst relative error
        bias         sum w rel              mean signed relative error
        msre         sum w rel^2            mean squared relative error
        error_rate   sum w [p != e]         share of pairs not exact
        max_abs_err  max |err| (w > 0)      worst absolute error
    value_metrics      EvoApproxLib's, unweighted, over the pairs given (all finite operands):
        mae, wce, ep_pct, mse as above; mre_pct and wcre_pct over e != 0 (no _pct of an output
        range: a float product has none)
"""
from __future__ import annotations

import numpy as np

__all__ = ["error_metrics", "metrics_of", "adder_metrics", "adder_scale_bits", "relative_metrics",
           "value_metrics", "METRICS", "FP_METRICS", "ADDER_MAE_ROUNDING"]

METRICS = ("mae", "mae_pct", "wce", "wce_pct", "wcre_pct", "ep_pct", "mre_pct", "mse")
ADDER_MAE_ROUNDING = 0.05      # EvoApproxLib rounds an adder's MAE to 0.1 before its MAE%
FP_METRICS = ("mred", "max_red", "bias", "msre", "error_rate", "max_abs_err")


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


def adder_scale_bits(out_bits: int, signed: bool) -> int:
    """log2 of what an adder's mae_pct and wce_pct are relative to: the output's magnitude."""
    return int(out_bits) - int(bool(signed))


def adder_metrics(values, exact, *, out_bits: int, signed: bool) -> dict:
    """EvoApproxLib's metrics of an adder (the module docstring):

        values    (N,) int64  IN  the adder's outputs, read at out_bits bits, signed as it is
        exact     (N,) int64  IN  the exact sums a + b of the same pairs
        returns   {metric: float} and "pairs": how many pairs counted (those the output holds)
    """
    v, e = np.asarray(values, np.int64), np.asarray(exact, np.int64)
    q = int(out_bits)
    lo, hi = (-(1 << (q - 1)), (1 << (q - 1)) - 1) if signed else (0, (1 << q) - 1)
    keep = (e >= lo) & (e <= hi)                            # (N,): every pair but a wrapping adder's overflows
    if not keep.all():
        v, e = v[keep], e[keep]
    m = metrics_of(v, e, adder_scale_bits(q, signed))
    m["pairs"] = float(e.size)
    return m


def relative_metrics(values, exact, weights=None) -> dict:
    """The relative metrics of real products (the module docstring):

        values    (N,) float  IN  the unit's products
        exact     (N,) float  IN  the exact products, finite and nonzero
        weights   (N,) float  IN  >= 0, not all 0 (None: uniform)
        returns   {metric: float} for FP_METRICS (NaN/inf where a product is)
    """
    p, e = np.asarray(values, np.float64), np.asarray(exact, np.float64)
    w = np.full(e.shape, 1.0) if weights is None else np.asarray(weights, np.float64)
    if e.size == 0 or not w.sum() > 0:
        raise ValueError("weights: no pair of finite nonzero operands has a positive weight")
    w = w / w.sum()
    err = p - e                                                  # (N,)
    with np.errstate(invalid="ignore"):
        rel = err / e                                            # (N,): > 0 where |p| > |e| (same sign)
    on = w > 0
    return {"mred": float((w * np.abs(rel)).sum()), "max_red": float(np.abs(rel[on]).max()),
            "bias": float((w * rel).sum()), "msre": float((w * rel * rel).sum()),
            "error_rate": float(w[p != e].sum()), "max_abs_err": float(np.abs(err[on]).max())}


def value_metrics(values, exact) -> dict:
    """EvoApproxLib's metrics of real products ``values`` against ``exact`` (float arrays of the
    same pairs): mae, wce, ep_pct, mre_pct, wcre_pct (over exact != 0), mse."""
    p, e = np.asarray(values, np.float64), np.asarray(exact, np.float64)
    err = p - e
    ae = np.abs(err)
    nz = e != 0
    rel = ae[nz] / np.abs(e[nz])
    return {"mae": float(ae.mean()), "wce": float(ae.max()), "ep_pct": float(np.count_nonzero(err)) / err.size * 100,
            "mre_pct": float(rel.mean()) * 100 if rel.size else 0.0,
            "wcre_pct": float(rel.max()) * 100 if rel.size else 0.0, "mse": float((err * err).mean())}
