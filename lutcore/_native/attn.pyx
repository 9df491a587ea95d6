# cython: language_level=3
"""Decode attention's products against a KV cache (csrc/attn/attn.h): the scores q K^T and
the values p V, the sgemm's fma chains; the llama decode layer built on them is lutcore._native.models.
"""
from libc.stdint cimport int64_t
import numpy as np
cimport numpy as cnp
cnp.import_array()


cdef inline float* _f(object a):
    return <float *>cnp.PyArray_DATA(<cnp.ndarray>a) if a is not None else NULL


def body_names(int isa):
    """The bodies ``isa`` runs: {"attention (decode)"} -> name."""
    return {"attention (decode)": lc_attn_body_name(isa).decode()}


def attn_scores(const float[:, ::1] q, const float[:, ::1] K, int isa):
    """(R, S) = q (R, hd) @ K (S, hd)^T through csrc/attn/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = q.shape[0], hd = q.shape[1], S = K.shape[0]
    if K.shape[1] != hd:
        raise ValueError(f"K: expected (S, {hd}), got ({K.shape[0]}, {K.shape[1]})")
    out = cnp.PyArray_EMPTY(2, [R, S], cnp.NPY_FLOAT32, 0)
    kt = cnp.PyArray_EMPTY(1, [LC_ATTN_KT(hd)], cnp.NPY_FLOAT32, 0)
    cdef float *po = _f(out)
    cdef float *pk = _f(kt)
    if R and S:
        with nogil:
            lc_attn_scores(po, S, &q[0, 0], hd, R, &K[0, 0], S, hd, pk, isa)
    return out


def attn_values(const float[:, ::1] p, const float[:, ::1] V, int isa):
    """(R, hd) = p (R, S) @ V (S, hd) through csrc/attn/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = p.shape[0], S = p.shape[1], hd = V.shape[1]
    if V.shape[0] != S:
        raise ValueError(f"V: expected ({S}, hd), got ({V.shape[0]}, {V.shape[1]})")
    out = cnp.PyArray_EMPTY(2, [R, hd], cnp.NPY_FLOAT32, 0)
    cdef float *po = _f(out)
    if R and hd:
        with nogil:
            lc_attn_values(po, hd, &p[0, 0], S, R, &V[0, 0], S, hd, isa)
    return out
