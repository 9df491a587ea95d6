"""The kernel rooms (lutcore/ops/<family>.py): each checks what a caller can get wrong before
C sees it, equals the native call it wraps, and reads the thread count of the enclosing
scope; units resolved once are not resolved again per call; the blocks of a model and the
Trainer's optimizer keep no thread count of their own (docs/DESIGN.md, "The Python layers",
"Threads", "Units and None")."""
import numpy as np
import pytest

import lutcore
from lutcore import _threads
from lutcore.ops import decode, gradtables, optim, quant, rows


# ------------------------------------------------------------------ checks before C
def test_optim_room_checks_the_tensor_lists():
    p, g, m, v = (np.zeros(5, np.float32) for _ in range(4))
    hp = (0.9, 0.999, 1e-8, 1e-3, 0.0, 0.0, 0.1, 0.001, 1.0)
    with pytest.raises(ValueError, match=r"^gs\[0\]: expected 5 values like ps\[0\], got 4"):
        optim.adamw_update([p], [np.zeros(4, np.float32)], [m], [v], *hp)
    with pytest.raises(ValueError, match=r"^ms\[0\]: expected a C-contiguous float32 array, got float64"):
        optim.adamw_update([p], [g], [np.zeros(5)], [v], *hp)
    ro = np.zeros(5, np.float32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match=r"^vs\[0\]: is read-only"):
        optim.adamw_update([p], [g], [m], [ro], *hp)
    with pytest.raises(ValueError, match=r"^vs: expected 1 arrays like ps, got 0"):
        optim.adamw_step([p], [g], [m], [], *hp[:-1], 1.0, 0.0, 2.0 ** 60)
    assert optim.sumsq([np.arange(3.0)]) == [5.0]


def test_quant_room_checks_buffers_and_equals_qmatmul(rng):
    x = rng.standard_normal((5, 70)).astype(np.float32)
    w = rng.standard_normal((70, 9)).astype(np.float32)
    with pytest.raises(ValueError, match=r"^q: expected shape \(5, 96\), got \(5, 70\)"):
        quant.quantize_rows(x, 32, q=np.empty((5, 70), np.int8))
    with pytest.raises(ValueError, match=r"^x: expected a C-contiguous float32 array"):
        quant.quantize_rows(x.T, 32)
    qa, sa, bad = quant.quantize_rows(x, 32)
    qb, sb, _ = quant.quantize_cols(w, 32)
    assert bad == 0 and qa.shape == (5, 96) and sb.shape == (3, 9)
    for name in ("exact", "mitchell"):
        u = lutcore.units.resolve(name)
        want = lutcore.qmatmul(x, w, u, 32)
        y = np.empty((5, 9), np.float32)
        if u.kernel_path == "exact":
            bp, _ = lutcore.ops.gemm.pack_panels(qb, 32, 32, 1)
            quant.qmatmul_exact(y, qa, sa, bp, quant.pack_scales(sb), 32)
        else:
            quant.qmatmul_table(y, qa, sa, qb, sb, u.kernel_table, 32)
        assert np.array_equal(y, want), name
    with pytest.raises(ValueError, match=r"^qb: expected shape \(96, 9\)"):
        quant.qmatmul_table(y, qa, sa, qb[:64], sb, u.kernel_table, 32)


def test_rows_room_checks_scores_and_keeps_the_bits(rng):
    s = rng.standard_normal((2, 6, 7)).astype(np.float32)
    with pytest.raises(ValueError, match=r"^s: expected a writeable C-contiguous float32 \(KV, R, S\) array"):
        rows.softmax_causal(s.astype(np.float64), 3, pos=4)
    want = s.copy()
    from lutcore._native import softmax as native
    native.softmax_causal(want, 3, 4, 2, lutcore._simd.isa(), 1)
    got = rows.softmax_causal(s.copy(), 3, pos=4, window=2, threads=2)
    assert np.array_equal(got, want)
    x = rng.standard_normal((3, 4, 16)).astype(np.float32)
    with pytest.raises(ValueError, match=r"^out: expected a writeable C-contiguous float32 array of shape"):
        rows.rmsnorm(x, np.ones(16, np.float32), 1e-5, out=np.empty((3, 4, 15), np.float32))


