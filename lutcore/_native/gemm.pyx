"""Thin wrappers over csrc/gemm/gemm.h (and csrc/q8/q8.h).

Design: these functions trust their arguments — lutcore.ops / lutcore.quant
validate dtype, shape and contiguity and allocate outputs; here we only take
pointers, release the GIL and call C.  Every input buffer is C-contiguous; the
outputs of the public products may be row-strided (``ldc`` elements between rows,
checked against the view here, so the kernel never writes outside it).
"""
from lutcore._native._common cimport *
bind_team()

MR = LC_MR
NR = LC_NR


cdef int _check_ld(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t srow, Py_ssize_t scol, int64_t ld,
                   Py_ssize_t item) except -1:
    """The view (rows, cols) with byte strides (srow, scol) is rows of ld elements apart, unit stride."""
    if (cols > 1 and scol != item) or ld < cols or (rows > 1 and srow != ld * item):
        raise ValueError(f"out: expected rows {ld} elements apart with unit stride, got strides "
                         f"({srow}, {scol}) bytes for shape ({rows}, {cols})")
    return 0


def body_names(int isa):
    """The bodies ``isa`` runs: {"lut_gemm exact", "qmatmul exact", "lut_gemm any table"} -> name."""
    return {fam: lc_gemm_body_name(isa, i).decode() for i, fam in
            enumerate(("lut_gemm exact", "qmatmul exact", "lut_gemm any table"))}


TABLE_NB = LC_TABLE_NB
TABLE_DIRECT_M = LC_TABLE_DIRECT_M


def pack_a16(int16_t[:, ::1] Ap, const int8_t[:, ::1] A, int64_t bk, int64_t bkp, int nthreads):
    """Ap (Mp, Kp) <- A (M, K) widened; blocks of bk padded to bkp."""
    cdef int64_t M = A.shape[0], K = A.shape[1]
    if Ap.shape[0] == 0 or Ap.shape[1] == 0:
        return
    with nogil:
        lc_pack_a16(&Ap[0, 0], &A[0, 0] if M > 0 and K > 0 else NULL, M, Ap.shape[0], K, K,
                    bk, bkp, Ap.shape[1], nthreads)


def pack_b(int8_t[::1] Bp, const int8_t[:, ::1] B, int64_t bk, int64_t bkp, int64_t Kp, int nthreads):
    """Bp (Np/16 * Kp/2 * 32,) <- B (K, N)."""
    cdef int64_t K = B.shape[0], N = B.shape[1]
    if Bp.shape[0] == 0:
        return
    with nogil:
        lc_pack_b(&Bp[0], &B[0, 0] if K > 0 and N > 0 else NULL, K, N, N, bk, bkp, Kp, nthreads)


cdef const uint8_t *_bform_ptr(const uint8_t[::1] Bf, int64_t Kp, int64_t N, int isa) except? NULL:
    """The pointer of B's form Bf (exact_bform's bytes), NULL for None; its size checked."""
    cdef size_t need = lc_gemm_exact_bform_size(Kp, N, isa)
    if Bf is None or need == 0:                  # none, or a body that reads no form
        return NULL
    if <size_t>Bf.shape[0] < need:
        raise ValueError(f"Bf: expected {need} bytes, got {Bf.shape[0]}")
    return &Bf[0]


def exact_bform_size(int64_t Kp, int64_t N, int isa):
    """Bytes of a packed B's (Kp, N) form for isa's exact whole calls; 0 when the body has none."""
    return lc_gemm_exact_bform_size(Kp, N, isa)


