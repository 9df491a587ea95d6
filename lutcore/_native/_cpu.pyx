"""CPU features and OpenMP facts, read by lutcore._threads (thread counts) and lutcore._simd (show_config)."""

cdef extern from "core/common.h" nogil:
    int lc_cpu_features()
    int omp_get_max_threads()
    int LC_HAVE_OMP


def cpu_features():
    """Bit mask: 1 avx2+fma, 2 avx512 f/bw/vl/dq, 4 avx512-vnni, 8 avx512-vbmi, 16 avx512-vpopcntdq."""
    return lc_cpu_features()


def openmp_enabled():
    return bool(LC_HAVE_OMP)


def max_threads():
    """OpenMP's max threads in the calling thread (honours OMP_NUM_THREADS, threadpoolctl)."""
    return omp_get_max_threads()
