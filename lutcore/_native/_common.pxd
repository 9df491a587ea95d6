# lutcore/_native/_common.pxd — what every lutcore/_native/<family>.pyx shares.
#
# `from lutcore._native._common cimport *` brings the fixed-width C integer types, numpy's C
# API as `cnp` (a module that calls into it runs `cnp.import_array()` once, at its top), the
# `real` fused type (the kernels with a float32 and a float64 body), `data_of` and
# `data_or_null`.  The
# compiler directives (language_level 3, no bounds or wraparound checks) are setup.py's,
# for every module.
#
# Design: a .pyx takes its buffers as typed memoryviews of the kernel's shape — C-contiguous
# `T[:, ::1]`, or `T[:, :]` where the kernel takes a row stride — so Cython checks dtype,
# number of dimensions and contiguity before any C runs.  A required buffer is declared
# `not None`; an optional one is a memoryview that may be None, passed to C as NULL
# (`&a[0] if a is not None else NULL`).  Two kinds of buffer are not memoryviews, because a
# memoryview has one number of dimensions: the buffers a kernel reads flat whatever their
# shape (the element-wise math functions' arrays of any shape, the decode layer's
# kernel-ready weights, the sgemm's operands given by element strides) and the elements of
# a list of tensors (a memoryview each would be new work per tensor on every optimizer
# step).  `data_of` gives their pointer after the memoryview's checks, made in C
# (`data_or_null`: an optional one).
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport int8_t, uint8_t, int16_t, uint16_t, int32_t, int64_t
cimport numpy as cnp

ctypedef fused real:
    float
    double


cdef inline void *data_of(object a, int typenum, bint contiguous, str name) except? NULL:
    """The data of ndarray `a` once it has the dtype `typenum` (cnp.NPY_FLOAT32, ...) and, with
    `contiguous`, is C-contiguous; else ValueError naming it."""
    if not cnp.PyArray_Check(a) or cnp.PyArray_TYPE(<cnp.ndarray>a) != typenum or \
            (contiguous and not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)):
        raise ValueError(f"{name}: expected a{' C-contiguous' if contiguous else 'n'} "
                         f"{cnp.PyArray_DescrFromType(typenum)} ndarray, got {type(a).__name__} "
                         f"{getattr(a, 'dtype', '')} {getattr(a, 'shape', '')}")
    return cnp.PyArray_DATA(<cnp.ndarray>a)


cdef inline void *data_or_null(object a, int typenum, bint contiguous, str name) except? NULL:
    """data_of for an optional buffer: NULL for None."""
    return NULL if a is None else data_of(a, typenum, contiguous, name)


cdef extern from "core/team.h" nogil:
    void lc_team_bind(void *p)
    int lc_team_is_bound()


cdef inline int bind_team() except -1:
    """Bind this module's parallel loops (core/team.h) to lutcore's one thread team (in _cpu);
    every module with a parallel kernel calls it once, at its top."""
    from lutcore._native import _cpu
    cap = _cpu.team_capsule()
    if cap is not None:
        lc_team_bind(PyCapsule_GetPointer(cap, b"lutcore._native._cpu.team"))
    return 0
