"""What every benchmark module needs at import time (conftest.py holds the fixtures).

A plain module, not conftest.py, because test modules cannot import a conftest
by name once tests/ and bench/ share one pytest session (both are "conftest").

    THREADS, SEED, SMALL    2 threads everywhere; one fixed seed; LUTCORE_BENCH_SMALL
    dim(n)                  n, or n // 8 under LUTCORE_BENCH_SMALL=1
    shape_str(shape)        (1024, 1024, 1024) -> "1024x1024x1024"
    grouped(kernel, shapes) pytest.param per shape, each in group "<kernel> <shape>"
    torch, requires_torch   the optional torch peer (None, and its tests skipped,
                            when it cannot be imported); requires_torch also needs
                            torch._int_mm, requires_torch_nn only torch itself
    mambapy_pscan, requires_mambapy
                            mambapy's parallel scan (a bench-only peer, see README.md)
    need_module(name)       import a heavy optional peer (transformers) inside a test,
                            or skip that test when the import fails
    cpu_name()              the CPU as /proc/cpuinfo reads at run time (model name, AMD core
                            generation from the family/model, the AVX-512 subsets present)
    alternate(fns, rounds)  the same-process A/B loop: the callables in turn, round by round,
                            each timed call by call for a budget; [(min, median)] per callable
    call_times(fn, budget)  one callable timed call by call for a budget: every call's seconds
    spinning()              context manager: a `python -c "while True: pass"` process keeps one
                            core busy for the block (started 0.2 s before, killed after)
    cpu_after(sleep)        this process's CPU seconds burnt during a sleep (workers spinning
                            after a parallel call)
    cpu_counters(), other_cpu_share(c0, c1)
                            /proc/stat samples; the share of the CPUs other processes used
    SLOW                    benchmark.pedantic(fn, **SLOW) for calls slower than ~0.5 s
    rel_err(got, want)      norm-wise relative error (float64), for float validation
    peak_rss(builder, *args, simd=None, imports=())
                            peak memory of one call, measured in a fresh spawned process:
                            {"peak_mb", "state_mb", "peak_method"} for record(**...)
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import resource
import time

import numpy as np
import pytest

THREADS = int(os.environ.get("LUTCORE_BENCH_THREADS", "2"))


def cpu_name() -> str:
    """'AMD EPYC (Zen 4, family 25 model 17), AVX-512 F/BW/VL/DQ + VNNI + VBMI + BF16' from
    /proc/cpuinfo of the machine running the benchmark (never a constant: runs move between
    CPU types); 'unknown CPU' where /proc/cpuinfo is absent."""
    info = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if not key and info:
                    break                                   # the first processor's block only
                info.setdefault(key, val.strip())
    except OSError:
        return "unknown CPU"
    flags = set(info.get("flags", "").split())
    name = info.get("model name") or info.get("Model") or "unknown CPU"
    fam, mod = info.get("cpu family"), info.get("model")
    gen = ""
    if info.get("vendor_id") == "AuthenticAMD" and fam and mod:
        f, m = int(fam), int(mod)
        # family 0x19: Zen 3 (models 0x00-0x0f, 0x20-0x5f), Zen 4 (0x10-0x1f, 0x60-0xaf); 0x1a: Zen 5
        gen = {23: "Zen/Zen 2", 26: "Zen 5"}.get(f, "")
        if f == 25:
            gen = "Zen 4" if (0x10 <= m <= 0x1f or 0x60 <= m <= 0xaf) else "Zen 3"
        gen = f"{gen + ', ' if gen else ''}family {f} model {m}"
    elif fam and mod:
        gen = f"family {fam} model {mod}"
    isa = []
    if "avx512f" in flags:
        isa.append("AVX-512 " + "/".join(x.upper() for x in ("f", "bw", "vl", "dq") if "avx512" + x in flags))
        isa += [n for fl, n in (("avx512_vnni", "VNNI"), ("avx512vbmi", "VBMI"), ("avx512_bf16", "BF16"),
                                ("avx512_fp16", "FP16")) if fl in flags]
    elif "avx2" in flags:
        isa.append("AVX2")
    return f"{name} ({gen})" + (", " + " + ".join(isa) if isa else "")
SEED = 20240611
SMALL = os.environ.get("LUTCORE_BENCH_SMALL", "").strip() not in ("", "0")

try:  # anything that stops the import (ImportError, OSError from a broken wheel) skips torch
    import torch
except Exception:  # noqa: BLE001
    torch = None

requires_torch = pytest.mark.skipif(torch is None or not hasattr(torch, "_int_mm"),
                                    reason="torch (with torch._int_mm) is not importable")
requires_torch_nn = pytest.mark.skipif(torch is None, reason="torch is not importable")

try:  # bench-only peer (pip install --no-deps mambapy): its tests are skipped without it
    from mambapy.pscan import pscan as mambapy_pscan
except Exception:  # noqa: BLE001
    mambapy_pscan = None

requires_mambapy = pytest.mark.skipif(mambapy_pscan is None, reason="mambapy is not importable")

# Few rounds for anything slower than ~0.5 s per call (a min over 3 is still a min).
SLOW = dict(rounds=3, iterations=1, warmup_rounds=1)


def ab_parser(rounds: int = 5, calls: int | None = 5):
    """The A/B scripts' common flags: --threads (2), --rounds, --calls (None: no such flag)."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=rounds)
    if calls is not None:
        ap.add_argument("--calls", type=int, default=calls)
    return ap


