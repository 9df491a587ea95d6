"""Shared fixtures for lutcore's benchmarks (bench/, apart from tests/: STYLE habit 12).

Design: every group is one kernel at one shape; lutcore (each available SIMD
path) and its peers (numpy, torch) run in that group on identical inputs, and
each validates its output before it is timed.  A ratio, not an absolute time,
is the result (DESIGN.md, Performance).  ``bench/report.py`` turns the
``--benchmark-json`` output into BENCHMARKS.md.

Module-level helpers (shapes, groups, the optional torch) live in lutbench.py.

Environment
    LUTCORE_BENCH_SMALL=1    divide every dimension by 8 (validation in seconds;
                             the numbers are then not representative)
    LUTCORE_BENCH_SIMD=a,b   time only these lutcore SIMD paths (default: all of
                             lutcore.available_simd())

Fixtures
    rng      np.random.Generator, fixed seed (the same for every test)
    cases    module-scoped memo: cases(key, build) -> build(rng) once per module,
             so lutcore and its peers in one group share the very same arrays
             (and the reference output computed from them)
    simd     parametrised over the lutcore SIMD paths; restores the previous path
    record   record(kernel, shape, impl, threads=THREADS, ops=None, bytes=None,
             **extra) fills benchmark.extra_info (tokens=, peak_mb=: see record)
    (session, autouse) 2 threads everywhere: lutcore.set_num_threads(2),
             torch.set_num_threads(2), threadpoolctl.threadpool_limits(2)
             (OpenBLAS and OpenMP pools) if threadpoolctl is importable;
             audit off.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
import time

import numpy as np
import pytest

import lutcore

from lutbench import SEED, SMALL, THREADS, shape_str, torch

try:
    import threadpoolctl
except Exception:  # noqa: BLE001
    threadpoolctl = None


def _simd_paths() -> list[str]:
    avail = list(lutcore.available_simd())
    want = os.environ.get("LUTCORE_BENCH_SIMD", "").strip()
    if not want:
        return avail
    names = [w.strip() for w in want.split(",") if w.strip()]
    unknown = [w for w in names if w not in avail]
    if unknown:
        raise pytest.UsageError(f"LUTCORE_BENCH_SIMD: {unknown} not available here (available: {avail})")
    return names


def pytest_collection_modifyitems(session, config, items):
    """Within each module, the cases that start a Ray cluster run last: once up, its idle
    processes (raylet, GCS, workers polling) take CPU from every later benchmark."""
    order = {}
    for it in items:
        order.setdefault(it.nodeid.split("::")[0], len(order))
    items.sort(key=lambda it: (order[it.nodeid.split("::")[0]], "ray" in it.name))


def pytest_generate_tests(metafunc):
    if "simd" in metafunc.fixturenames:
        metafunc.parametrize("simd", _simd_paths(), indirect=True)


@pytest.fixture
def simd(request):
    prev = lutcore.get_simd()
    lutcore.set_simd(request.param)
    try:
        yield request.param
    finally:
        lutcore.set_simd(prev)


_POOLS: list = []           # thread pools as seen inside threadpool_limits
_CPU0: dict = {}            # CPU counters when the session started (see _cpu_sample)


def _threadpools() -> list:
    if threadpoolctl is None:
        return []
    try:
        return [{k: p.get(k) for k in ("user_api", "internal_api", "prefix", "num_threads")}
                for p in threadpoolctl.threadpool_info()]
    except Exception:  # noqa: BLE001 - informational only
        return []


@pytest.fixture(scope="session", autouse=True)
def _bench_threads():
    _CPU0.update(_cpu_sample() or {})
    prev_torch = torch.get_num_threads() if torch is not None else None
    prev_audit = lutcore.get_audit()
    lutcore.set_num_threads(THREADS)
    lutcore.set_audit(0)  # LUTCORE_AUDIT in the environment would time the audit too
    if torch is not None:
        torch.set_num_threads(THREADS)
    limits = threadpoolctl.threadpool_limits(THREADS) if threadpoolctl is not None else contextlib.nullcontext()
    with limits:
        _POOLS[:] = _threadpools()
        yield
    lutcore.set_num_threads(None)
    lutcore.set_audit(prev_audit)
    if torch is not None:
        torch.set_num_threads(prev_torch)


def _cpu_sample():
    """Machine-wide busy CPU seconds (/proc/stat), this process's CPU seconds (and its waited-for
    children's), wall time."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)          # idle + iowait
        busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")         # up to steal, no guest
        t = os.times()                      # with the children it waited for (peak-memory probes)
        own = t.user + t.system + t.children_user + t.children_system
        return {"busy": busy, "own": own, "wall": time.monotonic()}
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _other_load():
    """Share of the machine's CPU time that other processes used since the session started
    (the benchmarks' own threads excluded), or None where /proc/stat is missing."""
    now = _cpu_sample()
    if now is None or "busy" not in _CPU0:
        return None
    wall = now["wall"] - _CPU0["wall"]
    if wall <= 0:
        return None
    other = (now["busy"] - _CPU0["busy"]) - (now["own"] - _CPU0["own"])
    return round(max(0.0, other) / (wall * (os.cpu_count() or 1)), 3)


