"""Thin wrappers over csrc/scan/ (the selective scan, forward and backward).

Arguments are validated by lutcore.ops.scan (dtype, shape, contiguity); here they are typed
memoryviews of one dtype (`real`: float32 or float64) and the shapes of scan_impl.h's table:
u, delta, z, y, ypre, dout and their gradients (B, L, D); A, dA (D, N); Bm, Cm, dB, dC
(B, L, N); Dv, dbias and theirs (D,); h0, hlast, dh0 (B, D, N); hs (B, ceil(L / T), D, N);
the partials dAp (B, D, N), dBp, dCp (B, groups, N, L), dDp, ddbp (B, D).  Optional inputs
and outputs may be None (NULL for C).
"""
from lutcore._native._common cimport *
bind_team()

GROUP_CHANNELS = 16 * LC_SCAN_GROUP_UNITS


cdef inline void _options(const real[::1] Dv, const real[:, :, ::1] z, const real[::1] dbias,
                          const real **p) noexcept nogil:
    """p[0..2] <- the optional inputs D, z, delta_bias, NULL for None (forward and backward)."""
    p[0] = &Dv[0] if Dv is not None else NULL
    p[1] = &z[0, 0, 0] if z is not None else NULL
    p[2] = &dbias[0] if dbias is not None else NULL


def body_names(int isa):
    """The bodies ``isa`` runs: {"selective scan"} -> name (its float32 body; float64 is always generic)."""
    return {"selective scan": lc_scan_body_name(isa).decode()}


def scan_fwd(real[:, :, ::1] y not None, real[:, :, ::1] ypre, real[:, :, :, ::1] hs, real[:, :, ::1] hlast,
             const real[:, :, ::1] u not None, const real[:, :, ::1] delta not None, const real[:, ::1] A not None,
             const real[:, :, ::1] Bm not None, const real[:, :, ::1] Cm not None, const real[::1] Dv,
             const real[:, :, ::1] z, const real[::1] dbias, const real[:, :, ::1] h0,
             int64_t T, bint softplus, bint zoh, int isa, int nthreads):
    cdef int64_t Bsz = u.shape[0], L = u.shape[1], D = u.shape[2], N = A.shape[1]
    cdef int fail = 0
    cdef real *pyp = &ypre[0, 0, 0] if ypre is not None else NULL
    cdef real *phs = &hs[0, 0, 0, 0] if hs is not None else NULL
    cdef real *phl = &hlast[0, 0, 0] if hlast is not None else NULL
    cdef const real *ph0 = &h0[0, 0, 0] if h0 is not None else NULL
    cdef const real *o[3]
    _options(Dv, z, dbias, o)
    if Bsz == 0 or L == 0 or D == 0:
        return
    with nogil:
        if real is float:
            fail = lc_scan_fwd_f32(&y[0, 0, 0], pyp, phs, phl, &u[0, 0, 0], &delta[0, 0, 0], &A[0, 0], &Bm[0, 0, 0],
                                   &Cm[0, 0, 0], o[0], o[1], o[2], ph0, Bsz, L, D, N, T, softplus, zoh, isa, nthreads)
        else:
            fail = lc_scan_fwd_f64(&y[0, 0, 0], pyp, phs, phl, &u[0, 0, 0], &delta[0, 0, 0], &A[0, 0], &Bm[0, 0, 0],
                                   &Cm[0, 0, 0], o[0], o[1], o[2], ph0, Bsz, L, D, N, T, softplus, zoh, isa, nthreads)
    if fail:
        raise MemoryError("selective_scan: out of memory for the per-thread scan buffers")


def scan_bwd(real[:, :, ::1] du not None, real[:, :, ::1] ddelta not None, real[:, ::1] dA not None,
             real[:, :, ::1] dB not None, real[:, :, ::1] dC not None, real[::1] dD, real[:, :, ::1] dz,
             real[::1] ddb, real[:, :, ::1] dh0, real[:, :, ::1] dAp not None, real[:, :, :, ::1] dBp not None,
             real[:, :, :, ::1] dCp not None, real[:, ::1] dDp, real[:, ::1] ddbp,
             const real[:, :, ::1] dout not None, const real[:, :, ::1] u not None,
             const real[:, :, ::1] delta not None, const real[:, ::1] A not None, const real[:, :, ::1] Bm not None,
             const real[:, :, ::1] Cm not None, const real[::1] Dv, const real[:, :, ::1] z,
             const real[::1] dbias, const real[:, :, :, ::1] hs not None, const real[:, :, ::1] ypre,
             int64_t T, bint softplus, bint zoh, int isa, int nthreads):
    cdef int64_t Bsz = u.shape[0], L = u.shape[1], D = u.shape[2], N = A.shape[1]
    cdef int fail = 0
    cdef real *pdD = &dD[0] if dD is not None else NULL
    cdef real *pdz = &dz[0, 0, 0] if dz is not None else NULL
    cdef real *pddb = &ddb[0] if ddb is not None else NULL
    cdef real *pdh0 = &dh0[0, 0, 0] if dh0 is not None else NULL
    cdef real *pdDp = &dDp[0, 0] if dDp is not None else NULL
    cdef real *pddbp = &ddbp[0, 0] if ddbp is not None else NULL
    cdef const real *pyp = &ypre[0, 0, 0] if ypre is not None else NULL
    cdef const real *o[3]
    _options(Dv, z, dbias, o)
    if Bsz == 0 or L == 0 or D == 0:
        return
    with nogil:
        if real is float:
            fail = lc_scan_bwd_f32(&du[0, 0, 0], &ddelta[0, 0, 0], &dA[0, 0], &dB[0, 0, 0], &dC[0, 0, 0], pdD, pdz,
                                   pddb, pdh0, &dAp[0, 0, 0], &dBp[0, 0, 0, 0], &dCp[0, 0, 0, 0], pdDp, pddbp,
                                   &dout[0, 0, 0], &u[0, 0, 0], &delta[0, 0, 0], &A[0, 0], &Bm[0, 0, 0],
                                   &Cm[0, 0, 0], o[0], o[1], o[2], &hs[0, 0, 0, 0], pyp, Bsz, L, D, N, T, softplus, zoh,
                                   isa, nthreads)
        else:
            fail = lc_scan_bwd_f64(&du[0, 0, 0], &ddelta[0, 0, 0], &dA[0, 0], &dB[0, 0, 0], &dC[0, 0, 0], pdD, pdz,
                                   pddb, pdh0, &dAp[0, 0, 0], &dBp[0, 0, 0, 0], &dCp[0, 0, 0, 0], pdDp, pddbp,
                                   &dout[0, 0, 0], &u[0, 0, 0], &delta[0, 0, 0], &A[0, 0], &Bm[0, 0, 0],
                                   &Cm[0, 0, 0], o[0], o[1], o[2], &hs[0, 0, 0, 0], pyp, Bsz, L, D, N, T, softplus, zoh,
                                   isa, nthreads)
    if fail:
        raise MemoryError("selective_scan_backward: out of memory for the per-thread scan buffers")