def use_threads(n: int) -> None:
    """lutcore's and torch's thread count for an A/B run (the same for both)."""
    import lutcore
    lutcore.set_num_threads(n)
    if torch is not None:
        torch.set_num_threads(n)


def best_of(fn, calls: int) -> float:
    """The fastest of `calls` back-to-back calls of fn(), in seconds (the same-process A/B scripts'
    unit: alternate implementations round by round, take each one's best call per round)."""
    t = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def call_times(fn, budget: float) -> list:
    """fn() called back to back for ``budget`` s (at least once); each call's time in seconds."""
    times = []
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        fn()
        now = time.perf_counter()
        times.append(now - t)
        if now - start >= budget:
            return times


def alternate(fns, rounds: int, budget: float = 0.3):
    """Alternate the callables round by round, each timed call by call for ``budget`` s per
    round (at least one call); every call's time kept.  Returns [(min, median)] in seconds,
    one pair per callable — the VM drifts 20-40% within minutes, so A and B share each round."""
    times = [[] for _ in fns]
    for _ in range(rounds):
        for i, f in enumerate(fns):
            times[i] += call_times(f, budget)
    return [(min(t), float(np.median(t))) for t in times]


SPIN_CODE = "while True: pass"


@contextlib.contextmanager
def spinning(settle: float = 0.2):
    """One core kept busy for the block: a ``python -c "while True: pass"`` subprocess, started
    ``settle`` s before the block and killed (and reaped) after it; yields the Popen."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", SPIN_CODE])
    try:
        time.sleep(settle)
        yield p
    finally:
        p.kill()
        p.wait()


def cpu_after(sleep: float = 0.2) -> float:
    """This process's CPU seconds (every thread: time.process_time) burnt while the calling
    thread sleeps ``sleep`` s — right after a parallel call, what its idle workers spin."""
    c0 = time.process_time()
    time.sleep(sleep)
    return time.process_time() - c0


def cpu_counters():
    """(machine-wide busy CPU seconds from /proc/stat, this process's CPU seconds, wall time), or
    None where /proc/stat is missing; ``other_cpu_share`` of two of them."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    t = os.times()
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK"), t.user + t.system, time.monotonic()


def other_cpu_share(c0, c1):
    """Share of the machine's CPUs that other processes (and this one's children) used between
    two ``cpu_counters()`` samples, or None."""
    if c0 is None or c1 is None or c1[2] <= c0[2]:
        return None
    other = max(0.0, (c1[0] - c0[0]) - (c1[1] - c0[1]))
    return other / ((c1[2] - c0[2]) * (os.cpu_count() or 1))


def dim(n: int) -> int:
    """A benchmark dimension: ``n``, or ``n // 8`` under LUTCORE_BENCH_SMALL=1."""
    return max(1, n // 8) if SMALL else n


def shape_str(shape) -> str:
    return "x".join(str(int(d)) for d in shape)


def grouped(kernel: str, shapes, axes: str = ""):
    """One pytest.param per shape, marked with its benchmark group
    ``"<kernel> <shape> (<axes>)"`` so lutcore and its peers land in one group."""
    out = []
    for s in shapes:
        name = f"{kernel} {shape_str(s)}" + (f" ({axes})" if axes else "")
        out.append(pytest.param(tuple(s), id=shape_str(s), marks=pytest.mark.benchmark(group=name)))
    return out


def need_module(name: str):
    """``importlib.import_module(name)``, or skip the calling test when that fails
    (for peers too heavy to import at collection time, e.g. transformers)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a broken install skips the peer too
        pytest.skip(f"{name} is not importable ({type(exc).__name__}: {exc})")


def rel_err(got, want) -> float:
    """||got - want|| / ||want|| in float64 (0 when both are zero)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    den = float(np.linalg.norm(want))
    num = float(np.linalg.norm(got - want))
    return num / den if den > 0 else num


# ---------------------------------------------------------------- peak memory (fresh process)

def _status_kib(field: str):
    """A 'VmRSS'/'VmHWM' line of /proc/self/status in KiB, or None."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_hwm() -> bool:
    """Reset the peak-RSS mark (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _trim() -> None:
    """Return freed memory to the OS — lutcore's block cache and glibc's heap — so
    it is not counted as held: the measured call allocates its working memory
    afresh, and its peak is what the call needs, not what a cache kept."""
    gc.collect()
    import lutcore
    lutcore.empty_cache()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _peak_child(builder, args, simd, imports):
    import lutcore
    for name in imports:                        # libraries are not the call's state
        importlib.import_module(name)
    lutcore.set_num_threads(THREADS)
    lutcore.set_audit(0)
    if simd:
        lutcore.set_simd(simd)
    if torch is not None:
        torch.set_num_threads(THREADS)
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(THREADS)
    except Exception:  # noqa: BLE001
        pass
    _trim()
    rss0 = _status_kib("VmRSS")
    run = builder(*args)
    if _reset_hwm():
        run()                                   # warm-up: lazy init, optimizer moments, workspaces
        _trim()
        base = _status_kib("VmRSS")
        _reset_hwm()
        run()
        peak, method = _status_kib("VmHWM"), "VmHWM (reset via clear_refs) after one warm-up call"
    else:                                       # no reset: one cold call against ru_maxrss
        _trim()
        base = _status_kib("VmRSS")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        run()
        peak, method = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "ru_maxrss, one cold call"
        if peak <= before:                      # the call stayed under an earlier mark: unknown
            peak, method = None, "ru_maxrss not raised by the call (no clear_refs): unknown"
    if peak is None or base is None or rss0 is None:
        return {"peak_mb": None, "state_mb": None, "peak_method": method if peak is None else "unavailable"}
    return {"peak_mb": round(max(0, peak - base) / 1024, 1), "state_mb": round((base - rss0) / 1024, 1),
            "peak_method": method}


def peak_rss(builder, *args, simd=None, imports=()) -> dict:
    """Peak resident memory of one call, in MiB, measured in a fresh ``spawn`` process.

    ``builder(*args)`` (a module-level function, so it pickles by name) builds
    the inputs and returns the zero-argument call to measure; the modules named
    in ``imports`` are imported first (the builder's own module is imported to
    unpickle it).  The child runs at THREADS threads (lutcore, torch, BLAS) on
    lutcore's SIMD path ``simd``, calls it once to warm up, then resets the
    kernel's peak-RSS mark and calls it again.  Returns ``peak_mb``: the peak
    above what the process held just before that call (so inputs, parameters,
    optimizer state and imported libraries are excluded); ``state_mb``: what the
    builder and the warm-up left held (inputs, weights, optimizer moments,
    lazily initialised library state); ``peak_method``.
    """
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(_peak_child, (builder, args, simd, tuple(imports)))
