"""Thin wrappers over csrc/elementwise/elementwise.h (arguments validated by lutcore.ops)."""
from lutcore._native._common cimport *
bind_team()


def requant(int8_t[::1] out, const int32_t[::1] acc, int shift, const int8_t[::1] lut,
            int clamp_lo, int clamp_hi, bint is_clamp, int isa, int nthreads):
    cdef int64_t n = acc.shape[0]
    if n == 0:
        return
    with nogil:
        lc_requant(&out[0], &acc[0], n, shift, &lut[0], clamp_lo, clamp_hi, is_clamp, isa, nthreads)


def body_names(int isa):
    """The bodies ``isa`` runs: {"element-wise (requant, fp16)", "relu8"} -> name."""
    return {fam: lc_ew_body_name(isa, i).decode() for i, fam in
            enumerate(("element-wise (requant, fp16)", "relu8"))}


def relu8(int8_t[::1] out, const int8_t[::1] x, const int8_t[::1] lut, int isa, int nthreads):
    cdef int64_t n = x.shape[0]
    if n == 0:
        return
    with nogil:
        lc_relu8(&out[0], &x[0], n, &lut[0], isa, nthreads)


def fp16_encode(uint16_t[::1] out, const float[::1] x, int mode, int isa, int nthreads):
    cdef int64_t n = x.shape[0]
    if n == 0:
        return
    with nogil:
        lc_fp16_encode(&out[0], &x[0], n, mode, isa, nthreads)


def fp16_decode(float[::1] out, const uint16_t[::1] h, int isa, int nthreads):
    cdef int64_t n = h.shape[0]
    if n == 0:
        return
    with nogil:
        lc_fp16_decode(&out[0], &h[0], n, isa, nthreads)


def fp16_round(float[::1] out, const float[::1] x, int mode, int isa, int nthreads):
    cdef int64_t n = x.shape[0]
    if n == 0:
        return
    with nogil:
        lc_fp16_round(&out[0], &x[0], n, mode, isa, nthreads)


def scatter_add_rows(float[:, ::1] grad, const int64_t[::1] ids, const float[:, ::1] dy, int nthreads):
    """grad[ids[t]] += dy[t] for t in order (np.add.at's bits)."""
    cdef int64_t V = grad.shape[0], C = grad.shape[1], n = ids.shape[0], t
    if dy.shape[0] != n or dy.shape[1] != C:
        raise ValueError(f"dy: expected ({n}, {C}), got ({dy.shape[0]}, {dy.shape[1]})")
    for t in range(n):
        if ids[t] < 0 or ids[t] >= V:
            raise ValueError(f"ids: expected row indices in [0, {V}), got {ids[t]} at {t}")
    if n == 0 or C == 0:
        return
    with nogil:
        lc_scatter_add_rows(&grad[0, 0], C, &ids[0], n, &dy[0, 0], nthreads)
