"""Thin wrappers over csrc/optim/optim.h (validated by lutcore.train.optim).  One tensor: typed
memoryviews; many: lists of C-contiguous float32 arrays of any shape, read flat (`data_of`)."""
from libc.math cimport sqrt
from libc.stdlib cimport malloc, free
from lutcore._native._common cimport *
bind_team()
cnp.import_array()

def body_names(int isa):
    """The bodies ``isa`` runs: {"AdamW": name}."""
    return {"AdamW": lc_optim_body_name(isa).decode()}


def adamw(float[::1] p, const float[::1] g, float[::1] m, float[::1] v, double b1, double b2, double eps,
          double lr, double wd, double max_delta, double bc1, double bc2, double gscale, int isa, int nthreads):
    """One tensor.  Hyperparameters arrive in double; 1 - beta, lr/bc1, 1/sqrt(bc2)
    and 1 - lr*wd are formed in double before rounding to float32 (``_hp``)."""
    cdef lc_adamw_hp h = _hp(b1, b2, eps, lr, wd, max_delta, bc1, bc2, gscale)
    cdef int64_t n = p.shape[0]
    if n == 0:
        return
    with nogil:
        lc_adamw(&p[0], &g[0], &m[0], &v[0], n, &h, isa, nthreads)


cdef lc_adamw_hp _hp(double b1, double b2, double eps, double lr, double wd, double max_delta, double bc1,
                     double bc2, double gscale):
    cdef lc_adamw_hp h
    h.b1 = <float>b1
    h.b2 = <float>b2
    h.c1 = <float>(1.0 - b1)
    h.c2 = <float>(1.0 - b2)
    h.eps = <float>eps
    h.step_size = <float>(lr / bc1)
    h.inv_sqrt_bc2 = <float>(1.0 / sqrt(bc2))
    h.decay = <float>(1.0 - lr * wd)
    h.max_delta = <float>max_delta
    h.gscale = <float>gscale
    return h


cdef int _pointers(list ps, list gs, list ms, list vs, float ***Pp, int64_t **Np) except -1:
    """*Pp <- malloc'd P[0 .. 4 nt): the data of ps, gs, ms, vs in turn; *Np <- malloc'd N[i]:
    the size of ps[i].  The caller frees both (also when this raises MemoryError)."""
    cdef Py_ssize_t nt = len(ps), i
    Pp[0] = <float **>malloc(4 * (nt + 1) * sizeof(float *))
    Np[0] = <int64_t *>malloc((nt + 1) * sizeof(int64_t))
    if Pp[0] == NULL or Np[0] == NULL:
        raise MemoryError()
    cdef float **P = Pp[0]
    cdef int64_t *N = Np[0]
    for i in range(nt):
        P[i] = <float *>data_of(ps[i], cnp.NPY_FLOAT32, True, "ps[i]")
        P[nt + i] = <float *>data_of(gs[i], cnp.NPY_FLOAT32, True, "gs[i]")
        P[2 * nt + i] = <float *>data_of(ms[i], cnp.NPY_FLOAT32, True, "ms[i]")
        P[3 * nt + i] = <float *>data_of(vs[i], cnp.NPY_FLOAT32, True, "vs[i]")
        N[i] = cnp.PyArray_SIZE(<cnp.ndarray>ps[i])
        if cnp.PyArray_SIZE(<cnp.ndarray>gs[i]) != N[i] or cnp.PyArray_SIZE(<cnp.ndarray>ms[i]) != N[i] or \
                cnp.PyArray_SIZE(<cnp.ndarray>vs[i]) != N[i]:
            raise ValueError(f"gs, ms, vs [{i}]: expected {N[i]} values like ps[{i}]")
    return 0


def adamw_multi(list ps, list gs, list ms, list vs, double b1, double b2, double eps, double lr, double wd,
                double max_delta, double bc1, double bc2, double gscale, int isa, int nthreads):
    """One native call for many tensors (C-contiguous float32, matching sizes: checked by the caller)."""
    cdef Py_ssize_t nt = len(ps)
    cdef lc_adamw_hp h = _hp(b1, b2, eps, lr, wd, max_delta, bc1, bc2, gscale)
    cdef float **P = NULL
    cdef int64_t *N = NULL
    try:
        _pointers(ps, gs, ms, vs, &P, &N)
        with nogil:
            lc_adamw_multi(P, P + nt, P + 2 * nt, P + 3 * nt, N, nt, &h, isa, nthreads)
    finally:
        free(P)
        free(N)


def adamw_step_multi(list ps, list gs, list ms, list vs, double b1, double b2, double eps, double lr, double wd,
                     double max_delta, double bc1, double bc2, double grad_scale, double max_grad_norm,
                     double safe_norm, int isa, int nthreads):
    """AdamW.step's norm pass, decision and update in one call (csrc/optim/optim.h
    lc_adamw_step_multi; tensors in sorted-name order, checked by the caller; max_grad_norm
    0: no clipping).  Returns (updated, norm, clip, gscale): updated False when the scaled
    norm is not finite or >= safe_norm (nothing written; the caller decides)."""
    cdef Py_ssize_t nt = len(ps)
    cdef lc_adamw_hp h = _hp(b1, b2, eps, lr, wd, max_delta, bc1, bc2, 1.0)
    cdef lc_adamw_step_io io
    cdef int rc = 0
    io.grad_scale, io.max_grad_norm, io.safe_norm, io.norm, io.clip = grad_scale, max_grad_norm, safe_norm, 0.0, 1.0
    cdef float **P = NULL
    cdef int64_t *N = NULL
    try:
        _pointers(ps, gs, ms, vs, &P, &N)
        with nogil:
            rc = lc_adamw_step_multi(&io, P, P + nt, P + 2 * nt, P + 3 * nt, N, nt, &h, isa, nthreads)
        if rc < 0:
            raise MemoryError()
        return rc == 0, io.norm, io.clip, h.gscale
    finally:
        free(P)
        free(N)


def sumsq_multi(list xs, int isa, int nthreads):
    """[float64 sum of squares of each C-contiguous float32 array] (csrc/optim/optim.h's order)."""
    cdef Py_ssize_t nt = len(xs), i
    cdef const float **X = <const float **>malloc((nt + 1) * sizeof(float *))
    cdef int64_t *N = <int64_t *>malloc((nt + 1) * sizeof(int64_t))
    cdef double *out = <double *>malloc((nt + 1) * sizeof(double))
    cdef int fail = 0
    if X == NULL or N == NULL or out == NULL:
        free(X)
        free(N)
        free(out)
        raise MemoryError()
    try:
        for i in range(nt):
            X[i] = <const float *>data_of(xs[i], cnp.NPY_FLOAT32, True, "xs[i]")
            N[i] = cnp.PyArray_SIZE(<cnp.ndarray>xs[i])
        with nogil:
            fail = lc_sumsq_multi(out, X, N, nt, isa, nthreads)
        if fail:
            raise MemoryError()
        return [out[i] for i in range(nt)]
    finally:
        free(X)
        free(N)
        free(out)
