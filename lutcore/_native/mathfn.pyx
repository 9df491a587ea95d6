"""Thin wrappers over csrc/mathfn/ (exp, softplus, silu, sigmoid, exp2; GELU; SiLU's backward):
arguments validated by lutcore.ops.mathfn.  Element-wise over C-contiguous arrays of any
shape (one size, one dtype: read flat), so the buffers go through `data_of` rather than a
memoryview of one number of dimensions (_common.pxd)."""
from lutcore._native._common cimport *
cnp.import_array()


cdef int64_t _size(cnp.ndarray out, cnp.ndarray x) except -1:
    if cnp.PyArray_SIZE(out) != cnp.PyArray_SIZE(x):
        raise ValueError(f"out: expected {x.size} values like the input, got {out.size}")
    return cnp.PyArray_SIZE(x)


def body_names(int isa):
    """The bodies ``isa`` runs: {"math functions (exp, silu, gelu, ...)"} -> name."""
    return {"math functions (exp, silu, gelu, ...)": lc_mathfn_body_name(isa).decode()}


def mathfn(cnp.ndarray out not None, cnp.ndarray x not None, int fn, int isa, int nthreads):
    """out = fn(x), float32 (lutcore's bodies) or float64 (libm)."""
    cdef int t = cnp.NPY_FLOAT64 if cnp.PyArray_TYPE(x) == cnp.NPY_FLOAT64 else cnp.NPY_FLOAT32
    cdef void *po = data_of(out, t, True, "out")
    cdef const void *px = data_of(x, t, True, "x")
    cdef int64_t n = _size(out, x)
    if n == 0:
        return
    with nogil:
        if t == cnp.NPY_FLOAT32:
            lc_mathfn_f32(<float *>po, <const float *>px, n, fn, isa, nthreads)
        else:
            lc_mathfn_f64(<double *>po, <const double *>px, n, fn, nthreads)


def gelu(cnp.ndarray y not None, cnp.ndarray t not None, cnp.ndarray u not None, int isa, int nthreads):
    """y, t = GELU(u) and its tanh; float32, one size (checked by the caller)."""
    cdef float *py = <float *>data_of(y, cnp.NPY_FLOAT32, True, "y")
    cdef float *pt = <float *>data_of(t, cnp.NPY_FLOAT32, True, "t")
    cdef const float *pu = <const float *>data_of(u, cnp.NPY_FLOAT32, True, "u")
    cdef int64_t n = _size(y, u)
    _size(t, u)
    with nogil:
        lc_gelu_f32(py, pt, pu, n, isa, nthreads)


def silu_bwd(cnp.ndarray dx not None, cnp.ndarray dy not None, cnp.ndarray dy2, cnp.ndarray x not None, int isa,
             int nthreads):
    """dx = (dy + dy2) * silu'(x), float32, one size (the caller checks); dy2 may be None."""
    cdef float *pdx = <float *>data_of(dx, cnp.NPY_FLOAT32, True, "dx")
    cdef const float *pdy = <const float *>data_of(dy, cnp.NPY_FLOAT32, True, "dy")
    cdef const float *pdy2 = <const float *>data_or_null(dy2, cnp.NPY_FLOAT32, True, "dy2")
    cdef const float *px = <const float *>data_of(x, cnp.NPY_FLOAT32, True, "x")
    cdef int64_t n = _size(dx, x)
    _size(dy, x)
    if dy2 is not None:
        _size(dy2, x)
    with nogil:
        lc_silu_bwd_f32(pdx, pdy, pdy2, px, n, isa, nthreads)


def gelu_bwd(cnp.ndarray dx not None, cnp.ndarray dy not None, cnp.ndarray u not None, cnp.ndarray t not None,
             int isa, int nthreads):
    """dx = GELU's backward given dy, u and the forward's t; float32, one size."""
    cdef float *pdx = <float *>data_of(dx, cnp.NPY_FLOAT32, True, "dx")
    cdef const float *pdy = <const float *>data_of(dy, cnp.NPY_FLOAT32, True, "dy")
    cdef const float *pu = <const float *>data_of(u, cnp.NPY_FLOAT32, True, "u")
    cdef const float *pt = <const float *>data_of(t, cnp.NPY_FLOAT32, True, "t")
    cdef int64_t n = _size(dx, u)
    _size(dy, u)
    _size(t, u)
    with nogil:
        lc_gelu_bwd_f32(pdx, pdy, pu, pt, n, isa, nthreads)
