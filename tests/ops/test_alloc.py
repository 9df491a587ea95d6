"""lutcore's caching allocator for array data (lutcore._alloc, csrc/core/alloc.h):
scoped to lutcore's calls, correct contents through malloc/calloc/realloc/free,
blocks reused across steps, a byte limit, frees from other threads, the
LUTCORE_REUSE_MEMORY=0 switch, and a model step's bits unchanged by it."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name

import lutcore
from lutcore import _alloc
from lutcore.models import MambaConfig, MambaLM

BIG = 1 << 20            # elements: 4 MiB of float32, well above the 256 KiB threshold


@pytest.fixture(autouse=True)
def fresh_cache():
    lutcore.empty_cache()
    _alloc.set_cache_limit(2 << 30)
    yield
    lutcore.empty_cache()
    _alloc.set_cache_limit(2 << 30)


def test_scoped_to_lutcore_calls():
    assert get_handler_name() == "default_allocator"
    with _alloc.reuse():
        assert get_handler_name() == "lutcore_cache"
        a = np.ones(BIG, np.float32)
    assert get_handler_name() == "default_allocator"
    assert get_handler_name(a) == "lutcore_cache"        # an array keeps its allocator for life
    assert get_handler_name(np.ones(BIG, np.float32)) == "default_allocator"


def test_blocks_are_reused_and_calloc_zeroes():
    with _alloc.reuse():
        a = np.full(BIG, 7.0, np.float32)
        addr = a.ctypes.data
        del a
        assert lutcore.cache_info()["cached_blocks"] == 1
        b = np.zeros(BIG, np.float32)                    # the same block, zeroed again
        assert b.ctypes.data == addr and b.ctypes.data % 64 == 0
        assert not b.any()
        info = lutcore.cache_info()
        assert info["hits"] >= 1 and info["cached_blocks"] == 0


def test_smaller_request_takes_a_block_only_if_it_wastes_at_most_half():
    with _alloc.reuse():
        a = np.empty(BIG, np.float32)
        addr = a.ctypes.data
        del a
        small = np.empty(BIG // 4, np.float32)             # a quarter: a new block
        assert small.ctypes.data != addr
        half = np.empty(BIG // 2 + 1, np.float32)          # just over half: the cached one
        assert half.ctypes.data == addr


@pytest.mark.parametrize("n0, n1", [(10, 300_000), (300_000, 10), (300_000, 2_000_000), (2_000_000, 300_000)])
def test_realloc_keeps_contents(n0, n1):
    with _alloc.reuse():
        a = np.arange(n0, dtype=np.float64)
        a.resize(n1, refcheck=False)                     # numpy grows/shrinks through realloc
        k = min(n0, n1)
        assert np.array_equal(a[:k], np.arange(k, dtype=np.float64))
        if n1 > n0:
            assert not a[n0:].any()                      # ndarray.resize zero-fills the growth


def test_limit_evicts_and_zero_limit_caches_nothing():
    _alloc.set_cache_limit(6 << 20)
    with _alloc.reuse():
        xs = [np.empty(BIG, np.float32) for _ in range(3)]
        del xs
    info = lutcore.cache_info()
    assert info["cached_bytes"] <= 6 << 20 and info["cached_blocks"] == 1
    _alloc.set_cache_limit(12 << 20)
    with _alloc.reuse():
        xs = [np.empty(BIG, np.float32) for _ in range(3)]
        del xs
    assert lutcore.cache_info()["cached_blocks"] == 3
    _alloc.set_cache_limit(9 << 20)                       # lowering it frees the oldest only
    assert lutcore.cache_info()["cached_blocks"] == 2
    _alloc.set_cache_limit(0)
    assert lutcore.cache_info()["cached_blocks"] == 0
    with _alloc.reuse():
        a = np.empty(BIG, np.float32)
        del a
    assert lutcore.cache_info()["cached_blocks"] == 0
    with pytest.raises(ValueError, match="nbytes"):
        _alloc.set_cache_limit(-1)


def test_free_from_other_threads():
    with _alloc.reuse():
        arrays = [np.full(BIG // 4 + i, i, np.float32) for i in range(32)]

    def drop(chunk):
        for a in chunk:
            assert a[0] == a[-1]
        chunk.clear()

    chunks = [arrays[i::4] for i in range(4)]
    del arrays
    ts = [threading.Thread(target=drop, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert lutcore.cache_info()["cached_blocks"] == 32


def test_model_step_bits_same_with_and_without_reuse(rng):
    cfg = MambaConfig(d_model=32, n_layer=2, vocab_size=64, d_state=4, seed=3)
    ids = rng.integers(0, 64, (2, 24))
    tgt = rng.integers(0, 64, (2, 24))
    model = MambaLM(cfg)
    loss1, g1 = model.loss_and_grads(ids, tgt)
    loss2, g2 = model.loss_and_grads(ids, tgt)          # the second step reuses the first's blocks
    assert lutcore.cache_info()["hits"] > 0
    enabled = _alloc.ENABLED
    try:
        _alloc.ENABLED = False
        loss3, g3 = model.loss_and_grads(ids, tgt)
    finally:
        _alloc.ENABLED = enabled
    assert loss1 == loss2 == loss3
    for k in g1:
        assert np.array_equal(g1[k].view(np.uint32), g2[k].view(np.uint32)), k
        assert np.array_equal(g1[k].view(np.uint32), g3[k].view(np.uint32)), k


def test_env_switch_off():
    code = ("import numpy as np, lutcore; from lutcore import _alloc; "
            "from numpy._core.multiarray import get_handler_name\n"
            "with _alloc.reuse(): print(get_handler_name(), lutcore.config()['memory_reuse'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, LUTCORE_REUSE_MEMORY="0"))
    assert out.stdout.split() == ["default_allocator", "False"]


def test_large_blocks_start_on_a_huge_page_boundary():
    """On Linux blocks of 4 MiB and more are mapped 2 MiB aligned (and advised for huge
    pages): the data follows the 64-byte header.  Elsewhere, and below 4 MiB, blocks are
    64-byte aligned."""
    with _alloc.reuse():
        big = np.ones((2, 512, 1536), np.float32)          # 6 MiB: a scan's activation
        small = np.ones(BIG // 2, np.float32)               # 2 MiB
    align = (2 << 20) if sys.platform.startswith("linux") else 64
    assert big.ctypes.data % align == 64 % align             # just past the header
    assert small.ctypes.data % 64 == 0
    assert float(big.sum()) == big.size                     # the memory is ordinary memory
