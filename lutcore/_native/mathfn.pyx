"""Thin wrappers over csrc/mathfn/ (exp, softplus, silu, sigmoid, exp2; GELU; SiLU's backward):
arguments validated by lutcore.ops.mathfn.  Element-wise over C-contiguous arrays of any
shape (one size, one dtype: read flat), so the buffers go through `data_of`'s checks rather
than a memoryview of one number of dimensions (_common.pxd)."""
from lutcore._native._common cimport *
bind_team()
cnp.import_array()


cdef int64_t _flat(tuple arrays, tuple names, int typenum, void **p) except -1:
    """p[j] <- the data of arrays[j] (None: NULL) once it is a C-contiguous `typenum` array;
    every array of one size, returned."""
    cdef int64_t n = -1
    cdef Py_ssize_t j
    for j in range(len(arrays)):
        a = arrays[j]
        p[j] = data_or_null(a, typenum, True, names[j])
        if a is None:
            continue
        if n < 0:
            n = cnp.PyArray_SIZE(<cnp.ndarray>a)
        elif cnp.PyArray_SIZE(<cnp.ndarray>a) != n:
            raise ValueError(f"{names[j]}: expected {n} values like {names[0]}, got {a.size}")
    return n


def body_names(int isa):
    """The bodies ``isa`` runs: {"math functions (exp, silu, gelu, ...)"} -> name."""
    return {"math functions (exp, silu, gelu, ...)": lc_mathfn_body_name(isa).decode()}


def mathfn(cnp.ndarray out not None, cnp.ndarray x not None, int fn, int isa, int nthreads):
    """out = fn(x), float32 (lutcore's bodies) or float64 (libm)."""
    cdef int t = cnp.NPY_FLOAT64 if cnp.PyArray_TYPE(x) == cnp.NPY_FLOAT64 else cnp.NPY_FLOAT32
    cdef void *p[2]
    cdef int64_t n = _flat((out, x), ("out", "x"), t, p)
    if n == 0:
        return
    with nogil:
        if t == cnp.NPY_FLOAT32:
            lc_mathfn_f32(<float *>p[0], <const float *>p[1], n, fn, isa, nthreads)
        else:
            lc_mathfn_f64(<double *>p[0], <const double *>p[1], n, fn, nthreads)


def gelu(cnp.ndarray y not None, cnp.ndarray t not None, cnp.ndarray u not None, int isa, int nthreads):
    """y, t = GELU(u) and its tanh; float32, one size (checked by the caller)."""
    cdef void *p[3]
    cdef int64_t n = _flat((y, t, u), ("y", "t", "u"), cnp.NPY_FLOAT32, p)
    with nogil:
        lc_gelu_f32(<float *>p[0], <float *>p[1], <const float *>p[2], n, isa, nthreads)


def silu_bwd(cnp.ndarray dx not None, cnp.ndarray dy not None, cnp.ndarray dy2, cnp.ndarray x not None, int isa,
             int nthreads):
    """dx = (dy + dy2) * silu'(x), float32, one size (the caller checks); dy2 may be None."""
    cdef void *p[4]
    cdef int64_t n = _flat((dx, dy, dy2, x), ("dx", "dy", "dy2", "x"), cnp.NPY_FLOAT32, p)
    with nogil:
        lc_silu_bwd_f32(<float *>p[0], <const float *>p[1], <const float *>p[2], <const float *>p[3], n, isa,
                        nthreads)


def gelu_bwd(cnp.ndarray dx not None, cnp.ndarray dy not None, cnp.ndarray u not None, cnp.ndarray t not None,
             int isa, int nthreads):
    """dx = GELU's backward given dy, u and the forward's t; float32, one size."""
    cdef void *p[4]
    cdef int64_t n = _flat((dx, dy, u, t), ("dx", "dy", "u", "t"), cnp.NPY_FLOAT32, p)
    with nogil:
        lc_gelu_bwd_f32(<float *>p[0], <const float *>p[1], <const float *>p[2], <const float *>p[3], n, isa,
                        nthreads)
