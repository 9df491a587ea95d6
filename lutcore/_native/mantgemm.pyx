"""Thin wrapper over csrc/mantgemm/mantgemm.h (the mantissa-product GEMM: float32 operands rounded to
bf16 / fp16, multiplied through a table of significand products, summed in float32 in k order).

Design: lutcore.ops.mantgemm checks the operands and the table (finite, >= 0), picks the route and
allocates; here the buffers' shapes are checked against each other once more (the native layer
never reads out of bounds: a mantissa index is below 2^m by construction), the GIL is released
and C called.

    Y   (M, N) float32 OUT;  A (M, K), B (K, N) float32 IN;  T (2^m, 2^m) float32 IN
    fmt BF16 (m = 7) or FP16 (m = 10); route MUL (the exact table: T is not read) or TABLE
    work  uint8, work_size(...) bytes, 64-byte aligned (scratch: the operands' forms, each
          thread's y)
"""
from lutcore._native._common cimport *
bind_team()

BF16 = LC_MT_BF16
FP16 = LC_MT_FP16
ROUTE_MUL = LC_MT_ROUTE_MUL
ROUTE_TABLE = LC_MT_ROUTE_TABLE


cdef int _mbits(int fmt) except -1:
    if fmt == LC_MT_BF16:
        return 7
    if fmt == LC_MT_FP16:
        return 10
    raise ValueError(f"fmt: expected {LC_MT_BF16} (bf16) or {LC_MT_FP16} (fp16), got {fmt}")


cdef int _sizes(lc_mt_job *j, int64_t M, int64_t N, int64_t K, int fmt, int route) except -1:
    _mbits(fmt)
    if route != LC_MT_ROUTE_MUL and route != LC_MT_ROUTE_TABLE:
        raise ValueError(f"route: expected {LC_MT_ROUTE_MUL} or {LC_MT_ROUTE_TABLE}, got {route}")
    if M < 0 or N < 0 or K < 0:
        raise ValueError(f"sizes: M {M}, N {N}, K {K} must be >= 0")
    j.M, j.N, j.K, j.fmt, j.route = M, N, K, fmt, route
    return 0


def work_size(int64_t M, int64_t N, int64_t K, int fmt, int route, int isa, int nthreads):
    """Bytes of scratch a call of these sizes needs (64-byte aligned)."""
    cdef lc_mt_job j
    _sizes(&j, M, N, K, fmt, route)
    return lc_mt_work_size(&j, isa, nthreads)


def gemm(float[:, ::1] Y, const float[:, ::1] A, const float[:, ::1] B, const float[:, ::1] T, int fmt, int route,
         uint8_t[::1] work, int isa, int nthreads):
    """Y = A @ B through the table T (csrc/mantgemm/mantgemm.h)."""
    cdef lc_mt_job j
    cdef int64_t M = A.shape[0], K = A.shape[1], N = B.shape[1]
    cdef int m = _mbits(fmt)
    if B.shape[0] != K or Y.shape[0] != M or Y.shape[1] != N or T.shape[0] != (1 << m) or T.shape[1] != (1 << m):
        raise ValueError(f"mantgemm: shapes disagree: A {A.shape[0], A.shape[1]}, B {B.shape[0], B.shape[1]}, "
                         f"Y {Y.shape[0], Y.shape[1]}, T {T.shape[0], T.shape[1]} (expected ({1 << m}, {1 << m}))")
    _sizes(&j, M, N, K, fmt, route)
    cdef size_t need = lc_mt_work_size(&j, isa, nthreads)
    if need and (work is None or <size_t>work.shape[0] < need or (<size_t>&work[0]) % 64):
        raise ValueError(f"work: expected {need} bytes at a 64-byte boundary")
    j.Y = &Y[0, 0] if M and N else NULL
    j.A = &A[0, 0] if M and K else NULL
    j.B = &B[0, 0] if K and N else NULL
    j.T = &T[0, 0]
    cdef char *ws = <char *>&work[0] if need else NULL
    with nogil:
        lc_mt_run(&j, ws, isa, nthreads)


def round_values(float[::1] y, const float[::1] x, int fmt, int isa):
    """y = x rounded to fmt, subnormals flushed to zero of their sign (the GEMM's operand values), on
    isa's body."""
    _mbits(fmt)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"y: expected {x.shape[0]} values like x, got {y.shape[0]}")
    if x.shape[0]:
        with nogil:
            lc_mt_round(&y[0], &x[0], x.shape[0], fmt, isa)


def body_names(int isa):
    """{family: the body the mantissa-product GEMM runs at isa} (lutcore.show_config)."""
    return {"mant_gemm": lc_mt_body_name(isa).decode()}
