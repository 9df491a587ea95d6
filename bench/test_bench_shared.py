"""Every parallel kernel family idle and beside a process spinning on one core
(bench/shared_cases.py's cases; the alternating same-process run is bench/ab_shared.py).

One group per case and load, "shared[<load>] <case> <shape>":

    impl                 call
    lutcore              the family's lutcore call at THREADS threads
    lutcore 1 thread     the same call at 1 thread (its ratio, 1 thread's time / lutcore's, is
                         the N-thread call's rate over the 1-thread call's: the issue's
                         criterion is >= 0.9 in the busy groups)
    <torch label>        the torch peer at torch's THREADS threads (none for some cases)

load "idle": nothing started; "busy": a module-scoped fixture starts
``python -c "while True: pass"`` 0.2 s before the busy parametrization and kills it after
(lutbench.spinning), so every busy test runs beside it (pytest runs all the idle tests first).
Each row records ``cpu_after_ms``: this process's CPU time during a 200 ms sleep right after
its last timed call (idle workers spinning).  Every case's outputs are checked when it is
built (shared_cases: against torch or numpy, and the 1- and N-thread bits).
"""
from __future__ import annotations

import time

import pytest

import shared_cases as sc
from lutbench import SLOW, THREADS, cpu_after, spinning, torch

pytestmark = pytest.mark.skipif(torch is None, reason="torch is not importable")

PARAMS = [pytest.param(fam, i, id=f"{fam}-{i}") for fam, n in sc.CASES_PER_FAMILY.items() for i in range(n)]
IMPLS = ["lutcore", "lutcore-1t", "torch"]
SLOW_CALL = 0.25          # seconds: a slower call is timed with benchmark.pedantic(**SLOW)


@pytest.fixture(scope="module", params=["idle", "busy"])
def load(request):
    """The machine's load for the tests that take it; busy: one core spinning for the whole
    busy parametrization (started before its first test, killed after its last)."""
    if request.param == "busy":
        with spinning():
            yield "busy"
    else:
        yield "idle"


def _case(cases, fam, i):
    return cases(("shared", fam), lambda rng: sc.FAMILIES[fam](THREADS))[i]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("fam,i", PARAMS)
def test_shared(benchmark, record, cases, load, fam, i, impl):
    c = _case(cases, fam, i)
    if impl == "torch":
        if c.torch is None:
            pytest.skip(f"{c.name} {c.shape}: no torch peer at this shape")
        fn, name, threads = c.torch, c.torch_label, torch.get_num_threads()
    else:
        threads = THREADS if impl == "lutcore" else 1
        fn, name = (lambda: c.lutcore(threads)), ("lutcore" if impl == "lutcore" else "lutcore 1 thread")
    t0 = time.perf_counter()
    fn()                                                  # warm-up, and the call's length
    slow = time.perf_counter() - t0 > SLOW_CALL
    benchmark.group = f"shared[{load}] {c.name} {c.shape}"
    info = record(f"shared[{load}] {c.name}", c.shape, name, threads=threads, load=load, family=fam)
    if slow:
        benchmark.pedantic(fn, **SLOW)
    else:
        benchmark(fn)
    if not benchmark.disabled:
        info["cpu_after_ms"] = round(cpu_after() * 1e3, 3)
