"""Decode attention's products against a KV cache (csrc/attn/attn.h): the scores q K^T and
the values p V, the sgemm's fma chains; the llama decode layer built on them is lutcore._native.models.
"""
from lutcore._native._common cimport *
bind_team()
import numpy as np


def body_names(int isa):
    """The bodies ``isa`` runs: {"attention (decode)"} -> name."""
    return {"attention (decode)": lc_attn_body_name(isa).decode()}


def attn_scores(const float[:, ::1] q, const float[:, ::1] K, int isa):
    """(R, S) = q (R, hd) @ K (S, hd)^T through csrc/attn/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = q.shape[0], hd = q.shape[1], S = K.shape[0]
    if K.shape[1] != hd:
        raise ValueError(f"K: expected (S, {hd}), got ({K.shape[0]}, {K.shape[1]})")
    out = np.empty((R, S), np.float32)
    cdef float[:, ::1] o = out
    cdef float[::1] kt = np.empty(LC_ATTN_KT(hd), np.float32)
    if R and S:
        with nogil:
            lc_attn_scores(&o[0, 0], S, &q[0, 0], hd, R, &K[0, 0], S, hd, &kt[0], isa)
    return out


def attn_values(const float[:, ::1] p, const float[:, ::1] V, int isa):
    """(R, hd) = p (R, S) @ V (S, hd) through csrc/attn/attn.h (tests: equal to the sgemm's bits)."""
    cdef int64_t R = p.shape[0], S = p.shape[1], hd = V.shape[1]
    if V.shape[0] != S:
        raise ValueError(f"V: expected ({S}, hd), got ({V.shape[0]}, {V.shape[1]})")
    out = np.empty((R, hd), np.float32)
    cdef float[:, ::1] o = out
    if R and hd:
        with nogil:
            lc_attn_values(&o[0, 0], hd, &p[0, 0], S, R, &V[0, 0], S, hd, isa)
    return out
