"""OCP Microscaling (MX v1.0) block quantization: blocks of ``block`` elements sharing one E8M0 scale.

Contract (docs/DESIGN.md, "Floating-point element formats and MX blocks"): along ``axis``, in
blocks of ``block`` consecutive values (the last one zero-padded to a whole block), the spec's
conversion (section 6.3) in float32:

    shared = floor(log2(max_i |x_i|)) - emax_elem, clamped to [-127, 127]   (E8M0's range)
    scale  = shared + 127                                                   (E8M0 code)
    P_i    = element.encode(x_i / 2^shared, rounding, saturate=True)        (clamped to +-max)

* an all-zero block: floor(log2(0)) = -inf, clamped: scale code 0 (2^-127), every P_i +-0;
* a block holding a NaN or an infinity: X is not a number -- scale code 0xff (NaN) and every
  P_i 0; it dequantizes to NaN throughout (the spec: a NaN scale makes the whole block NaN);
* the scale never overflows E8M0 from float32 input (floor(log2) <= 127, emax >= 0); a block
  whose maximum is below 2^(emax - 126) (subnormal float32 included) clamps to 2^-127 and its
  elements are rounded (mostly to 0) at that scale;
* x_i / 2^shared is the float32 quotient (exact except below 2^-126, where every element
  format rounds it to 0 either way), then the element conversion of ``lutcore.units.fp``
  with saturation: RNE, or stochastic with element i of ``x`` (C order, before padding)
  taking the i-th random integer of ``seed`` -- any reshape gives the same bits.

Shapes (x of ndim >= 1, L = x.shape[axis], nb = ceil(L / block), Lp = nb * block):

    x        float32 (or any real dtype, converted)  (..., L, ...)    IN
    codes    uint8   element codes (unpacked)        (..., Lp, ...)   OUT  zero-padded past L
    scales   uint8   E8M0 codes                      (..., nb, ...)   OUT
    dequantize()     float32  P_i's value * 2^(scale - 127)   (..., L, ...)  (exact)

Design: this module owns the block layout; the element format (codes, rounding, random bits)
is ``lutcore.units.fp``'s, which knows nothing of blocks (units never imports this module).
Two bodies, one contract: ``rounding="nearest"`` along the last axis or axis 0 runs natively
(the room ``lutcore.ops.mxquant``, csrc/mxquant/: the same bits, threaded); stochastic rounding,
the other axes of N-D arrays, and a build without the native module run the numpy body,
``mx_quantize_numpy`` (same arguments, same checks, same result; the tests hold the native
quantizer to it).  The room is imported on first use: it never imports this module, and
``lutcore.ops`` (whose MX GEMM does) loads before it.  Where torchao's MX emulation differs,
see DESIGN.md.
"""
from __future__ import annotations

import numpy as np

from lutcore import _check
from lutcore.units import fp as _fp

__all__ = ["MX", "mx_quantize", "mx_quantize_numpy", "scale_values", "MX_ELEMENTS"]

MX_ELEMENTS = _fp.MX_ELEMENTS
E8M0_NAN = 0xFF


def _element(fmt, name: str = "fmt") -> _fp.FloatFormat:
    """An MX element format (a name or FloatFormat), else TypeError/ValueError naming ``name``."""
    return _fp.element_arg(fmt, name, "an MX element format", "the scale format, not an element")