def test_decode_room_checks_what_the_native_objects_point_into():
    with pytest.raises(ValueError, match=r"^panels: expected at least 32 values, got 16"):
        decode.float_linear(np.zeros(16, np.float32), 4, 8)
    with pytest.raises(ValueError, match=r"^bias: expected \(8,\)"):
        decode.float_linear(np.zeros(32, np.float32), 4, 8, np.zeros(7, np.float32))
    with pytest.raises(ValueError, match=r"^buffers: path 2 needs"):
        decode.q8_linear(2, 4, 8, {"qa": np.zeros(32, np.int8)}, 32, 0)
    lin = decode.float_linear(np.zeros(64, np.float32), 8, 8)
    sc = decode.scratch(8, 2, 1, 4, 4, 16)
    with pytest.raises(ValueError, match=r"^n2w: expected \(8,\)"):
        decode.layer(lin, lin, lin, lin, np.ones(8, np.float32), np.ones(7, np.float32), 2, 1, 4, 4, 1e-5, 1.0, 0, sc)
    with pytest.raises(ValueError, match=r"^scratch\['kt'\]"):
        decode.layer(lin, lin, lin, lin, np.ones(8, np.float32), np.ones(8, np.float32), 2, 1, 4, 4, 1e-5, 1.0, 0,
                     dict(sc, kt=np.zeros(1, np.float32)))


def test_gradtables_room_numpy_sums_are_the_native_bits(rng, monkeypatch):
    qx = rng.integers(-128, 128, (9, 37)).astype(np.int8)
    qw = rng.integers(-127, 128, (5, 37)).astype(np.int8)
    w = rng.standard_normal((9, 5)).astype(np.float32)
    t = rng.standard_normal(65536).astype(np.float32)
    with pytest.raises(ValueError, match=r"^qx, qw, w, table: expected"):
        gradtables.table_pass(0, qx, qw[:, :30], w, t)
    got = [gradtables.table_pass(k, qx, qw, w, t, threads=2) for k in (0, 1)]
    monkeypatch.setattr(gradtables, "_gt", None)
    assert not gradtables.native()
    for k in (0, 1):
        assert np.array_equal(gradtables.table_pass(k, qx, qw, w, t).view(np.int32), got[k].view(np.int32))


# ------------------------------------------------------------------ threads: the scope
def test_rooms_read_the_scope_and_an_explicit_count_wins():
    a = np.ones((4, 8), np.float32)
    with _threads.record() as calls:
        with _threads.scope(2):
            rows.rmsnorm(a, np.ones(8, np.float32), 1e-5)
            quant.quantize_rows(a, 32)
            optim.sumsq([a])
            quant.quantize_rows(a, 32, threads=1)
    assert [n for _, n in calls] == [2, 2, 2, 1], calls


def test_blocks_and_the_trainers_optimizer_keep_no_thread_count():
    from lutcore.models import MambaConfig, MambaLM
    from lutcore.train import AdamW, Trainer
    m = MambaLM(MambaConfig(vocab_size=256, d_model=16, n_layer=2, d_state=4), threads=2)
    assert m.threads == 2 and all(b.threads is None for b in m.blocks)
    tr = Trainer(m, threads=2)
    assert tr.threads == 2 and tr.optimizer.threads is None
    p = {"w": np.ones(7, np.float32)}
    g = {"w": np.full(7, 0.5, np.float32)}
    for threads, want in ((None, 2), (1, 1)):      # None: the enclosing scope's; a number wins
        with _threads.record() as calls, _threads.scope(2):
            AdamW(p, threads=threads).step(g)
        assert {n for f, n in calls if f.startswith("optim.")} == {want}, calls


# ------------------------------------------------------------------ units: resolved once
def test_a_resolved_units_is_not_resolved_again_per_call(monkeypatch):
    """A Units (what conversion / construction resolved) reaches the kernels with no call to
    a resolver on the way: lut_gemm, qmatmul, requant, relu8, the torch layers."""
    import torch                              # the test extra installs it
    import lutcore.ops.elementwise as ew
    import lutcore.ops.gemm as gemm
    import lutcore.quant as q
    import lutcore.torch.functional as fn
    from lutcore.torch import ApproxLinear, lut_linear
    u = lutcore.units.resolve("mitchell")
    layer = ApproxLinear(16, 5, units="mitchell", threads=1)
    x = torch.randn(3, 16, requires_grad=True)

    def refuse(*a, **k):
        raise AssertionError("resolve called on the per-call path")
    for mod, name in ((gemm, "_resolve_units"), (q, "_resolve_units"), (ew, "_resolve_units"),
                      (fn, "resolve_units")):
        monkeypatch.setattr(mod, name, refuse)
    a = np.arange(-30, 30, dtype=np.int8).reshape(6, 10)
    lutcore.lut_gemm(a, a.T.copy(), u)
    lutcore.qmatmul(np.ones((2, 40), np.float32), np.ones((40, 3), np.float32), u)
    lutcore.requant(np.arange(10, dtype=np.int32), 2, u)
    lutcore.relu8(a, u)
    layer(x).sum().backward()
    lut_linear(x, layer.weight, None, u)
