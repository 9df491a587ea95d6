"""Thin wrapper over csrc/mxgemm/mxgemm.h (the MX GEMM: block-scaled codes through any product table).

Design: lutcore.ops.mxgemm checks the operands (MX objects, formats, blocks, the table's
analysis: ``MXProducts``) and allocates; here the buffers' shapes are checked against each other
once more (the native layer never reads out of bounds: codes are below 2^bits by the MX
contract, checked when an MX is made), the GIL is released and C called.

    Y   (M, N) float32 OUT;  A (M, Kp), SA (M, nblk), B (Kp, N), SB (nblk, N) uint8 IN
    K <= Kp = nblk * bk;  prep: the products' forms (MXProducts._plan: tab, tt, va, vb,
    scale, ba, bb, expand, route, nparts, rep, afac, rep_mask, split)
    work  uint8, work_size(...) bytes, 64-byte aligned (scratch)
"""
from lutcore._native._common cimport *
bind_team()

ROUTE_FMA = LC_MX_ROUTE_FMA
ROUTE_TABLE = LC_MX_ROUTE_TABLE
F32 = LC_MX_F32
HI32 = LC_MX_HI32


cdef int _fill(lc_mx_products *P, object prep, int64_t bk) except -1:
    """P <- prep's forms, after checking their sizes against each other."""
    cdef const uint32_t[:, ::1] tab = prep.tab
    cdef const uint32_t[:, ::1] tt = prep.tt
    cdef const uint8_t[::1] rep = prep.rep
    cdef const double[::1] afac = prep.afac
    cdef const double[::1] scale = prep.scale
    cdef const double[::1] va
    cdef const double[::1] vb
    cdef int ba = prep.ba, bb = prep.bb
    if not (1 <= ba <= 8 and 1 <= bb <= 8) or tab.shape[0] != (1 << ba) or tab.shape[1] != (1 << bb):
        raise ValueError(f"prep.tab: expected ({1 << ba}, {1 << bb}) words, got ({tab.shape[0]}, {tab.shape[1]})")
    if rep.shape[0] != (1 << ba) or afac.shape[0] != (1 << ba) or scale.shape[0] != 256:
        raise ValueError("prep: rep / afac / scale sizes disagree with the table")
    if tt.shape[0] != (1 << bb) or tt.shape[1] % 16 or tt.shape[1] == 0 or tt.shape[1] > 256:
        raise ValueError(f"prep.tt: expected ({1 << bb}, R16) words, R16 a multiple of 16 up to 256")
    for i in range(1 << ba):
        if rep[i] >= tt.shape[1] or (prep.rep_mask >= 0 and rep[i] != (i & prep.rep_mask)):
            raise ValueError(f"prep.rep: code {i} maps to reduced row {rep[i]}, outside the {tt.shape[1]} rows "
                             f"(or not code & rep_mask)")
    if not -1 <= prep.rep_mask < (1 << ba) or prep.nparts not in (1, 2) or prep.expand not in (F32, HI32):
        raise ValueError("prep: rep_mask, nparts or expand out of range")
    P.tab = &tab[0, 0]
    P.tt = &tt[0, 0]
    P.rep = &rep[0]
    P.afac = &afac[0]
    P.scale = &scale[0]
    P.va = NULL
    P.vb = NULL
    P.route = prep.route
    if P.route == ROUTE_FMA:
        va = prep.va
        vb = prep.vb
        if va.shape[0] != (1 << ba) or vb.shape[0] != (1 << bb) or prep.nparts != 1:
            raise ValueError("prep: the FMA route's decoded values disagree with the table")
        P.va = &va[0]
        P.vb = &vb[0]
    elif P.route != ROUTE_TABLE:
        raise ValueError(f"prep.route: expected {ROUTE_FMA} or {ROUTE_TABLE}, got {P.route}")
    P.ba, P.bb, P.expand, P.nparts = ba, bb, prep.expand, prep.nparts
    P.rep_mask, P.R16, P.split = prep.rep_mask, <int>tt.shape[1], prep.split
    return 0


