"""UnitMatmul's table backward (unit_backward="table", docs/DESIGN.md "Gradient tables",
the block-scaled form) against a separately written numpy reference, same bits at 1 and
2 threads, a float64 finite-difference check on a smooth interpolated table, and the
models / `lutcore compare --backward table` wiring."""
import json

import numpy as np
import pytest

from lutcore.models.unitmm import UnitMatmul, unit_backward_arg
from lutcore.quant import quantize
from lutcore.units import Units


def _ref(dy, x, w, units, block):
    """Plain loops: dX[m, k] = sum_n dY sb Ga, dW[n, k] = sum_m dY sa Gb (float64)."""
    ga, gb = units.gradients(1)
    qa, qw = quantize(x, block), quantize(w, block)
    M, K = x.shape
    N = w.shape[0]
    dx = np.zeros((M, K))
    dw = np.zeros((N, K))
    for k in range(K):
        bk = k // block
        a = qa.q[:, k].view(np.uint8).astype(int)
        b = qw.q[:, k].view(np.uint8).astype(int)
        G_a = ga[a[:, None], b[None, :]].astype(np.float64)        # (M, N)
        G_b = gb[a[:, None], b[None, :]].astype(np.float64)
        dx[:, k] = (dy * qw.scale[:, bk][None, :] * G_a).sum(1)
        dw[:, k] = (dy * qa.scale[:, bk][:, None] * G_b).sum(0)
    return dw, dx


def _units(seed):
    rng = np.random.default_rng(seed)
    a = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)
    exact = a[:, None] * a[None, :]
    return Units.from_mul((exact + rng.integers(-40, 40, (256, 256))).reshape(65536))   # asymmetric, jagged


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (7, 33, 5), (3, 70, 9), (17, 64, 2)])
def test_table_backward_matches_reference(M, K, N):
    rng = np.random.default_rng(M * 100 + K + N)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    dy = rng.standard_normal((M, N)).astype(np.float32)
    u = _units(K)
    mm = UnitMatmul(u, unit_backward="table")
    dw, dx = mm.backward(dy, x, w)
    rw, rx = _ref(dy.astype(np.float64), x, w, u, 32)
    assert dw.shape == (N, K) and dx.shape == (M, K) and dw.dtype == np.float32
    np.testing.assert_allclose(dx, rx, rtol=2e-5, atol=1e-5 * np.abs(rx).max())
    np.testing.assert_allclose(dw, rw, rtol=2e-5, atol=1e-5 * np.abs(rw).max())
    gw, none = mm.backward(dy, x, w, need_dx=False)
    assert none is None and np.array_equal(gw, dw)


