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


# ---------------------------------------------------------------- lutcore's thread team

from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport int32_t, int64_t, uint64_t

cdef extern from "core/team_impl.h" nogil:
    ctypedef struct lc_team_t:
        uint64_t jobs, units_workers, worker_sleeps, caller_sleeps, contended, serial_busy
        int nworkers
        int64_t spin_ns
    lc_team_t lc_team
    int LC_TEAM_POSIX
    void lc_team_init(int64_t spin_us, int workers)
    void lc_team_set_spin(int64_t spin_us)
    void *lc_team_run_impl
    void lc_team_selftest(int32_t *count, int32_t *tid, int32_t *inner, int64_t n, int nthreads, int nested,
                          int64_t work_us)


def _spin_from_env():
    import os
    v = os.environ.get("LUTCORE_TEAM_SPIN_US")
    if v is None or v.strip() == "":
        return -1
    try:
        us = int(v)
    except ValueError:
        raise ValueError(f"LUTCORE_TEAM_SPIN_US: expected an integer number of microseconds >= 0, got {v!r}")
    if us < 0 or us > 10_000_000:
        raise ValueError(f"LUTCORE_TEAM_SPIN_US: expected 0..10000000 microseconds, got {us}")
    return us


def _default_workers():
    import os
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(0, min(omp_get_max_threads(), cpus, 64) - 1)


lc_team_init(_spin_from_env(), _default_workers())


def team_capsule():
    """The team's entry point for the other modules (None where there is no team: they run
    OpenMP loops)."""
    if not LC_TEAM_POSIX:
        return None
    return PyCapsule_New(lc_team_run_impl, b"lutcore._native._cpu.team", NULL)


def team_stats():
    """The team's counters: jobs run on it, units workers ran, worker and caller sleeps,
    contention seen (spins that lost their core), calls run alone because the team was busy,
    workers started, spin budget in microseconds."""
    if not LC_TEAM_POSIX:
        return {}
    return dict(jobs=lc_team.jobs, units_workers=lc_team.units_workers, worker_sleeps=lc_team.worker_sleeps,
                caller_sleeps=lc_team.caller_sleeps, contended=lc_team.contended,
                serial_busy=lc_team.serial_busy, workers=lc_team.nworkers, spin_us=lc_team.spin_ns // 1000)


def set_team_spin(int64_t us):
    """How long (microseconds) a team thread with nothing to do spins before it sleeps."""
    if us < 0 or us > 10_000_000:
        raise ValueError(f"us: expected 0..10000000 microseconds, got {us}")
    lc_team_set_spin(us)


def team_selftest(int64_t n, int nthreads, bint nested=False, int64_t work_us=0):
    """Run n test units on the team (tests/native/test_team.py): (runs per unit, the thread
    of each, inner units each ran when nested) as array('i')s; each unit busy for work_us."""
    from array import array as pyarray
    if n < 0 or nthreads < 1:
        raise ValueError(f"n, nthreads: expected n >= 0 and nthreads >= 1, got {n}, {nthreads}")
    count, tid, inner = pyarray("i", bytes(4 * n)), pyarray("i", bytes(4 * n)), pyarray("i", bytes(4 * n))
    if n == 0:
        return count, tid, inner
    cdef int32_t[::1] c = count, t = tid, i = inner
    with nogil:
        lc_team_selftest(&c[0], &t[0], &i[0], n, nthreads, nested, work_us)
    return count, tid, inner
