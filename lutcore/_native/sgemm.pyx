"""Thin wrapper over csrc/sgemm/sgemm.h (validated by lutcore.ops.matmul).  The operands are
float32 ndarrays read through element strides the caller gives (any layout, any number of
dimensions: `data_of` checks the dtype; work and packed panels are C-contiguous)."""
from lutcore._native._common cimport *
bind_team()
cnp.import_array()


def body_name(int isa):
    """The register tile ``isa`` runs (show_config)."""
    return lc_sgemm_body_name(isa).decode()


def body_names(int isa):
    """The bodies ``isa`` runs: the register tile and the GEMV's."""
    return {"sgemm (ops.matmul)": lc_sgemm_body_name(isa).decode(),
            "sgemv (decode, ops.matmul M = 1)": lc_sgemv_body_name(isa).decode()}


def work_size(int64_t M, int64_t N, int64_t K):
    return lc_sgemm_work(M, N, K)


def sgemm(cnp.ndarray C, int64_t scb, int64_t ldc, cnp.ndarray A, int64_t sab, int64_t sar, int64_t sac,
          cnp.ndarray B, int64_t sbb, int64_t sbr, int64_t sbc, int64_t nbatch, int64_t M, int64_t N, int64_t K,
          bint accumulate, cnp.ndarray work, object Bpre, int isa, int nthreads, int tri=LC_TRI_NONE):
    """Strides in elements; the caller guarantees every index stays inside the arrays.
    ``Bpre``: panels from ``pack_b`` (then B is not read), or None.  ``tri``: one of
    the TRI_* known-zero structures (sgemm.h)."""
    cdef float *pc = <float *>data_of(C, cnp.NPY_FLOAT32, False, "C")
    cdef const float *pa = <const float *>data_of(A, cnp.NPY_FLOAT32, False, "A")
    cdef const float *pb = <const float *>data_of(B, cnp.NPY_FLOAT32, False, "B")
    cdef float *pw = <float *>data_of(work, cnp.NPY_FLOAT32, True, "work")
    cdef const float *pp = <const float *>data_or_null(Bpre, cnp.NPY_FLOAT32, True, "Bpre")
    with nogil:
        lc_sgemm_tri(pc, scb, ldc, pa, sab, sar, sac, pb, sbb, sbr, sbc, nbatch, M, N, K, accumulate, tri, pw, pp,
                     isa, nthreads)


NR = LC_SNR
TRI = {None: LC_TRI_NONE, "a_lower": LC_TRI_A_LOWER, "a_upper": LC_TRI_A_UPPER, "out_lower": LC_TRI_C_LOWER}


def pack_b(float[::1] out not None, cnp.ndarray B, int64_t K, int64_t N, int64_t sbr, int64_t sbc):
    """out (ceil(N / NR) * NR * K,) <- B (K, N) given by element strides, as NR-column panels."""
    cdef const float *pb = <const float *>data_of(B, cnp.NPY_FLOAT32, False, "B")
    cdef int64_t np_ = (N + LC_SNR - 1) // LC_SNR, p
    if out.shape[0] < np_ * LC_SNR * K:
        raise ValueError(f"out: expected {np_ * LC_SNR * K} floats, got {out.shape[0]}")
    cdef float *po = &out[0] if out.shape[0] else NULL
    if K == 0 or N == 0:
        return
    with nogil:
        for p in range(np_):
            lc_sgemm_pack_b(po + p * K * LC_SNR, pb + p * LC_SNR * sbc, K,
                            (N - p * LC_SNR) if N - p * LC_SNR < LC_SNR else LC_SNR, sbr, sbc)
