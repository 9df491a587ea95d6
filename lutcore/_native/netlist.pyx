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
bind_team()


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


cdef int _spec(lc_acc_spec *sp, int W, bint sgn, bint sat, int64_t chunk, const int32_t[:, ::1] gates,
               const int32_t[::1] outputs) except -1:
    if not 2 <= W <= 32 or chunk < 1:
        raise ValueError(f"accumulator: width {W} (2..32) or chunk {chunk} (>= 1) out of range")
    sp.W, sp.sgn, sp.sat, sp.chunk = W, sgn, sat, chunk
    sp.out_bits = <int>outputs.shape[0] if gates is not None else 0
    if gates is not None:
        if W > 16 or sp.out_bits not in (W, W + 1):
            raise ValueError(f"adder: a {W}-bit register's adder netlist has {W} or {W + 1} outputs (W <= 16), "
                             f"got {sp.out_bits}")
        _check(gates, outputs, W, W)
    return 0


cdef int _acc_call(int64_t[::1] out, int64_t[::1] cnt, lc_acc_src *S, int64_t L, int64_t K, lc_acc_spec *sp,
                   const int32_t[:, ::1] gates, const int32_t[::1] outputs, int isa, int nthreads) except -1:
    cdef int rc
    cdef int64_t *pc = NULL
    cdef const int32_t *pg = NULL
    cdef const int32_t *po = NULL
    if out.shape[0] != L or (cnt is not None and cnt.shape[0] != L):
        raise ValueError("accumulate: out / counts lengths differ from the lanes")
    if cnt is not None and L:
        pc = &cnt[0]
    if gates is not None:
        if gates.shape[0]:
            pg = &gates[0, 0]
        po = &outputs[0]
    if L == 0:
        return 0
    with nogil:
        rc = lc_acc_run(&out[0], pc, S, L, K, sp, pg, gates.shape[0] if gates is not None else 0, po, isa, nthreads)
    return _rc(rc)


def accumulate(int64_t[::1] out, int64_t[::1] cnt, const int64_t[:, ::1] products, int W, bint sgn, bint sat,
               int64_t chunk, const int32_t[:, ::1] gates, const int32_t[::1] outputs, int isa, int nthreads):
    """out[l] (and cnt[l], cnt may be None) = lane l's products accumulated in the declared register
    (csrc/netlist/accum.h); gates None: the exact adder."""
    cdef lc_acc_spec sp
    cdef lc_acc_src S
    _spec(&sp, W, sgn, sat, chunk, gates, outputs)
    cdef int64_t L = products.shape[0], K = products.shape[1]
    S.P = &products[0, 0] if L and K else NULL
    S.A = NULL
    S.B = NULL
    S.tab = NULL
    S.N = 0
    if K == 0:
        out[:] = 0
        if cnt is not None:
            cnt[:] = 0
        return
    _acc_call(out, cnt, &S, L, K, &sp, gates, outputs, isa, nthreads)


def accum_gemm(int64_t[::1] out, int64_t[::1] cnt, const uint16_t[:, ::1] a, const uint16_t[:, ::1] b,
               const int32_t[::1] table, int a_bits, int b_bits, int W, bint sgn, bint sat, int64_t chunk,
               const int32_t[:, ::1] gates, const int32_t[::1] outputs, int isa, int nthreads):
    """out[m N + n] = sum over k of table[a[m, k], b[k, n]] in the declared register (accum.h)."""
    cdef lc_acc_spec sp
    cdef lc_acc_src S
    _spec(&sp, W, sgn, sat, chunk, gates, outputs)
    cdef int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1]
    if b.shape[0] != K or not 1 <= a_bits <= 8 or not 1 <= b_bits <= 8 or table.shape[0] != (1 << (a_bits + b_bits)):
        raise ValueError("accum_gemm: operand shapes, widths or the table's size disagree")
    if K == 0:
        out[:] = 0
        if cnt is not None:
            cnt[:] = 0
        return
    S.P = NULL
    S.A = &a[0, 0] if M else NULL
    S.B = &b[0, 0] if N else NULL
    S.tab = &table[0]
    S.N = N
    S.bb = b_bits
    S.am = <uint16_t>((1 << a_bits) - 1)
    S.bm = <uint16_t>((1 << b_bits) - 1)
    _acc_call(out, cnt, &S, M * N, K, &sp, gates, outputs, isa, nthreads)


def body_names(int isa):
    """{family: the body the netlist kernels run at isa} (lutcore.show_config)."""
    return {"netlist (gate-level multipliers)": lc_nl_body_name(isa).decode()}
