"""Plain numpy oracle for the declared accumulator (lutcore.units.accumulator's docstring: the
contract; lutcore.ops.accum runs it).

Design: written from that docstring only, never calling lutcore.  One lane is one dot product;
lanes are vectorised, steps are a plain loop over the addends in k order.  The register
starts at 0; each addend outside [lo, hi] is first brought into it by the policy (one event);
each step adds through the exact adder or an adder circuit given as a function of W-bit
patterns; an overflowing step wraps or saturates (one event).  Nothing is order-free here:
wrap with the exact adder is checked against the sum modulo 2^W by the tests, not assumed.

    name       dtype   shape            IN/OUT
    products   int     (L, K)           IN   one row per dot product, k order
    bits       int     W, 2..32         IN   the register's width
    signed     bool                     IN   [lo, hi] = [-2^(W-1), 2^(W-1)-1], else [0, 2^W-1]
    overflow   str     wrap|saturate    IN
    order      str     sequential|chunks IN  chunks: addend j = exact sum of p[jC : jC+C]
    chunk      int     C                IN   1 with sequential, >= 2 with chunks
    adder      (fn, out_bits) or None   IN   fn(a_pat int64 (L,), b_pat int64 (L,)) -> o int64 (L,),
                                             the circuit's raw output pattern, out_bits = W+1 or W
    values     int64   (L,)             OUT  the register after the last step
    counts     int64   (L,)             OUT  overflow events: addends brought in + steps

    gemm_ref:  A int (M, K), B int (K, N) codes, table (2^a_bits, 2^b_bits);
               p[m, n, k] = table[A[m,k] & (2^a_bits-1), B[k,n] & (2^b_bits-1)]  (M, N, K)
               -> C int64 (M, N), counts int64 (M, N)
"""
import numpy as np

from reference.netlist_ref import products_ref


def _range(bits, signed):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _read(pattern, width, signed):
    """int64 patterns (their low ``width`` bits) read as ``width``-bit numbers."""
    v = np.asarray(pattern, np.int64) & ((1 << width) - 1)                # (L,)
    if signed:
        v = v - (((v >> (width - 1)) & 1) << width)                       # (L,)
    return v


def _saturated(v, lo, hi, signed):
    """The saturate policy on a value leaving the register: hi when v >= 0 or unsigned, else lo."""
    return np.where((v >= 0) | (not signed), hi, lo)                      # (L,)


def accumulate_ref(products, *, bits, signed, overflow, order, chunk, adder=None):
    p = np.asarray(products).astype(np.int64)                             # (L, K)
    if p.ndim != 2:
        raise ValueError(f"products: expected (L, K), got shape {p.shape}")
    if overflow not in ("wrap", "saturate"):
        raise ValueError(f"overflow: {overflow!r}")
    if order == "sequential":
        C = 1
    elif order == "chunks":
        C = int(chunk)
        if C < 2:
            raise ValueError(f"chunk: {chunk!r}")
    else:
        raise ValueError(f"order: {order!r}")
    W = int(bits)
    lo, hi = _range(W, signed)
    mask = (1 << W) - 1
    if adder is not None:
        fn, out_bits = adder
        if out_bits not in (W, W + 1) or (out_bits == W and not signed):
            raise ValueError(f"adder: {out_bits} output bits for a {W}-bit {'signed' if signed else 'unsigned'} "
                             f"register")
    L, K = p.shape
    r = np.zeros(L, np.int64)                                             # (L,) the register
    n = np.zeros(L, np.int64)                                             # (L,) overflow events
    for j0 in range(0, K, C):
        d = p[:, j0:j0 + C].sum(axis=1)                                   # (L,) the addend, exact
        out = (d < lo) | (d > hi)                                         # (L,)
        if overflow == "wrap":
            d = np.where(out, _read(d, W, signed), d)                     # (L,)
        else:
            d = np.where(out, _saturated(d, lo, hi, signed), d)           # (L,)
        n += out
        if adder is None:
            s = r + d                                                     # (L,)
            ov = (s < lo) | (s > hi)                                      # (L,)
            sat_sign = s                                                  # (L,)
        else:
            o = np.asarray(fn(r & mask, d & mask), np.int64)              # (L,) raw pattern
            if out_bits == W + 1:
                s = _read(o, W + 1, signed)                               # (L,)
                ov = (s < lo) | (s > hi)                                  # (L,)
                sat_sign = s                                              # (L,)
            else:                                                         # W bits, signed
                s = _read(o, W, True)                                     # (L,)
                ov = ((r < 0) == (d < 0)) & ((s < 0) != (r < 0))          # (L,) the V flag
                sat_sign = r                                              # (L,)
        if overflow == "wrap":
            on_ov = _read(s, W, signed)                                   # (L,) low W bits
        else:
            on_ov = _saturated(sat_sign, lo, hi, signed)                  # (L,)
        r = np.where(ov, on_ov, s)                                        # (L,)
        n += ov
    return r, n


def gemm_ref(A, B, table, *, a_bits, b_bits, bits, signed, overflow, order, chunk, adder=None):
    A = np.asarray(A).astype(np.int64)                                    # (M, K)
    B = np.asarray(B).astype(np.int64)                                    # (K, N)
    t = np.asarray(table).astype(np.int64)                                # (2^a_bits, 2^b_bits)
    assert t.shape == (1 << a_bits, 1 << b_bits), t.shape
    M, K = A.shape
    N = B.shape[1]
    ia = A & ((1 << a_bits) - 1)                                          # (M, K)
    ib = B.T & ((1 << b_bits) - 1)                                        # (N, K)
    p = t[ia[:, None, :], ib[None, :, :]]                                 # (M, N, K)
    v, c = accumulate_ref(p.reshape(M * N, K), bits=bits, signed=signed, overflow=overflow, order=order,
                          chunk=chunk, adder=adder)                       # (M N,) each
    return v.reshape(M, N), c.reshape(M, N)


def adder_fn_from_netlist(gates, outputs, bits):
    """(fn, out_bits): an adder netlist (IR of lutcore.ops.netlist, W-bit operands a = the register,
    b = the addend) as the pattern function accumulate_ref takes."""
    outputs = np.asarray(outputs).ravel()

    def fn(a_pat, b_pat):
        return products_ref(a_pat, b_pat, gates, outputs, a_bits=bits, b_bits=bits, product_signed=False)
    return fn, int(outputs.shape[0])


def exact_adder_fn(bits, signed, out_bits):
    """(fn, out_bits): the exact sum of two W-bit patterns as an out_bits-bit pattern (W + 1: the
    sign-extended sum, or the carry out; W: the sum wrapped)."""
    assert out_bits in (bits, bits + 1)

    def fn(a_pat, b_pat):
        s = _read(a_pat, bits, signed) + _read(b_pat, bits, signed)       # (L,) exact
        return s & ((1 << out_bits) - 1)                                  # (L,) pattern
    return fn, out_bits
