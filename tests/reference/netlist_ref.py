"""Plain numpy oracle for the netlist kernels (lutcore.ops.netlist, csrc/netlist/netlist.h).

Design: written from the IR's definition only, never calling lutcore.  Every node is a bool
array over the pairs; gate g reads its three nodes and looks its output up in its truth table
(out = (tt >> (4 x + 2 y + z)) & 1), one gate after another; a product's value is the sum of
its bits times 2^p, the top one weighing -2^(P-1) when product_signed.  No bit-slicing.

    name     dtype   shape       IN/OUT
    a, b     int     (n,)        IN   operand codes: the low a_bits / b_bits bits of each
                                      value's two's-complement pattern are the inputs
    gates    int32   (G, 4)      IN   rows [x, y, z, tt]
    outputs  int32   (P,)        IN   node of product bit p
    out      int64   (n,)        OUT  products_ref: out[i] = value(P(a[i], b[i]))
    C        int64   (M, N)      OUT  gemm_ref: C[m, n] = sum_k value(P(A[m, k], B[k, n]))
"""
import numpy as np


def products_ref(a, b, gates, outputs, *, a_bits, b_bits, product_signed):
    a = np.asarray(a).astype(np.int64).ravel()                 # (n,)
    b = np.asarray(b).astype(np.int64).ravel()                 # (n,)
    gates = np.asarray(gates, np.int64).reshape(-1, 4)         # (G, 4)
    outputs = np.asarray(outputs, np.int64).ravel()            # (P,)
    n = a.shape[0]
    nodes = [np.zeros(n, bool), np.ones(n, bool)]              # the constants, (n,) each
    nodes += [((a >> i) & 1).astype(bool) for i in range(a_bits)]
    nodes += [((b >> j) & 1).astype(bool) for j in range(b_bits)]
    for x, y, z, tt in gates:
        idx = 4 * nodes[x].astype(np.int64) + 2 * nodes[y] + nodes[z]      # (n,) minterm
        nodes.append(((int(tt) >> idx) & 1).astype(bool))
    P = len(outputs)
    val = np.zeros(n, np.int64)
    for p, node in enumerate(outputs):
        w = -(1 << p) if (product_signed and p == P - 1) else (1 << p)
        val += w * nodes[node].astype(np.int64)
    return val


def gemm_ref(A, B, gates, outputs, *, a_bits, b_bits, product_signed):
    A = np.asarray(A).astype(np.int64)                         # (M, K)
    B = np.asarray(B).astype(np.int64)                         # (K, N)
    M, K = A.shape
    N = B.shape[1]
    aa = np.broadcast_to(A[:, :, None], (M, K, N)).ravel()     # (M K N,)
    bb = np.broadcast_to(B[None, :, :], (M, K, N)).ravel()     # (M K N,)
    v = products_ref(aa, bb, gates, outputs, a_bits=a_bits, b_bits=b_bits, product_signed=product_signed)
    return v.reshape(M, K, N).sum(axis=1)                      # (M, N)
