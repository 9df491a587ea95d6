"""Plain numpy oracles for the test circuits (tests/circuits) and the error metrics
(DESIGN.md, "mul8 table", "Error metrics").

    operands()                  a, b int64 (65536,): the int8 pair of each table entry
    truncated_columns_lut(k)    int16 (65536,): a*b less the partial products a_i*b_j
                                (i, j < 7: the unsigned bits) of the columns i + j < k,
                                wrapped to 16 bits — a Baugh-Wooley array that drops them
    metrics_ref(table)          dict: EvoApproxLib's mae, mae_pct, wce, wce_pct, wcre_pct,
                                ep_pct, mre_pct, mse, in plain Python loops over the pairs
"""
import numpy as np


def operands():
    i = np.arange(65536)
    a = (i >> 8).astype(np.uint8).view(np.int8).astype(np.int64)      # (65536,)
    b = (i & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64)    # (65536,)
    return a, b


def truncated_columns_lut(k):
    a, b = operands()
    ua, ub = a & 0xFF, b & 0xFF                                       # (65536,) bit patterns
    p = a * b                                                         # (65536,) exact
    for i in range(7):
        for j in range(7):
            if i + j < k:
                p = p - (((ua >> i) & 1) * ((ub >> j) & 1) << (i + j))
    return ((p + 32768) % 65536 - 32768).astype(np.int16)             # wrap to int16


def metrics_ref(table):
    a, b = operands()
    t = np.asarray(table).reshape(-1).astype(np.int64).tolist()
    e = (a * b).tolist()
    n = len(e)
    errs = [ti - ei for ti, ei in zip(t, e)]
    rel = [abs(d) / abs(ei) for d, ei in zip(errs, e) if ei != 0]
    mae = sum(abs(d) for d in errs) / n
    wce = max(abs(d) for d in errs)
    return {"mae": mae, "mae_pct": mae / 2 ** 16 * 100, "wce": wce, "wce_pct": wce / 2 ** 16 * 100,
            "wcre_pct": max(rel) * 100, "ep_pct": sum(d != 0 for d in errs) / n * 100,
            "mre_pct": sum(rel) / len(rel) * 100, "mse": sum(d * d for d in errs) / n}