cdef int _job(lc_mx_job *j, lc_mx_products *P, float[:, ::1] Y, const uint8_t[:, ::1] A, const uint8_t[:, ::1] SA,
              const uint8_t[:, ::1] B, const uint8_t[:, ::1] SB, int64_t K, int64_t bk) except -1:
    cdef int64_t M = A.shape[0], Kp = A.shape[1], N = B.shape[1], nblk = SA.shape[1]
    if bk < 1 or Kp != nblk * bk or K < 0 or K > Kp or B.shape[0] != Kp or SA.shape[0] != M or \
            SB.shape[0] != nblk or SB.shape[1] != N or Y.shape[0] != M or Y.shape[1] != N:
        raise ValueError(f"mxgemm: operand shapes disagree: A {A.shape[0], A.shape[1]}, SA {SA.shape[0], SA.shape[1]}, "
                         f"B {B.shape[0], B.shape[1]}, SB {SB.shape[0], SB.shape[1]}, Y {Y.shape[0], Y.shape[1]}, "
                         f"K {K}, block {bk}")
    j.Y = &Y[0, 0] if M and N else NULL
    j.A = &A[0, 0] if M and Kp else NULL
    j.SA = &SA[0, 0] if M and nblk else NULL
    j.B = &B[0, 0] if Kp and N else NULL
    j.SB = &SB[0, 0] if nblk and N else NULL
    j.M, j.N, j.K, j.Kp, j.bk, j.nblk = M, N, K, Kp, bk, nblk
    j.P = P
    j.mbits, j.tz, j.promote = 23, 0, 0
    return 0


def work_size(int64_t M, int64_t N, int64_t K, int64_t bk, object prep, bint narrow, int isa, int nthreads):
    """Bytes of scratch exact (narrow False) or narrow needs for these sizes (64-byte aligned)."""
    cdef lc_mx_products P
    cdef lc_mx_job j
    _fill(&P, prep, bk)
    j.M, j.N, j.K, j.bk = M, N, K, bk
    j.Kp = ((K + bk - 1) // bk) * bk
    j.nblk = j.Kp // bk
    j.P = &P
    return lc_mx_work_size(&j, narrow, isa, nthreads)


cdef char *_work(uint8_t[::1] work, size_t need) except? NULL:
    if need == 0:
        return NULL
    if work is None or <size_t>work.shape[0] < need or (<size_t>&work[0]) % 64:
        raise ValueError(f"work: expected {need} bytes at a 64-byte boundary")
    return <char *>&work[0]


def exact(float[:, ::1] Y, const uint8_t[:, ::1] A, const uint8_t[:, ::1] SA, const uint8_t[:, ::1] B,
          const uint8_t[:, ::1] SB, int64_t K, int64_t bk, object prep, uint8_t[::1] work, int isa, int nthreads):
    """Y = the exact-mode MX GEMM (csrc/mxgemm/mxgemm.h)."""
    cdef lc_mx_products P
    cdef lc_mx_job j
    _fill(&P, prep, bk)
    _job(&j, &P, Y, A, SA, B, SB, K, bk)
    cdef char *ws = _work(work, lc_mx_work_size(&j, 0, isa, nthreads))
    with nogil:
        lc_mx_run(&j, 0, ws, isa, nthreads)


def narrow(float[:, ::1] Y, const uint8_t[:, ::1] A, const uint8_t[:, ::1] SA, const uint8_t[:, ::1] B,
           const uint8_t[:, ::1] SB, int64_t K, int64_t bk, object prep, int mbits, int64_t promote, bint toward_zero,
           uint8_t[::1] work, int isa, int nthreads):
    """Y = the narrow-accumulator MX GEMM: mbits mantissa bits, promote products a promotion (0:
    only at the end), to nearest even or toward zero (csrc/mxgemm/mxgemm.h)."""
    cdef lc_mx_products P
    cdef lc_mx_job j
    if not 1 <= mbits <= 23 or promote < 0:
        raise ValueError(f"mbits {mbits} (1..23) or promote {promote} (>= 0) out of range")
    _fill(&P, prep, bk)
    _job(&j, &P, Y, A, SA, B, SB, K, bk)
    j.mbits, j.tz, j.promote = mbits, toward_zero, promote
    cdef char *ws = _work(work, lc_mx_work_size(&j, 1, isa, nthreads))
    with nogil:
        lc_mx_run(&j, 1, ws, isa, nthreads)


def body_names(int isa):
    """{family: the body the MX GEMM runs at isa} (lutcore.show_config)."""
    return {"mx_gemm exact": lc_mx_name(isa, 0).decode(), "mx_gemm narrow": lc_mx_name(isa, 1).decode()}
