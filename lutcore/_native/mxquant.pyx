"""Thin wrapper over csrc/mxquant/mxquant.h (the MX quantizer: float32 to E8M0 scales + element
codes, nearest even).

Design: lutcore.ops.mxquant checks the arguments (the format, the block, x's dtype and layout)
and allocates; here the buffers' shapes are checked against each other once more (the native
layer never reads or writes out of bounds), the GIL is released and C called.

    rows: x (R, L) float32 IN;  codes (R, Lp) uint8 OUT;  scales (R, nb) uint8 OUT
    cols: x (L, N) float32 IN;  codes (Lp, N) uint8 OUT;  scales (nb, N) uint8 OUT
    nb = ceil(L / block), Lp = nb * block
    fmt: (kind, bits, mbits, bias, emax, max_code) -- kind 0 sign/exponent/mantissa, 1 int8
"""
from lutcore._native._common cimport *
bind_team()


cdef int _job(lc_mxq_job *j, const float[:, ::1] x, uint8_t[:, ::1] codes, uint8_t[:, ::1] scales,
              int64_t block, tuple fmt, bint cols) except -1:
    cdef int64_t A = x.shape[0], B = x.shape[1]
    cdef int64_t L = A if cols else B
    if block < 1:
        raise ValueError(f"block: expected an int >= 1, got {block}")
    cdef int64_t nb = (L + block - 1) // block
    cdef int64_t Lp = nb * block
    want_c = (Lp, B) if cols else (A, Lp)
    want_s = (nb, B) if cols else (A, nb)
    if (codes.shape[0], codes.shape[1]) != want_c or (scales.shape[0], scales.shape[1]) != want_s:
        raise ValueError(f"mxquant: buffer shapes disagree: x {A, B}, block {block}: codes {want_c} and scales "
                         f"{want_s} expected, got {codes.shape[0], codes.shape[1]} and "
                         f"{scales.shape[0], scales.shape[1]}")
    if lc_mxq_format(&j.f, fmt[0], fmt[1], fmt[2], fmt[3], fmt[4], fmt[5]) != 0:
        raise ValueError(f"fmt: fields {fmt} are not an MX element format this kernel handles")
    j.x = <const uint32_t *>&x[0, 0] if A and B else NULL
    j.codes = &codes[0, 0] if codes.shape[0] and codes.shape[1] else NULL
    j.scales = &scales[0, 0] if scales.shape[0] and scales.shape[1] else NULL
    j.R = 0 if cols else A
    j.N = B if cols else 0
    j.L, j.bk, j.nb, j.Lp = L, block, nb, Lp
    return 0


def quantize_rows(uint8_t[:, ::1] codes not None, uint8_t[:, ::1] scales not None, const float[:, ::1] x not None,
                  int64_t block, tuple fmt, int isa, int nthreads):
    """codes, scales <- x's rows in MX blocks of block along the last axis (csrc/mxquant/mxquant.h)."""
    cdef lc_mxq_job j
    _job(&j, x, codes, scales, block, fmt, False)
    with nogil:
        lc_mxq_rows(&j, isa, nthreads)


def quantize_cols(uint8_t[:, ::1] codes not None, uint8_t[:, ::1] scales not None, const float[:, ::1] x not None,
                  int64_t block, tuple fmt, int isa, int nthreads):
    """codes, scales <- x's columns in MX blocks of block along axis 0 (csrc/mxquant/mxquant.h)."""
    cdef lc_mxq_job j
    _job(&j, x, codes, scales, block, fmt, True)
    with nogil:
        lc_mxq_cols(&j, isa, nthreads)


def body_names(int isa):
    """{family: the body the MX quantizer runs at isa} (lutcore.show_config)."""
    return {"mx_quantize (nearest)": lc_mxq_body_name(isa).decode()}
