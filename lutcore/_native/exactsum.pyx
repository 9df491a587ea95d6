"""Thin wrappers over csrc/exactsum/exactsum.h: the exact float32 summation's element passes
(the accumulator and its contract: lutcore.train.exactsum).  Buffers are checked here: the
limbs (nl, n) C-contiguous int64, x (n,) float32, flags (n,) uint8 or None."""
from lutcore._native._common cimport *
bind_team()
import numpy as np

MAX_LIMBS = LC_XSUM_MAXL - 2


def _limbs(object L, int64_t n):
    if not isinstance(L, np.ndarray) or L.dtype != np.int64 or L.ndim != 2 or L.shape[1] != n \
            or not L.flags.c_contiguous:
        raise ValueError(f"limbs: expected a C-contiguous int64 array of shape (nl, {n}), got "
                         f"{getattr(L, 'dtype', type(L).__name__)} {getattr(L, 'shape', '')}")


def _vector(object x, str name, object dtype):
    if not isinstance(x, np.ndarray) or x.dtype != dtype or x.ndim != 1 or not x.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous 1-D {np.dtype(dtype)} array, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}")


def limb_range(object x, int nthreads):
    """(qmin, qmax, nonfinite): the limbs the finite nonzero elements of x add into
    ((-1, -1) if none), and whether any element is inf or NaN."""
    _vector(x, "x", np.float32)
    cdef const float[::1] xv = x
    cdef int64_t n = xv.shape[0]
    cdef int qmin = -1, qmax = -1, bad = 0
    if n:
        with nogil:
            lc_xsum_range(&xv[0], n, &qmin, &qmax, &bad, nthreads)
    return qmin, qmax, bool(bad)


def add(object L, int64_t lo, object x, object flags, int nthreads):
    """L (nl, n) += x's contributions (the window [lo, lo + nl) must cover them); flags (n,)
    uint8 or None (then x must be finite) gets inf / NaN bits."""
    _vector(x, "x", np.float32)
    cdef const float[::1] xv = x
    cdef int64_t n = xv.shape[0]
    _limbs(L, n)
    cdef int64_t[:, ::1] Lv = L
    cdef uint8_t[::1] fv
    cdef uint8_t *fp = NULL
    if flags is not None:
        _vector(flags, "flags", np.uint8)
        if flags.shape[0] != n:
            raise ValueError(f"flags: expected shape ({n},), got {flags.shape}")
        fv = flags
        fp = &fv[0] if n else NULL
    cdef int64_t nl = Lv.shape[0]
    if n == 0:
        return
    with nogil:
        lc_xsum_add(&Lv[0, 0] if nl else NULL, nl, lo, &xv[0], fp, n, nthreads)


def normalise(object L, int nthreads):
    """Carry-normalise L (nl, n) in place: limbs 0..nl-2 in [0, 2**32), the top one signed."""
    if not isinstance(L, np.ndarray) or L.ndim != 2:
        raise ValueError(f"limbs: expected a 2-D int64 array, got {type(L).__name__}")
    _limbs(L, L.shape[1])
    cdef int64_t[:, ::1] Lv = L
    if Lv.shape[0] == 0 or Lv.shape[1] == 0:
        return
    with nogil:
        lc_xsum_norm(&Lv[0, 0], Lv.shape[0], Lv.shape[1], nthreads)


def round_f32(object L, int64_t lo, int nthreads):
    """The exact sums L (nl, n) (limb j weighing 2**(32 (lo + j)) units of 2**-149) rounded
    once to float32, nearest, ties to even: a new (n,) array; L is not changed."""
    if not isinstance(L, np.ndarray) or L.ndim != 2:
        raise ValueError(f"limbs: expected a 2-D int64 array, got {type(L).__name__}")
    _limbs(L, L.shape[1])
    cdef int64_t[:, ::1] Lv = L
    cdef int64_t nl = Lv.shape[0], n = Lv.shape[1]
    if nl > MAX_LIMBS:
        raise ValueError(f"limbs: expected at most {MAX_LIMBS} limbs, got {nl}")
    out = np.zeros(n, np.float32)
    cdef float[::1] ov = out
    if nl and n:
        with nogil:
            lc_xsum_round(&ov[0], &Lv[0, 0], nl, lo, n, nthreads)
    return out
