"""Rows of RMSNorm and LayerNorm, forward and backward (csrc/norm/norm.h).
Python validates; these wrappers check the buffers' shapes, release the GIL and call C.
"""
from lutcore._native._common cimport *
bind_team()
import numpy as np


def body_names(int isa):
    """The bodies ``isa`` runs: {"norms (RMSNorm, LayerNorm)"} -> name."""
    return {"norms (RMSNorm, LayerNorm)": lc_norm_body_name(isa).decode()}


def rmsnorm_rows(float[:, ::1] out not None, const float[:, ::1] x not None, const float[::1] w not None,
                 double eps, float[::1] rstd, int isa, int nthreads):
    """Rows of RMSNorm (csrc/norm/norm.h): out = (x * r) * w, r = 1/sqrt(in-order mean(x*x) + eps);
    r per row into rstd (R,) float32 when given (else None); the body for `isa`."""
    cdef int64_t R = x.shape[0], C = x.shape[1]
    cdef float *pr = NULL
    if out.shape[0] != R or out.shape[1] != C or w.shape[0] != C:
        raise ValueError(f"out, w: expected ({R}, {C}) and ({C},), got ({out.shape[0]}, {out.shape[1]}) "
                         f"and ({w.shape[0]},)")
    if rstd is not None:
        if rstd.shape[0] != R:
            raise ValueError(f"rstd: expected ({R},), got ({rstd.shape[0]},)")
        if R:
            pr = &rstd[0]
    if R and C:
        with nogil:
            lc_rmsnorm_rows(&out[0, 0], pr, &x[0, 0], &w[0], R, C, <float>eps, isa, nthreads)


def rmsnorm_rows_backward(float[:, ::1] dx, float[::1] dw, const float[:, ::1] dy, const float[:, ::1] x,
                          const float[::1] w, const float[::1] rstd, int isa, int nthreads):
    """dx of RMSNorm rows, and dw += the weight's gradient (csrc/norm/norm.h; the same bits at
    any thread count)."""
    cdef int64_t R = x.shape[0], C = x.shape[1]
    if dx.shape[0] != R or dx.shape[1] != C or dy.shape[0] != R or dy.shape[1] != C:
        raise ValueError(f"dx, dy: expected ({R}, {C}), got ({dx.shape[0]}, {dx.shape[1]}) and "
                         f"({dy.shape[0]}, {dy.shape[1]})")
    if w.shape[0] != C or dw.shape[0] != C or rstd.shape[0] != R:
        raise ValueError(f"w, dw, rstd: expected ({C},), ({C},), ({R},), got ({w.shape[0]},), ({dw.shape[0]},), "
                         f"({rstd.shape[0]},)")
    if R == 0 or C == 0:
        return
    cdef float[::1] work = np.empty(((R + LC_NORM_ROWS - 1) // LC_NORM_ROWS) * C, np.float32)
    with nogil:
        lc_rmsnorm_rows_bwd(&dx[0, 0], &dw[0], &dy[0, 0], &x[0, 0], &w[0], &rstd[0], R, C, &work[0], isa, nthreads)


def layernorm_rows(float[:, ::1] y, float[:, ::1] xhat, float[::1] rstd, const float[:, ::1] x,
                   const float[::1] w, const float[::1] b, double eps, int isa, int nthreads):
    """Rows of LayerNorm (csrc/norm/norm.h): y, and xhat and rstd for the backward."""
    cdef int64_t R = x.shape[0], C = x.shape[1]
    if y.shape[0] != R or y.shape[1] != C or xhat.shape[0] != R or xhat.shape[1] != C or rstd.shape[0] != R:
        raise ValueError(f"y, xhat, rstd: expected ({R}, {C}), ({R}, {C}), ({R},), got ({y.shape[0]}, {y.shape[1]}), "
                         f"({xhat.shape[0]}, {xhat.shape[1]}), ({rstd.shape[0]},)")
    if w.shape[0] != C or b.shape[0] != C:
        raise ValueError(f"w, b: expected ({C},), got ({w.shape[0]},) and ({b.shape[0]},)")
    if R and C:
        with nogil:
            lc_layernorm_rows(&y[0, 0], &xhat[0, 0], &rstd[0], &x[0, 0], &w[0], &b[0], R, C, <float>eps, isa, nthreads)


def layernorm_rows_backward(float[:, ::1] dx, float[::1] dw, float[::1] db, const float[:, ::1] dy,
                            const float[:, ::1] xhat, const float[::1] w, const float[::1] rstd, int isa,
                            int nthreads):
    """dx of LayerNorm rows; dw, db += their gradients (the same bits at any thread count)."""
    cdef int64_t R = xhat.shape[0], C = xhat.shape[1]
    if dx.shape[0] != R or dx.shape[1] != C or dy.shape[0] != R or dy.shape[1] != C:
        raise ValueError(f"dx, dy: expected ({R}, {C}), got ({dx.shape[0]}, {dx.shape[1]}) and "
                         f"({dy.shape[0]}, {dy.shape[1]})")
    if w.shape[0] != C or dw.shape[0] != C or db.shape[0] != C or rstd.shape[0] != R:
        raise ValueError(f"w, dw, db, rstd: expected ({C},) x3 and ({R},), got ({w.shape[0]},), ({dw.shape[0]},), "
                         f"({db.shape[0]},), ({rstd.shape[0]},)")
    if R == 0 or C == 0:
        return
    cdef float[::1] work = np.empty(((R + LC_NORM_ROWS - 1) // LC_NORM_ROWS) * 2 * C, np.float32)
    with nogil:
        lc_layernorm_rows_bwd(&dx[0, 0], &dw[0], &db[0], &dy[0, 0], &xhat[0, 0], &w[0], &rstd[0], R, C, &work[0],
                              isa, nthreads)
