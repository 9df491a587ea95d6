"""lutcore's thread team (csrc/core/team_impl.h): every unit runs once on a thread of the call,
late threads hold back nothing, nested and concurrent calls run alone, a forked child gets a
team of its own, and every kernel module is bound to it."""
import multiprocessing as mp
import os
import threading

import numpy as np
import pytest

import lutcore
from lutcore._native import _cpu
from lutcore.ops.gemm import lut_gemm
from lutcore.units import approx



@pytest.mark.parametrize("n", [1, 2, 7, 33, 1000])
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_every_unit_runs_once_on_a_thread_of_the_call(n, threads):
    assert _cpu.team_capsule() is not None          # POSIX: the kernels run on the team
    count, tid, _ = _cpu.team_selftest(n, threads)
    assert list(count) == [1] * n
    assert all(0 <= t < min(threads, n) for t in tid)


def test_workers_take_units():
    before = _cpu.team_stats()["units_workers"]
    for _ in range(20):
        count, tid, _ = _cpu.team_selftest(16, 2, work_us=200)
        assert list(count) == [1] * 16
    assert _cpu.team_stats()["units_workers"] > before
    assert _cpu.team_stats()["workers"] >= 1


def test_a_unit_calling_the_team_runs_its_loop_alone():
    count, _, inner = _cpu.team_selftest(40, 2, nested=True)
    assert list(count) == [1] * 40 and list(inner) == [3] * 40


def test_concurrent_callers_each_get_every_unit():
    errors = []

    def call():
        for _ in range(30):
            count, tid, _ = _cpu.team_selftest(64, 2, work_us=20)
            if list(count) != [1] * 64 or not all(0 <= t < 2 for t in tid):
                errors.append((list(count), list(tid)))

    ts = [threading.Thread(target=call) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors


def _child(q):
    count, tid, _ = _cpu.team_selftest(64, 2, work_us=50)
    a = np.random.default_rng(1).integers(-128, 128, (33, 70)).astype(np.int8)
    b = np.random.default_rng(2).integers(-128, 128, (70, 65)).astype(np.int8)
    u = approx.mitchell()
    same = np.array_equal(lut_gemm(a, b, u, threads=2), lut_gemm(a, b, u, threads=1))
    q.put((list(count) == [1] * 64, same))


def test_a_forked_child_gets_a_team_of_its_own():
    _cpu.team_selftest(64, 2, work_us=50)       # the parent's workers exist before the fork
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert q.get(timeout=5) == (True, True)


def test_kernels_run_on_the_team():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (64, 256)).astype(np.int8)
    b = rng.integers(-128, 128, (256, 256)).astype(np.int8)
    jobs = _cpu.team_stats()["jobs"]
    lut_gemm(a, b, approx.mitchell(), threads=2)
    assert _cpu.team_stats()["jobs"] > jobs


def test_spin_budget_is_checked():
    with pytest.raises(ValueError, match="us"):
        _cpu.set_team_spin(-1)
    old = _cpu.team_stats()["spin_us"]
    _cpu.set_team_spin(0)
    try:
        count, _, _ = _cpu.team_selftest(33, 2, work_us=10)
        assert list(count) == [1] * 33
    finally:
        _cpu.set_team_spin(old)


def test_spin_budget_from_the_environment_is_checked():
    import subprocess
    import sys
    env = dict(os.environ, LUTCORE_TEAM_SPIN_US="soon")
    r = subprocess.run([sys.executable, "-c", "import lutcore"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "LUTCORE_TEAM_SPIN_US" in r.stderr
    env["LUTCORE_TEAM_SPIN_US"] = "250"
    r = subprocess.run([sys.executable, "-c", "from lutcore._native import _cpu; print(_cpu.team_stats()['spin_us'])"],
                       env=env, capture_output=True, text=True)
    assert r.stdout.strip() == "250"


def test_bad_arguments():
    with pytest.raises(ValueError, match="nthreads"):
        _cpu.team_selftest(4, 0)
    assert lutcore.get_num_threads() >= 1
