"""Thin wrapper over csrc/gradtables/gradtables.h (backward="table"'s gradient pass).

Design: lutcore.torch._gradtables validates shapes and allocates; here we check the
buffers' sizes (the native layer never reads or writes out of bounds), release the
GIL and call C.
"""
from lutcore._native._common cimport *
bind_team()


def table_pass(int which, float[:, ::1] out, const int8_t[:, ::1] qx, const uint8_t[:, ::1] qw,
               const float[:, ::1] w, const float[::1] table, int isa, int nthreads):
    """which 0: out (M, K) = sum_o w[m, o] table[qx[m, k], qw[o, k]]; which 1: out (O, K) =
    sum_m w[m, o] table[qx[m, k], qw[o, k]] (table (65536,), w (M, O))."""
    cdef int64_t M = qx.shape[0], K = qx.shape[1], O = qw.shape[0]
    if qw.shape[1] != K or w.shape[0] != M or w.shape[1] != O or table.shape[0] != 65536:
        raise ValueError("table_pass: operand shapes disagree")
    if out.shape[0] != (O if which else M) or out.shape[1] != K:
        raise ValueError("table_pass: out has the wrong shape")
    if M == 0 or K == 0 or O == 0:
        return
    with nogil:
        lc_gt(which, &out[0, 0], &qx[0, 0], &qw[0, 0], &w[0, 0], &table[0], M, K, O, isa, nthreads)


def planes_pass(float[:, :] outT, const int8_t[:, :] c, const uint8_t[:, :] idxT, const float[:, :] w,
                const uint8_t[:, ::1] planes, float scale, bint skip, int isa, int nthreads, bint sym=False):
    """outT (K, L) = sum_i w[i, l] G[c[i, k]][idxT[k, l]] (gradtables/planes.h): c (NI, K) int8 with any
    strides; outT, idxT (K, L) and w (NI, L) with contiguous rows, idxT's and w's rows equally far
    apart (L lanes of wider arrays); planes (256, 512); skip: many codes c are 0; sym: the codes idxT are
    signed and the rows may be even in the entry (hints, checked in C: the same bits)."""
    cdef int64_t NI = c.shape[0], K = c.shape[1], L = idxT.shape[1]
    if idxT.shape[0] != K or w.shape[0] != NI or w.shape[1] != L or planes.shape[0] != 256 or planes.shape[1] != 512:
        raise ValueError("planes_pass: operand shapes disagree")
    if outT.shape[0] != K or outT.shape[1] != L:
        raise ValueError("planes_pass: outT has the wrong shape")
    if K == 0 or L == 0:
        return
    if outT.strides[1] != 4 or idxT.strides[1] != 1 or (NI > 0 and w.strides[1] != 4):
        raise ValueError("planes_pass: outT, idxT and w need contiguous rows")
    cdef int64_t ldx = idxT.strides[0] if K > 1 else -1
    cdef int64_t ldw = (w.strides[0] // 4 if w.strides[0] % 4 == 0 else -2) if NI > 1 else -1
    cdef int64_t ldo = (outT.strides[0] // 4 if outT.strides[0] % 4 == 0 else -2) if K > 1 else L
    if ldx >= 0 and ldw != -1 and ldw != ldx:
        raise ValueError("planes_pass: idxT's and w's rows must be the same distance apart")
    cdef int64_t ldi = ldx if ldx >= 0 else (ldw if ldw != -1 else L)
    if ldi < L or ldo < L:
        raise ValueError("planes_pass: rows overlap (outT, idxT or w)")
    cdef const int8_t *cp = &c[0, 0] if NI > 0 else NULL
    cdef const float *wp = &w[0, 0] if NI > 0 else NULL
    cdef int flags = (LC_GTP_SKIP if skip else 0) | (LC_GTP_SYM if sym else 0)
    with nogil:
        lc_gt_planes(&outT[0, 0], ldo, cp, c.strides[0], c.strides[1], &idxT[0, 0], wp, ldi, &planes[0, 0], scale,
                     NI, K, L, flags, isa, nthreads)


def planes_fast(int isa):
    """Whether isa runs a vector body of the planes pass (where it beats lc_gt's gathers)."""
    return bool(lc_gtp_fast(isa))


def body_names(int isa):
    """{family: the body lc_gt runs at isa} (lutcore.show_config)."""
    return {"gradient tables (backward='table')": lc_gt_body_name(isa).decode(),
            "gradient tables, planes (backward='table')": lc_gtp_body_name(isa).decode()}
