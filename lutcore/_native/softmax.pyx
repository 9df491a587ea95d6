"""Causal (and sliding-window) softmax rows, forward and backward (csrc/softmax/softmax.h);
their exponentials are the math functions' (csrc/mathfn/).
"""
from lutcore._native._common cimport *
bind_team()


def body_names(int isa):
    """{"softmax"} -> the body of its exponentials (the math functions')."""
    return {"softmax": lc_mathfn_body_name(isa).decode()}


def softmax_causal(float[:, :, ::1] s, int64_t T, int64_t pos, int64_t window, int isa, int nthreads):
    """In place on scores s (KV, g*T, S), rows (g, t): the query at row r sits at position
    pos + r % T; causal (and sliding-window) masking, then the stage's softmax steps."""
    cdef int64_t KV = s.shape[0], R = s.shape[1], S = s.shape[2]
    if T <= 0 or R % T:
        raise ValueError(f"T: expected a positive divisor of the {R} score rows, got {T}")
    if KV == 0 or R == 0 or S == 0:
        return
    with nogil:
        lc_softmax_causal(&s[0, 0, 0], KV, R, S, T, pos, window, isa, nthreads)


def softmax_causal_backward(float[:, :, ::1] ds, const float[:, :, ::1] att, int64_t T, int64_t pos, double scale,
                            int nthreads):
    """In place on ds = dL/d(att) (KV, g*T, S), rows laid out as in softmax_causal, given its
    output att: the scores' gradient ((ds - <ds, att>_row) * att) * scale, zero past each
    query's position (csrc/softmax/softmax.h)."""
    cdef int64_t KV = ds.shape[0], R = ds.shape[1], S = ds.shape[2]
    if att.shape[0] != KV or att.shape[1] != R or att.shape[2] != S:
        raise ValueError(f"att: expected the shape of ds ({KV}, {R}, {S}), got ({att.shape[0]}, {att.shape[1]}, "
                         f"{att.shape[2]})")
    if T <= 0 or R % T:
        raise ValueError(f"T: expected a positive divisor of the {R} rows, got {T}")
    if KV == 0 or R == 0 or S == 0:
        return
    with nogil:
        lc_softmax_causal_bwd(&ds[0, 0, 0], &att[0, 0, 0], KV, R, S, T, pos, <float>scale, nthreads)