def exact_bform(uint8_t[::1] Bf, const int8_t[::1] Bp, int64_t Kp, int64_t N, int isa, int nthreads):
    """Bf (exact_bform_size bytes, 64-byte aligned) <- the form of the packed panels Bp that isa's
    exact whole calls read; False (nothing written) when that body has none."""
    cdef size_t need = lc_gemm_exact_bform_size(Kp, N, isa)
    cdef int r
    if need == 0:
        return False
    if <size_t>Bf.shape[0] < need or (<size_t>&Bf[0]) % 64:
        raise ValueError(f"Bf: expected {need} bytes at a 64-byte boundary, got {Bf.shape[0]}")
    if Bp.shape[0] < ((N + LC_NR - 1) // LC_NR) * LC_NR * Kp:
        raise ValueError(f"Bp: expected at least {((N + LC_NR - 1) // LC_NR) * LC_NR * Kp} int8 values, "
                         f"got {Bp.shape[0]}")
    with nogil:
        r = lc_gemm_exact_bform(&Bf[0], &Bp[0], Kp, N, isa, nthreads)
    return r == 0


def gemm_exact_packed(int32_t[:, :] C, const int16_t[:, ::1] Ap, const int8_t[::1] Bp,
                      int64_t Kp, int isa, int nthreads, int64_t ldc=-1, const uint8_t[::1] Bf=None):
    """C (rows ldc apart; -1: C's own width) = the exact product of packed operands (Bf: B's form,
    exact_bform, or None)."""
    cdef int64_t M = C.shape[0], N = C.shape[1]
    cdef const uint8_t *bf
    if M == 0 or N == 0:
        return
    ldc = N if ldc < 0 else ldc
    _check_ld(M, N, C.strides[0], C.strides[1], ldc, sizeof(int32_t))
    bf = _bform_ptr(Bf, Kp, N, isa)
    with nogil:
        lc_gemm_exact_packed(&C[0, 0], ldc, &Ap[0, 0], &Bp[0], bf, M, N, Kp, isa, nthreads)


cdef _check_exact_scratch(int64_t na, int64_t nb, int64_t M, int64_t N, int64_t Kp):
    """The exact dispatcher's scratch: Ap holds round_up(M, MR) * Kp int16, Bp round_up(N, NR) * Kp int8."""
    if na < ((M + LC_MR - 1) // LC_MR) * LC_MR * Kp:
        raise ValueError(f"Ap: expected at least {((M + LC_MR - 1) // LC_MR) * LC_MR * Kp} int16 values, got {na}")
    if nb < ((N + LC_NR - 1) // LC_NR) * LC_NR * Kp:
        raise ValueError(f"Bp: expected at least {((N + LC_NR - 1) // LC_NR) * LC_NR * Kp} int8 values, got {nb}")


def gemm_exact(int32_t[:, :] C, const int8_t[:, ::1] A, const int8_t[::1] Bp, int64_t Kp,
               int16_t[::1] Ap, int isa, int nthreads, int64_t ldc=-1, const uint8_t[::1] Bf=None):
    """C = the exact product of A's int8 rows and packed Bp (Kp = K rounded up to even), through
    the one exact dispatcher (gemm.h lc_gemm_exact: the body table decides whether A is
    widened into the scratch Ap, round_up(M, MR) * Kp int16 values, contents undefined).
    Bf: B's form for the whole calls (exact_bform), or None (the call converts B)."""
    cdef int64_t M = C.shape[0], N = C.shape[1], K = A.shape[1]
    cdef const uint8_t *bf
    if M == 0 or N == 0:
        return
    if K == 0:
        raise ValueError("A: expected K >= 1 columns, got 0")
    _check_exact_scratch(Ap.shape[0], Bp.shape[0], M, N, Kp)
    ldc = N if ldc < 0 else ldc
    _check_ld(M, N, C.strides[0], C.strides[1], ldc, sizeof(int32_t))
    bf = _bform_ptr(Bf, Kp, N, isa)
    with nogil:
        lc_gemm_exact(&C[0, 0], ldc, &A[0, 0], K, &Bp[0], bf, M, N, K, Kp, &Ap[0], isa, nthreads)


def gemm_exact_rows(int32_t[:, :] C, const int8_t[:, ::1] A, const int8_t[:, ::1] B, int8_t[::1] Bp,
                    int16_t[::1] Ap, int isa, int nthreads, int64_t ldc=-1):
    """C = the exact product of A's and B's int8 rows (gemm.h lc_gemm_exact_rows: a body taking
    whole calls reads B's rows into its own form; otherwise B is packed into the scratch Bp,
    round_up(N, NR) * Kp int8, and A widened into the scratch Ap, round_up(M, MR) * Kp int16;
    Kp = K rounded up to even; contents undefined)."""
    cdef int64_t M = C.shape[0], N = C.shape[1], K = A.shape[1]
    cdef int64_t Kp = K + (K & 1)
    if M == 0 or N == 0:
        return
    if K == 0:
        raise ValueError("A: expected K >= 1 columns, got 0")
    if B.shape[0] != K or B.shape[1] != N:
        raise ValueError(f"B: expected shape ({K}, {N}), got ({B.shape[0]}, {B.shape[1]})")
    if A.shape[0] != M:
        raise ValueError(f"A: expected {M} rows, got {A.shape[0]}")
    _check_exact_scratch(Ap.shape[0], Bp.shape[0], M, N, Kp)
    ldc = N if ldc < 0 else ldc
    _check_ld(M, N, C.strides[0], C.strides[1], ldc, sizeof(int32_t))
    with nogil:
        lc_gemm_exact_rows(&C[0, 0], ldc, &A[0, 0], K, &B[0, 0], N, M, N, K, &Bp[0], &Ap[0], isa, nthreads)


def gemm_exact_a8(int32_t[:, :] C, const int8_t[:, ::1] A, const int8_t[::1] Bp, int64_t Kp, int isa,
                  int nthreads, int64_t ldc=-1, const uint8_t[::1] Bf=None):
    """C = the exact product of A's int8 rows and packed Bp (Kp = K rounded up to even), when
    the body for ``isa`` takes A unpacked (VNNI, more than 4 rows): True; else False and
    nothing written (pack A with pack_a16 and call gemm_exact_packed: same bits)."""
    cdef int64_t M = C.shape[0], N = C.shape[1], K = A.shape[1]
    cdef int r
    cdef const uint8_t *bf
    if M == 0 or N == 0 or K == 0:
        return False
    ldc = N if ldc < 0 else ldc
    _check_ld(M, N, C.strides[0], C.strides[1], ldc, sizeof(int32_t))
    bf = _bform_ptr(Bf, Kp, N, isa)
    with nogil:
        r = lc_gemm_exact_a8(&C[0, 0], ldc, &A[0, 0], K, &Bp[0], bf, M, N, K, Kp, isa, nthreads)
    return r == 0


def qmatmul_exact_packed(float[:, :] Y, const int16_t[:, ::1] Ap, const float[:, ::1] sa,
                         const int8_t[::1] Bp, const float[::1] sbp, int64_t nblk, int64_t bkp,
                         int isa, int nthreads, int64_t ldy=-1):
    cdef int64_t M = Y.shape[0], N = Y.shape[1]
    if M == 0 or N == 0 or nblk == 0:
        return
    ldy = N if ldy < 0 else ldy
    _check_ld(M, N, Y.strides[0], Y.strides[1], ldy, sizeof(float))
    with nogil:
        lc_qmatmul_exact_packed(&Y[0, 0], ldy, &Ap[0, 0], &sa[0, 0], &Bp[0], &sbp[0], M, N, nblk, bkp,
                                isa, nthreads)


def table_work_size(int64_t M, int64_t N, int nthreads, bint with_float):
    """int32 words of workspace the table kernels (gemm_table / qmatmul_table) need."""
    return lc_table_kernel_work(M, N, nthreads, with_float)


def table_transposed(int64_t M, int64_t N):
    """Whether the *_auto drivers run an (M, N) product as its transpose."""
    return bool(lc_table_transposed(M, N))


def table_auto_work_size(int64_t M, int64_t N, int64_t K, int64_t nblk, int nthreads, bint with_float):
    """int32 words gemm_table_auto (nblk 0) / qmatmul_table_auto (K = nblk * bk) need."""
    return lc_table_auto_work(M, N, K, nblk, nthreads, with_float)


def gemm_table(int32_t[:, ::1] C, const int8_t[:, ::1] A, const int8_t[:, ::1] B,
               const int32_t[:, ::1] T32, int32_t[::1] work, int isa, int nthreads, bint swapped=False):
    """C = A B through the table T32 (2, 65536) (units._kernel_mul), this product as it
    is; ``swapped``: with mul(b, a) for mul(a, b) (the transposed product)."""
    cdef int64_t M = C.shape[0], N = C.shape[1], K = A.shape[1]
    if M == 0 or N == 0:
        return
    with nogil:
        lc_gemm_table(&C[0, 0], N, &A[0, 0], K, &B[0, 0], N, &T32[1 if swapped else 0, 0],
                      &T32[0 if swapped else 1, 0], M, N, K, &work[0], isa, nthreads)


def gemm_table_auto(int32_t[:, :] C, const int8_t[:, ::1] A, const int8_t[:, ::1] B,
                    const int32_t[:, ::1] T32, int32_t[::1] work, int isa, int nthreads, int64_t ldc=-1):
    """C (rows ldc apart) = A B through the table, run transposed where ``table_transposed`` says so."""
    cdef int64_t M = C.shape[0], N = C.shape[1], K = A.shape[1]
    if M == 0 or N == 0:
        return
    ldc = N if ldc < 0 else ldc
    _check_ld(M, N, C.strides[0], C.strides[1], ldc, sizeof(int32_t))
    with nogil:
        lc_gemm_table_auto(&C[0, 0], ldc, &A[0, 0], K, &B[0, 0], N, &T32[0, 0], &T32[1, 0], M, N, K, &work[0],
                           isa, nthreads)


def qmatmul_table(float[:, ::1] Y, const int8_t[:, ::1] qa, const float[:, ::1] sa,
                  const int8_t[:, ::1] qb, const float[:, ::1] sb, const int32_t[:, ::1] T32,
                  int64_t nblk, int64_t bk, int32_t[::1] work, int isa, int nthreads, bint swapped=False):
    """The block-scaled product through the table (``swapped`` as in ``gemm_table``)."""
    cdef int64_t M = Y.shape[0], N = Y.shape[1]
    if M == 0 or N == 0 or nblk == 0:
        return
    with nogil:
        lc_qmatmul_table(&Y[0, 0], N, &qa[0, 0], &sa[0, 0], &qb[0, 0], &sb[0, 0], &T32[1 if swapped else 0, 0],
                         &T32[0 if swapped else 1, 0], M, N, nblk, bk, &work[0], isa, nthreads)


def qmatmul_table_auto(float[:, :] Y, const int8_t[:, ::1] qa, const float[:, ::1] sa,
                       const int8_t[:, ::1] qb, const float[:, ::1] sb, const int32_t[:, ::1] T32,
                       int64_t nblk, int64_t bk, int32_t[::1] work, int isa, int nthreads, int64_t ldy=-1):
    """The block-scaled product through the table (Y's rows ldy apart), run transposed
    where ``table_transposed`` says so."""
    cdef int64_t M = Y.shape[0], N = Y.shape[1]
    if M == 0 or N == 0 or nblk == 0:
        return
    ldy = N if ldy < 0 else ldy
    _check_ld(M, N, Y.strides[0], Y.strides[1], ldy, sizeof(float))
    with nogil:
        lc_qmatmul_table_auto(&Y[0, 0], ldy, &qa[0, 0], &sa[0, 0], &qb[0, 0], &sb[0, 0], &T32[0, 0], &T32[1, 0],
                              M, N, nblk, bk, &work[0], isa, nthreads)


TABLE_PACK_HDR = LC_TABLE_PACK_HDR


def table_pack_size(int64_t K, int64_t N, int isa):
    """Bytes of an int8 (K, N) right operand packed for isa's any-table body (table_packed.h);
    0 when isa has no such body (AVX2, generic: the plain B is what they read)."""
    return lc_table_pack_size(K, N, isa)


def table_pack_b(uint8_t[::1] Bq, const int8_t[:, ::1] B, int isa, int nthreads):
    """Bq <- B (K, N) staged for isa's any-table body, once per weight."""
    cdef int64_t K = B.shape[0], N = B.shape[1]
    cdef size_t want = lc_table_pack_size(K, N, isa)
    cdef int r
    if want == 0:
        raise ValueError(f"b: no packed any-table form for isa {isa} and shape ({K}, {N})")
    if <size_t>Bq.shape[0] != want:
        raise ValueError(f"Bq: expected {want} bytes for b ({K}, {N}), got {Bq.shape[0]}")
    if (<size_t>&Bq[0]) % 64:
        raise ValueError("Bq: expected a 64-byte aligned buffer")
    with nogil:
        r = lc_table_pack_b(&Bq[0], &B[0, 0], K, N, N, isa, nthreads)
    if r:
        raise ValueError(f"b: no packed any-table form for isa {isa}")


def table_form(int16_t[::1] T16, const int32_t[:, ::1] T32, int isa):
    """T16 (65536,) <- the table (T32 row 0, units._kernel_mul) in isa's any-table body form."""
    if T16.shape[0] != 65536 or T32.shape[0] < 1 or T32.shape[1] != 65536:
        raise ValueError(f"T16, T32: expected (65536,) and (2, 65536), got ({T16.shape[0]},) and "
                         f"({T32.shape[0]}, {T32.shape[1]})")
    with nogil:
        lc_table_form(&T16[0], &T32[0, 0], isa)


def table_pack_header(const uint8_t[::1] Bq):
    """(body id, K, N) a packed B was made for, or None when Bq is no packed B."""
    import numpy as np
    if Bq.shape[0] < LC_TABLE_PACK_HDR:
        return None
    h = np.frombuffer(bytes(Bq[:40]), np.int64)
    if int(h[0]) != 0x31304b5042544c43:
        return None
    return int(h[1]), int(h[2]), int(h[3])


def gemm_table_packed(int32_t[:, :] C, const int8_t[:, ::1] A, const uint8_t[::1] Bq, const int16_t[::1] T16,
                      int isa, int nthreads, int64_t ldc=-1):
    """C (M, N) (rows ldc apart) = A (M, K) times the B packed in Bq (table_pack_b) through the
    table T16 in isa's body form (table_form).  ValueError naming b when Bq was packed for
    another body, K or N."""
    cdef int64_t M = C.shape[0], N = C.shape[1], K = A.shape[1]
    cdef int r
    if M == 0 or N == 0:
        return
    if K == 0:
        raise ValueError("a: expected K >= 1 columns, got 0")
    if T16.shape[0] != 65536:
        raise ValueError(f"T16: expected 65536 int16 entries, got {T16.shape[0]}")
    cdef size_t want = lc_table_pack_size(K, N, isa)
    if want == 0 or <size_t>Bq.shape[0] != want:
        got = table_pack_header(Bq)
        raise ValueError(f"b: packed for (body, K, N) = {got}, expected a packed ({K}, {N}) of {want} bytes "
                         f"for isa {isa}, got {Bq.shape[0]} bytes")
    if (<size_t>&Bq[0]) % 64:
        raise ValueError("b: expected its packed bytes 64-byte aligned")
    ldc = N if ldc < 0 else ldc
    _check_ld(M, N, C.strides[0], C.strides[1], ldc, sizeof(int32_t))
    with nogil:
        r = lc_gemm_table_packed(&C[0, 0], ldc, &A[0, 0], K, &Bq[0], &T16[0], M, N, K, isa, nthreads)
    if r:
        raise ValueError(f"b: packed for (body, K, N) = {table_pack_header(Bq)}, not for isa {isa} and "
                         f"({K}, {N})")


def quantize_rows(int8_t[:, ::1] q, float[:, ::1] s, const float[:, ::1] x, int64_t bk, int isa, int nthreads):
    """Returns the count of non-finite inputs."""
    cdef int64_t R = x.shape[0], K = x.shape[1], nblk = s.shape[1], bad = 0
    if R == 0 or nblk == 0:
        return 0
    with nogil:
        bad = lc_quantize_rows(&q[0, 0], &s[0, 0], &x[0, 0] if K > 0 else NULL, R, K, K, bk, nblk, isa, nthreads)
    return bad


def quantize_cols(int8_t[:, ::1] q, float[:, ::1] s, const float[:, ::1] x, int64_t bk, int isa, int nthreads):
    cdef int64_t K = x.shape[0], N = x.shape[1], nblk = s.shape[0], bad = 0
    if N == 0 or nblk == 0:
        return 0
    with nogil:
        bad = lc_quantize_cols(&q[0, 0], &s[0, 0], &x[0, 0] if K > 0 else NULL, K, N, N, bk, nblk, isa, nthreads)
    return bad
