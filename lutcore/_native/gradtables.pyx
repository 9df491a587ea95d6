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


def body_names(int isa):
    """{family: the body lc_gt runs at isa} (lutcore.show_config)."""
    return {"gradient tables (backward='table')": lc_gt_body_name(isa).decode()}