def test_same_bits_at_1_and_2_threads_and_numpy_fallback(monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((41, 97)).astype(np.float32)
    w = rng.standard_normal((23, 97)).astype(np.float32)
    dy = rng.standard_normal((41, 23)).astype(np.float32)
    u = _units(1)
    r1 = UnitMatmul(u, unit_backward="table", threads=1).backward(dy, x, w)
    r2 = UnitMatmul(u, unit_backward="table", threads=2).backward(dy, x, w)
    from lutcore.ops import gradtables as room
    monkeypatch.setattr(room, "_gt", None)                             # the numpy fallback: same order
    r3 = UnitMatmul(u, unit_backward="table", threads=1).backward(dy, x, w)
    for a, b, c in zip(r1, r2, r3):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert np.array_equal(a.view(np.uint32), c.view(np.uint32))


def test_finite_differences_on_a_smooth_interpolated_table():
    """Finite differences (float64) of the contract's interpolant
    L(x, w) = sum dY[m, n] sum_b sa[m, b] sb[b, n] sum_{k in b} F(x[m, k] / sa, w[n, k] / sb)
    (scales held fixed) against unit_backward="table" with Ga, Gb = F's partials on the grid,
    at x, w on the grid (codes times the scales)."""
    from reference.smooth_table import F as F_, smooth_units
    u = smooth_units()
    rng = np.random.default_rng(7)
    M, K, N, blk = 3, 40, 4, 32
    nb = -(-K // blk)

    def on_grid(R):
        q = rng.integers(-127, 128, (R, K)).astype(np.float64)
        q[:, 0], q[:, blk] = 127, -127                            # each block's amax: scale = s exactly
        s = rng.uniform(0.5, 2, (R, nb)) / 127
        return (q * np.repeat(s, blk, axis=1)[:, :K]).astype(np.float32)

    x, w = on_grid(M), on_grid(N)
    dy = rng.normal(size=(M, N))
    sa = quantize(x, blk).scale.astype(np.float64)[:, :nb]
    sw = quantize(w, blk).scale.astype(np.float64)[:, :nb]
    ka = np.arange(K) // blk

    def L(xv, wv):
        sak, swk = sa[:, ka], sw[:, ka]                           # (M, K), (N, K)
        y = (sak[:, None, :] * swk[None] * F_(xv[:, None, :] / sak[:, None, :], (wv / swk)[None])).sum(-1)
        return float((dy * y).sum())

    dw, dx = UnitMatmul(u, unit_backward="table").backward(dy.astype(np.float32), x, w)
    x0, w0 = x.astype(np.float64), w.astype(np.float64)
    fx, fw = np.zeros_like(x0), np.zeros_like(w0)
    for arr, out, sc, f in ((x0, fx, sa, lambda t: L(t, w0)), (w0, fw, sw, lambda t: L(x0, t))):
        for idx in np.ndindex(arr.shape):
            e = 1e-3 * sc[idx[0], idx[1] // blk]
            p, m = arr.copy(), arr.copy()
            p[idx] += e
            m[idx] -= e
            out[idx] = (f(p) - f(m)) / (2 * e)
    np.testing.assert_allclose(dx, fx, rtol=1e-4, atol=1e-4 * np.abs(fx).max())
    np.testing.assert_allclose(dw, fw, rtol=1e-4, atol=1e-4 * np.abs(fw).max())


def test_unit_backward_arg():
    assert unit_backward_arg(False) is False and unit_backward_arg(True) is True
    assert unit_backward_arg("table") == "table"
    with pytest.raises(TypeError, match=r"unit_backward: expected True or False \(or 'table': the gradient tables\), got 'tabel'"):
        unit_backward_arg("tabel")


def test_gpt_and_mamba_train_through_the_tables():
    from lutcore.models.gpt import GPT, GPTConfig
    m = GPT(GPTConfig(vocab=11, dim=16, heads=2, layers=1, context=8), units="mitchell",
            unit_backward="table")
    assert m.unit_backward == "table"
    assert all(mm.unit_backward == "table" for mm in m._mms.values() if mm is not None)
    with pytest.raises(TypeError, match="unit_backward"):
        GPT(GPTConfig(vocab=11, dim=16, heads=2, layers=1, context=8), units="mitchell",
            unit_backward="yes")


def test_compare_table_arm_and_cli(tmp_path, capsys):
    from lutcore.cli import main
    from lutcore.experiment import compare
    kw = dict(steps=4, dim=16, context=8, batch=2, layers=1, heads=2, threads=1)
    r = compare(units=["mitchell"], backward="table", **kw)
    assert [x.label for x in r.runs] == ["float", "mitchell fwd", "mitchell fwd+bwd", "mitchell fwd+table"]
    assert r.runs[3].unit_backward == "table" and r.config["backward"] == "table"
    assert r.runs[3].losses[0] == r.runs[1].losses[0]                  # the same forward at step 0
    assert r.runs[3].losses[1:] != r.runs[1].losses[1:]                # a different backward
    again = compare(units=["mitchell"], backward="table", **{**kw, "threads": 2})
    assert again.runs[3].losses == r.runs[3].losses                    # the same bits at 2 threads
    with pytest.raises(ValueError, match="backward: expected 'units' or 'table', got 'ste'"):
        compare(units=["mitchell"], backward="ste", **kw)
    out = tmp_path / "cmp"
    assert main(["compare", "--units", "mitchell", "--backward", "table", "--steps", "3", "--dim", "16",
                 "--context", "8", "--batch", "2", "--layers", "1", "--threads", "1", "--out", str(out)]) == 0
    assert "mitchell fwd+table" in capsys.readouterr().out
    d = json.loads((out / "compare.json").read_text())
    assert [x["unit_backward"] for x in d["runs"]] == [False, False, True, "table"]
    r = compare(model="mamba", units=["mitchell"], backward="table", **{**kw, "heads": 1})
    assert r.runs[3].label == "mitchell fwd+table" and np.isfinite(r.runs[3].losses).all()


def test_checkpoint_keeps_the_table_backward(tmp_path):
    from lutcore.models.gpt import GPT, GPTConfig
    from lutcore.train.trainer import Trainer
    tr = Trainer(GPT(GPTConfig(vocab=256, dim=16, heads=2, layers=1, context=8), units="mitchell",
                     unit_backward="table"), lr=1e-2)
    tr.save_checkpoint(tmp_path / "ck")
    meta = json.loads((tmp_path / "ck" / "trainer.json").read_text())
    assert meta["unit_backward"] == "table"
    back = Trainer.resume(tmp_path / "ck", units="mitchell")
    assert back.model.unit_backward == "table"
    meta["unit_backward"] = "tables"
    (tmp_path / "ck" / "trainer.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="unit_backward"):
        Trainer.resume(tmp_path / "ck", units="mitchell")