@pytest.fixture(autouse=True)
def _audit_off():
    yield
    lutcore.set_audit(0)


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


@pytest.fixture(scope="module")
def cases():
    memo: dict = {}

    def get(key, build):
        if key not in memo:
            memo[key] = build(np.random.default_rng(SEED))
        return memo[key]

    yield get
    memo.clear()


@pytest.fixture
def record(benchmark):
    """Fill ``benchmark.extra_info`` with the keys bench/report.py reads.

    kernel, shape (str), threads (int, what the implementation really uses:
    numpy's ufuncs and integer matmul are single-threaded, so their peers pass
    threads=1), simd (lutcore's active path), impl ("lutcore" or the peer's
    name); ops (2*M*N*K for matmuls) or bytes (read + written, memory-bound
    kernels) for the work one call does; anything else (notes, rows) as given.
    Keys report.py also shows when a group has them: ``tokens`` (tokens one
    call processes: a tokens/s column) and ``peak_mb`` (peak MiB of one call
    from lutbench.peak_rss, with ``state_mb`` and ``peak_method``).
    """
    def _record(kernel, shape, impl, threads=THREADS, ops=None, bytes=None, **extra):
        info = benchmark.extra_info
        info.update(kernel=str(kernel), shape=shape if isinstance(shape, str) else shape_str(shape),
                    threads=int(threads), simd=lutcore.get_simd(), impl=str(impl))
        if ops is not None:
            info["ops"] = int(ops)
        if bytes is not None:
            info["bytes"] = int(bytes)
        info.update(extra)
        return info

    return _record


def _dist_version(name: str):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """Keep the facts the report prints (config, command, versions) in the json."""
    args = " ".join(config.invocation_params.args)
    env = {k: os.environ[k] for k in ("LUTCORE_BENCH_SMALL", "LUTCORE_BENCH_SIMD", "LUTCORE_SIMD",
                                      "LUTCORE_AUDIT", "OMP_NUM_THREADS") if k in os.environ}
    envs = "".join(f"{k}={v} " for k, v in env.items())
    output_json["lutcore_bench"] = {
        "command": f"{envs}python -m pytest {args}".strip(),
        "small": SMALL,
        "threads": THREADS,
        "lutcore_config": lutcore.config(),
        "numpy": np.__version__,
        "torch": getattr(torch, "__version__", None),
        # Peers imported by some modules only (bench-only mambapy): versions from their metadata.
        **{name: _dist_version(name) for name in ("transformers", "mambapy")},
        "python": sys.version.split()[0],
        "threadpools": list(_POOLS),
        # Other work on a 2-core machine stretches every 2-thread region: the report shows it.
        "other_cpu_share": _other_load(),
    }
