"""Thin wrapper over csrc/netlist/netlist.h (GEMM and products through a gate netlist, bit-sliced).

Design: lutcore.ops.netlist checks the arguments (codes in range, the netlist's form, shapes,
the K bound) and allocates; here the buffers' shapes are checked against each other and the
netlist once more in C (lc_nl_check: the native layer never reads out of bounds), the GIL is
released and C called.

    gates    (G, 4) int32   rows [x, y, z, tt]                 IN
    outputs  (p_bits,) int32                                   IN
    a, b     (M, K), (K, N) uint16 codes; out (M, N) int64     gemm
    a, b     (n,) uint16; out (n,) int64                       products
"""
from lutcore._native._common cimport *


cdef int _check(const int32_t[:, ::1] gates, const int32_t[::1] outputs, int a_bits, int b_bits) except -1:
    if gates.shape[1] != 4:
        raise ValueError(f"gates: expected shape (G, 4), got (G, {gates.shape[1]})")
    if lc_nl_check(&gates[0, 0] if gates.shape[0] else NULL, gates.shape[0], &outputs[0] if outputs.shape[0] else NULL,
                   a_bits, b_bits, <int>outputs.shape[0]) != 0:
        raise ValueError("gates, outputs: not a netlist of the IR (ids, order, truth tables, widths)")
    return 0


cdef int _rc(int rc) except -1:
    if rc == -2:
        raise MemoryError("netlist: a native allocation failed")
    if rc != 0:
        raise ValueError("gates, outputs: not a netlist of the IR")
    return 0


def gemm(int64_t[:, ::1] out, const uint16_t[:, ::1] a, const uint16_t[:, ::1] b, const int32_t[:, ::1] gates,
         const int32_t[::1] outputs, int a_bits, int b_bits, bint product_signed, int isa, int nthreads):
    """out (M, N) = sum_k value(P(a[m, k], b[k, n])) (csrc/netlist/netlist.h)."""
    cdef int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1], G = gates.shape[0]
    cdef int P = <int>outputs.shape[0], rc
    if b.shape[0] != K or out.shape[0] != M or out.shape[1] != N:
        raise ValueError("gemm: operand shapes disagree")
    _check(gates, outputs, a_bits, b_bits)
    if M == 0 or N == 0:
        return
    cdef const uint16_t *pa = &a[0, 0] if K else NULL
    cdef const uint16_t *pb = &b[0, 0] if K else NULL
    cdef const int32_t *pg = &gates[0, 0] if G else NULL
    with nogil:
        rc = lc_nl_gemm(&out[0, 0], pa, pb, M, N, K, pg, G, &outputs[0], a_bits, b_bits, P, product_signed,
                        isa, nthreads)
    _rc(rc)


def products(int64_t[::1] out, const uint16_t[::1] a, const uint16_t[::1] b, const int32_t[:, ::1] gates,
             const int32_t[::1] outputs, int a_bits, int b_bits, bint product_signed, int isa, int nthreads):
    """out[i] = value(P(a[i], b[i])) (csrc/netlist/netlist.h)."""
    cdef int64_t n = a.shape[0], G = gates.shape[0]
    cdef int P = <int>outputs.shape[0], rc
    if b.shape[0] != n or out.shape[0] != n:
        raise ValueError("products: a, b and out differ in length")
    _check(gates, outputs, a_bits, b_bits)
    if n == 0:
        return
    cdef const int32_t *pg = &gates[0, 0] if G else NULL
    with nogil:
        rc = lc_nl_products(&out[0], &a[0], &b[0], n, pg, G, &outputs[0], a_bits, b_bits, P, product_signed,
                            isa, nthreads)
    _rc(rc)


def body_names(int isa):
    """{family: the body the netlist kernels run at isa} (lutcore.show_config)."""
    return {"netlist (gate-level multipliers)": lc_nl_body_name(isa).decode()}
