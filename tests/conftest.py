"""Shared fixtures for the lutcore test-suite.

Design: the numpy oracles live in tests/reference/ and never import lutcore, so
this conftest imports lutcore lazily: the reference self-checks run even before
the native package is built.

The SIMDe test twins (lutcore._native._simde*) are not part of the package: the
first import of one builds them from this checkout's sources into a cache
(tests/simde_twins.py) and loads them from there.

Fixtures
    rng      np.random.Generator with a fixed seed per test
    simd     parametrised over lutcore.available_simd(); restores the previous path
    (autouse) restores audit rate 0 and the thread count after every test
"""
import os
import sys
import zlib

import numpy as np
import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _TESTS)  # for `import reference`, `_paths`, `simde_twins`
# the rooms (tests/ops, tests/pipeline, ...): a test module may import another's helpers and
# fixtures by its name (test_pipeline_models.hf_model) whichever room it sits in
ROOMS = ("bodies", "cli", "models", "ops", "package", "pipeline", "search", "torch", "train", "units")
sys.path[1:1] = [os.path.join(_TESTS, d) for d in ROOMS]

import simde_twins  # noqa: E402

simde_twins.install()   # `from lutcore._native import _simde` builds the twins on first use


def pytest_configure(config):
    capman = config.pluginmanager.getplugin("capturemanager")

    def say(msg):   # the build's progress reaches the terminal even while output is captured
        if capman is not None:
            with capman.global_and_fixture_disabled():
                print(msg, file=sys.stderr, flush=True)
        else:
            print(msg, file=sys.stderr, flush=True)
    simde_twins._say.hook = say


def _lutcore_or_none():
    try:
        import lutcore
        return lutcore
    except Exception:  # not built yet: only the reference self-checks can run
        return None


@pytest.fixture
def rng(request):
    # Fixed seed, different per test function (stable across runs and processes).
    return np.random.default_rng(zlib.crc32(request.node.name.encode()) & 0xFFFFFFFF)


def pytest_generate_tests(metafunc):
    if "simd" in metafunc.fixturenames:
        lc = _lutcore_or_none()
        names = list(lc.available_simd()) if lc is not None else ["<unbuilt>"]
        metafunc.parametrize("simd", names, indirect=True)


@pytest.fixture
def simd(request):
    import lutcore
    prev = lutcore.get_simd()
    lutcore.set_simd(request.param)
    try:
        yield request.param
    finally:
        lutcore.set_simd(prev)


@pytest.fixture
def one_blas_thread():
    """Tiny matmuls: one BLAS thread (BLAS/OpenMP spin-waits only cost time on a busy
    2-core machine; no result depends on it)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1, user_api="blas"):
        yield


@pytest.fixture(autouse=True)
def _restore_global_state():
    lc = sys.modules.get("lutcore")
    prev_threads = lc.get_num_threads() if lc is not None else None
    yield
    lc = sys.modules.get("lutcore")
    if lc is not None:
        lc.set_audit(0)
        if prev_threads is not None:
            lc.set_num_threads(prev_threads)


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster (2 CPUs) for one test module, shut down after it unless one was
    already running."""
    import ray
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()