def _shape_arg(shape) -> tuple:
    if (not isinstance(shape, (tuple, list)) or not shape
            or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise ValueError(f"shape: expected the original shape as a non-empty tuple of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def scale_values(scales: np.ndarray) -> np.ndarray:
    """float32 2^(s - 127) of E8M0 scale codes (0xFF: NaN)."""
    scales = np.asarray(scales)
    with np.errstate(over="ignore"):
        v = np.ldexp(np.float32(1), scales.astype(np.int32) - 127).astype(np.float32)
    v[scales == E8M0_NAN] = np.nan
    return v


class MX:
    """An MX-quantized array (see the module's docstring for the shapes).

    ``codes`` uint8 element codes, the quantized axis padded to a multiple of ``block``;
    ``scales`` uint8 E8M0 codes, one per block; ``fmt`` the element ``FloatFormat``;
    ``axis`` non-negative; ``shape`` the original shape.  Both arrays are read-only."""

    __slots__ = ("codes", "scales", "fmt", "block", "axis", "shape")

    def __init__(self, codes, scales, fmt, block: int, axis: int, shape):
        # built by hand too: everything dequantize indexes by is checked here
        fmt = _element(fmt)
        block = _check.int_arg(block, "block", lo=1)
        shape = _shape_arg(shape)
        axis = _check.int_arg(axis, "axis", lo=-len(shape), hi=len(shape) - 1) % len(shape)
        nb = -(-shape[axis] // block)
        want_c = shape[:axis] + (nb * block,) + shape[axis + 1:]
        want_s = shape[:axis] + (nb,) + shape[axis + 1:]
        codes = _check.array(codes, "codes", np.uint8)
        scales = _check.array(scales, "scales", np.uint8)
        if codes.shape != want_c:
            raise ValueError(f"codes: an MX of shape {shape} in blocks of {block} along axis {axis} holds uint8 codes "
                             f"of shape {want_c}, got {codes.shape}")
        if scales.shape != want_s:
            raise ValueError(f"scales: an MX of shape {shape} in blocks of {block} along axis {axis} holds uint8 E8M0 "
                             f"scales of shape {want_s}, got {scales.shape}")
        if codes.size and int(codes.max()) >= 1 << fmt.bits:
            raise ValueError(f"codes: expected {fmt.name} codes in [0, {(1 << fmt.bits) - 1}], got {int(codes.max())}")
        self._set(codes, scales, fmt, block, axis, shape)

    def _set(self, codes, scales, fmt, block, axis, shape):
        self.codes, self.scales, self.fmt, self.block, self.axis, self.shape = codes, scales, fmt, block, axis, shape
        codes.setflags(write=False)
        scales.setflags(write=False)

    @classmethod
    def _made(cls, codes, scales, fmt, block, axis, shape) -> "MX":
        """An MX from ``mx_quantize``'s own buffers (already of the right shapes and values)."""
        obj = cls.__new__(cls)
        obj._set(codes, scales, fmt, block, axis, tuple(shape))
        return obj

    @property
    def nblocks(self) -> int:
        return self.scales.shape[self.axis]

    def dequantize(self) -> np.ndarray:
        """float32 of the original shape: each code's value times its block's 2^(scale - 127);
        NaN throughout a block whose scale is 0xff."""
        L, nb, B = self.shape[self.axis], self.nblocks, self.block
        v = np.moveaxis(self.fmt.decode(self.codes), self.axis, -1)          # (..., Lp) float32
        sf = scale_values(np.moveaxis(self.scales, self.axis, -1))          # (..., nb) 2^(s-127)
        y = (v.reshape(v.shape[:-1] + (nb, B)) * sf[..., None]).reshape(v.shape)  # (..., Lp) exact products
        return np.ascontiguousarray(np.moveaxis(y[..., :L], -1, self.axis))

    def __repr__(self):
        return f"MX(shape={self.shape}, fmt={self.fmt.name}, block={self.block}, axis={self.axis})"


def _arguments(x, fmt, block, axis, rounding, seed):
    """mx_quantize's checks: (float32 C-contiguous x, element format, block, axis >= 0, rounding,
    the elements' random bits (stochastic) or the checked seed)."""
    f = _element(fmt)
    block = _check.int_arg(block, "block", lo=1)
    rounding = _fp.rounding_arg(rounding)
    x = _fp.as_float32(x, "x")
    if x.ndim == 0:
        raise ValueError("x: expected an array of at least 1 dimension (blocks run along an axis), got a 0-d array")
    axis = _check.int_arg(axis, "axis", lo=-x.ndim, hi=x.ndim - 1) % x.ndim
    r = _fp.random_bits(seed, x.size).reshape(x.shape) if rounding == "stochastic" else _fp.seed_checked(seed)
    return x, f, block, axis, rounding, r


_UNSET = object()
_room = _UNSET


def _native():
    """The room lutcore.ops.mxquant, or None in a build without its native module."""
    global _room
    if _room is _UNSET:
        try:
            from lutcore.ops import mxquant
            _room = mxquant
        except ImportError:
            _room = None
    return _room


def mx_quantize(x, fmt, block: int = 32, axis: int = -1, rounding: str = "nearest", seed=None) -> MX:
    """Quantize ``x`` (ndim >= 1) to MX blocks of ``block`` along ``axis`` in element format
    ``fmt`` (e4m3, e5m2, e3m2, e2m3, e2m1, int8, or an alias such as "fp8_e4m3" / "fp4").

    ``rounding``: "nearest" (ties to even) or "stochastic" (``seed``: an int in [0, 2^64) or
    a np.random.Generator; see ``lutcore.units.fp``).  Input of another real dtype is
    converted to float32 first; non-contiguous input is copied.  The axis is zero-padded to a
    multiple of ``block``.  NaN and infinities are not errors: their block's scale is NaN.
    "nearest" along the last axis or axis 0 runs natively (``lutcore.ops.mxquant``, threads of
    the enclosing ``lutcore._threads.scope``), anything else in numpy: the same bits."""
    x, f, block, axis, rounding, r = _arguments(x, fmt, block, axis, rounding, seed)
    if rounding == "nearest":
        room = _native()
        if room is not None and room.native_axis(x.ndim, axis):
            codes, scales = room.mx_quantize_nearest(x, f, block, axis)
            return MX._made(codes, scales, f, block, axis, x.shape)
    return _quantize_numpy(x, f, block, axis, rounding, r)


def mx_quantize_numpy(x, fmt, block: int = 32, axis: int = -1, rounding: str = "nearest", seed=None) -> MX:
    """``mx_quantize`` in numpy, whatever the rounding and axis: the same arguments, checks and
    bits (the body stochastic rounding and the other axes take, and the reference the native
    quantizer is held to)."""
    return _quantize_numpy(*_arguments(x, fmt, block, axis, rounding, seed))


def _quantize_numpy(x, f, block, axis, rounding, r) -> MX:
    """The numpy body on checked arguments (``_arguments``)."""
    L = x.shape[axis]
    nb = -(-L // block)
    xm = np.moveaxis(x, axis, -1)                                            # (..., L) view
    lead = xm.shape[:-1]
    xb = np.zeros(lead + (nb * block,), np.float32)                          # (..., Lp) zero padded
    xb[..., :L] = xm
    xb = xb.reshape(lead + (nb, block))                                      # (..., nb, block)
    amax = np.max(np.abs(xb), axis=-1)                                       # (..., nb) NaN if any NaN
    bad = ~np.isfinite(amax)                                                 # (..., nb) NaN or inf inside
    e = (amax.view(np.uint32) >> np.uint32(23)).astype(np.int32)             # (..., nb) float32 exponent field
    floor_log2 = np.where(e == 0, -127, e - 127)                             # zero / subnormal: <= -127
    shared = np.clip(floor_log2 - f.emax, -127, 127)                         # (..., nb) int32
    shared = np.where(bad, 0, shared)
    scales = np.where(bad, E8M0_NAN, shared + 127).astype(np.uint8)          # (..., nb)
    v = np.ldexp(xb, -shared[..., None].astype(np.int32)).astype(np.float32, copy=False)  # (..., nb, block)
    v[bad] = 0
    if rounding == "stochastic":
        rb = np.zeros(lead + (nb * block,), np.uint32)                       # (..., Lp) the elements' bits
        rb[..., :L] = np.moveaxis(r, axis, -1)
        rb = rb.reshape(lead + (nb, block))
    else:
        rb = None
    codes = f._encode(np.ascontiguousarray(v), True, rb, "x")               # (..., nb, block) uint8
    codes = np.ascontiguousarray(np.moveaxis(codes.reshape(lead + (nb * block,)), -1, axis))
    scales = np.ascontiguousarray(np.moveaxis(scales, -1, axis))
    return MX._made(codes, scales, f, block, axis, x.shape)
