"""Thin wrappers over csrc/conv/ (causal depthwise conv1d: forward, backward, decode step);
arguments validated by lutcore.ops.scan.  float32 or float64 (`real`), every buffer of one
dtype; x, y, dx, dy (B, L, D), wt (K, D), bias, db (D,) or None, state (B, K-1, D)."""
from lutcore._native._common cimport *
bind_team()


def body_names(int isa):
    """The bodies ``isa`` runs: {"conv1d"} -> name."""
    return {"conv1d": lc_conv_body_name(isa).decode()}


def conv_fwd(real[:, :, ::1] y not None, const real[:, :, ::1] x not None, const real[:, ::1] wt not None,
             const real[::1] bias, int isa, int nthreads):
    cdef int64_t Bsz = x.shape[0], L = x.shape[1], D = x.shape[2], K = wt.shape[0]
    cdef const real *pb = &bias[0] if bias is not None else NULL
    if Bsz == 0 or L == 0 or D == 0:
        return
    with nogil:
        if real is float:
            lc_conv_fwd_f32(&y[0, 0, 0], &x[0, 0, 0], &wt[0, 0], pb, Bsz, L, D, K, isa, nthreads)
        else:
            lc_conv_fwd_f64(&y[0, 0, 0], &x[0, 0, 0], &wt[0, 0], pb, Bsz, L, D, K, isa, nthreads)


def conv_bwd(real[:, :, ::1] dx, real[:, ::1] dwt not None, real[::1] db, const real[:, :, ::1] dy not None,
             const real[:, :, ::1] x not None, const real[:, ::1] wt not None, int isa, int nthreads):
    """dx and db may be None (not computed)."""
    cdef int64_t Bsz = x.shape[0], L = x.shape[1], D = x.shape[2], K = wt.shape[0]
    cdef real *pdx = &dx[0, 0, 0] if dx is not None else NULL
    cdef real *pdb = &db[0] if db is not None else NULL
    if D == 0:
        return
    with nogil:
        if real is float:
            lc_conv_bwd_f32(pdx, &dwt[0, 0], pdb, &dy[0, 0, 0], &x[0, 0, 0], &wt[0, 0], Bsz, L, D, K, isa, nthreads)
        else:
            lc_conv_bwd_f64(pdx, &dwt[0, 0], pdb, &dy[0, 0, 0], &x[0, 0, 0], &wt[0, 0], Bsz, L, D, K, isa, nthreads)


def conv_step(real[:, ::1] y not None, real[:, :, ::1] state not None, const real[:, ::1] xt not None,
              const real[:, ::1] wt not None, const real[::1] bias):
    cdef int64_t Bsz = xt.shape[0], D = xt.shape[1], K = wt.shape[0]
    cdef const real *pb = &bias[0] if bias is not None else NULL
    if Bsz == 0 or D == 0:
        return
    with nogil:
        if real is float:
            lc_conv_step_f32(&y[0, 0], &state[0, 0, 0], &xt[0, 0], &wt[0, 0], pb, Bsz, D, K)
        else:
            lc_conv_step_f64(&y[0, 0], &state[0, 0, 0], &xt[0, 0], &wt[0, 0], pb, Bsz, D, K)
