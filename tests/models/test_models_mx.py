"""lutcore's models through MX units (lutcore.models.mxmm.MXMatmul; GPT / MambaLM with units="mx...")
against the contract, with the numpy oracle of tests/reference/mxunits_ref.py:

* MXMatmul.forward(x, w) = units.matmul(x, w.T): x rows and w rows quantized along K, bit for bit;
* backward True: dX = units.matmul(dY, w), dW = units.matmul(dY^T, x), bit for bit;
* backward "table": dX[m, k] = sum_n dY[m, n] sb[b(k), n] Ga[ca[m, k], cb[n, k]] and dW likewise with
  Gb and sa, each sum in index order in float32, bit for bit; for the exact multiplier that is the
  straight-through gradient at the dequantized operands (the same bits as that float32 sum);
* backward False: the float gradients (dY w, dY^T x) within float32 summation;
* GPT end to end: finite loss and gradients in every backward mode, the same bits at 1 and 2
  threads, per-layer mappings (the head alone through MX: the float model's final features times
  the tied embedding through the unit, bit for bit), attention's q k^T / p v through MX units (the
  products units.matmul(q, k^T) and the causal units.values(p, v)); MambaLM through MX units likewise.

Error budgets (named):
    STE_REL         backward=False vs float64 dY w / dY^T x: float32 sums of a few dozen terms
    MX_ATTN_NMSE    NMSE of the logits with block 0's q k^T and p v through mxfp8 vs float (measured
                    1.0e-3 on this model; mxint8 4e-5, mxfp4 1.6e-2)
    MX_FP8_NMSE     NMSE of the logits through mxfp8 everywhere vs float (measured 8e-3; with attention's
                    products too 1.3e-2)
"""
import numpy as np
import pytest

import lutcore
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.models.mxmm import MXMatmul
from lutcore.mx import mx_quantize
from lutcore.units.fpmul import FPUnit
from lutcore.units.mxunits import MXUnits
from reference import mxunits_ref as R
from reference.mx_values import assert_bits, bits, data, mm_ref, table_of, values_ref  # noqa: F401

STE_REL = 1e-5
MX_ATTN_NMSE = 5e-3
MX_FP8_NMSE = 4e-2

SHAPES = [(1, 1, 1), (7, 31, 33), (33, 33, 7), (1, 65, 7), (7, 100, 1), (33, 100, 33)]   # (M, K, N)
SPECS = ["mxfp8", "mxfp8:mitchell", "mxfp4:lmul", "mxint8:truncated:2", "mxfp6", "mxfp8xfp4:mitchell"]


@pytest.fixture(autouse=True)
def _one_thread(one_blas_thread):
    """Tiny problems: one lutcore thread (thread independence is tested explicitly)."""
    prev = lutcore.get_num_threads()
    lutcore.set_num_threads(1)
    yield
    lutcore.set_num_threads(prev)


def table_ref(u, dy, x, w):
    """(dW, dX) of the "table" backward (the oracle's gradient tables of FPUnit's products)."""
    qx = mx_quantize(x, u.a.name, u.block, axis=1)
    qw = mx_quantize(w, u.b.name, u.block, axis=1)           # w (N, K): per output row, along K
    Ga, GbT = R.gradient_tables_ref(table_of(u), u.a.values(), u.b.values())
    return R.table_backward_ref(dy, qx.codes, qx.scales, qw.codes, qw.scales, Ga, GbT, x.shape[1], u.block)


# ------------------------------------------------------------------ MXMatmul
@pytest.mark.parametrize("spec", SPECS)
def test_forward_bits(rng, spec):
    u = MXUnits.parse(spec)
    for M, K, N in SHAPES:
        x, w = data(rng, (M, K)), data(rng, (N, K))
        for ub in (False, True, "table"):
            y = MXMatmul(u, ub).forward(x, w)
            assert_bits(y, mm_ref(u, x, np.ascontiguousarray(w.T)), f"{spec} {ub} M{M} K{K} N{N}")


@pytest.mark.parametrize("spec", SPECS)
def test_units_backward_bits(rng, spec):
    u = MXUnits.parse(spec)
    mm = MXMatmul(u, True)
    for M, K, N in SHAPES:
        x, w, dy = data(rng, (M, K)), data(rng, (N, K)), data(rng, (M, N))
        dW, dX = mm.backward(dy, x, w, True)
        assert_bits(dX, mm_ref(u, dy, w), f"{spec} dX M{M} K{K} N{N}")
        assert_bits(dW, mm_ref(u, np.ascontiguousarray(dy.T), x), f"{spec} dW M{M} K{K} N{N}")
        dW2, dX2 = mm.backward(dy, x, w, False)
        assert dX2 is None
        assert_bits(dW2, dW, "need_dx=False")


@pytest.mark.parametrize("spec", SPECS + ["mxfp8e5m2:lmul"])
def test_table_backward_bits(rng, spec):
    u = MXUnits.parse(spec)
    mm = MXMatmul(u, "table")
    for M, K, N in SHAPES:
        x, w, dy = data(rng, (M, K)), data(rng, (N, K)), data(rng, (M, N))
        dW, dX = mm.backward(dy, x, w, True)
        rW, rX = table_ref(u, dy, x, w)
        assert_bits(dX, rX, f"{spec} dX M{M} K{K} N{N}")
        assert_bits(dW, rW, f"{spec} dW M{M} K{K} N{N}")
        dW2, dX2 = mm.backward(dy, x, w, False)
        assert dX2 is None
        assert_bits(dW2, rW, "need_dx=False")
        dW3, dX3 = mm.table_backward(dy, x, w)
        assert_bits(dW3, rW, "table_backward")
        assert_bits(dX3, rX, "table_backward")


@pytest.mark.parametrize("spec", ["mxfp8", "mxfp4", "mxint8", "mxfp6e3m2", "mxfp8xint8"])
def test_exact_table_backward_is_the_ste_at_the_quantized_operands(rng, spec):
    """Exact multiplier: Ga = the other operand's value, so dX = sum_n dY[m, n] Wq[n, k] and
    dW = sum_m dY[m, n] Xq[m, k] (Wq, Xq the dequantized operands), each in index order, float32."""
    u = MXUnits.parse(spec)
    mm = MXMatmul(u, "table")
    for M, K, N in SHAPES:
        x, w, dy = data(rng, (M, K)), data(rng, (N, K)), data(rng, (M, N))
        xq = mx_quantize(x, u.a.name, 32, axis=1).dequantize()
        wq = mx_quantize(w, u.b.name, 32, axis=1).dequantize()
        dW, dX = mm.backward(dy, x, w, True)
        want_dx = R.index_order_sum(dy[:, :, None] * wq[None, :, :], axis=1)       # (M, N, K) over n
        want_dw = R.index_order_sum(dy[:, :, None] * xq[:, None, :], axis=0)       # (M, N, K) over m
        assert_bits(dX, want_dx, f"{spec} dX M{M} K{K} N{N}")
        assert_bits(dW, want_dw, f"{spec} dW M{M} K{K} N{N}")


def test_ste_backward_is_the_float_gradient(rng):
    u = MXUnits.parse("mxfp4:mitchell")
    mm = MXMatmul(u, False)
    for M, K, N in SHAPES:
        x, w, dy = data(rng, (M, K)), data(rng, (N, K)), data(rng, (M, N))
        dW, dX = mm.backward(dy, x, w, True)
        for got, want in ((dX, dy.astype(np.float64) @ w), (dW, dy.T.astype(np.float64) @ x)):
            assert got.dtype == np.float32 and got.shape == want.shape
            scale = max(np.abs(dy).max() * max(np.abs(x).max(), np.abs(w).max()) * max(M, N), 1e-30)
            assert np.abs(got - want).max() <= STE_REL * scale


@pytest.mark.parametrize("ub", [False, True, "table"])
def test_mxmatmul_same_bits_at_1_and_2_threads(rng, ub):
    u = MXUnits.parse("mxfp8:lmul")
    x, w, dy = data(rng, (70, 130)), data(rng, (45, 130)), data(rng, (70, 45))
    out = []
    for n in (1, 2):
        mm = MXMatmul(u, ub, threads=n)
        out.append((mm.forward(x, w),) + tuple(mm.backward(dy, x, w, True)))
    for a, b in zip(*out):
        assert_bits(a, b, f"{ub}")


def test_a_nan_block_gives_nan_table_gradients_there(rng):
    """A NaN in x's row 1, block 1: that block's scale is NaN, so sa there is NaN and dW's columns
    of block 1 (every n) are NaN; dX reads w's scales only and stays finite."""
    u = MXUnits.parse("mxfp8")
    x, w, dy = data(rng, (3, 40)), data(rng, (4, 40)), data(rng, (3, 4))
    x[1, 35] = np.nan
    dW, dX = MXMatmul(u, "table").backward(dy, x, w, True)
    rW, rX = table_ref(u, dy, x, w)
    assert np.isnan(rW[:, 32:]).all() and not np.isnan(rW[:, :32]).any() and not np.isnan(rX).any()
    assert np.array_equal(np.isnan(dW), np.isnan(rW)) and np.array_equal(np.isnan(dX), np.isnan(rX))
    fin = ~np.isnan(rW)
    assert np.array_equal(bits(dW[fin]), bits(rW[fin]))
    assert_bits(dX, rX, "dX")


# ------------------------------------------------------------------ GPT
CFG = GPTConfig(vocab=13, dim=16, context=9, layers=2, heads=2, mlp_ratio=2, seed=3)


def _ids(seed=0, B=2, L=9):
    r = np.random.default_rng(seed)
    return r.integers(0, CFG.vocab, (B, L)), r.integers(0, CFG.vocab, (B, L))


def _perturbed(model, seed=5, scale=0.2):
    r = np.random.default_rng(seed)
    for p in model.parameters().values():
        p += (scale * r.standard_normal(p.shape)).astype(p.dtype)
    return model


@pytest.mark.parametrize("units", ["mxfp8", "mxfp4:mitchell", "mxint8:lmul@m10:promote=16"])
@pytest.mark.parametrize("ub", [False, True, "table"])
def test_gpt_trains_through_mx_units(units, ub):
    ids, tg = _ids()
    m = _perturbed(GPT(CFG, units=units, unit_backward=ub))
    assert all(isinstance(u, MXUnits) for u in m.assignment().values())
    loss, grads = m.loss_and_grads(ids, tg)
    assert np.isfinite(loss)
    for n, g in grads.items():
        assert np.isfinite(g).all(), n
        assert np.abs(g).max() > 0, n                          # every parameter gets a gradient
    f = _perturbed(GPT(CFG))
    assert abs(loss - f.loss(ids, tg)) < 0.5                   # near float's loss
    assert m.loss(ids, tg) == loss


def test_gpt_backward_modes_change_gradients_not_the_loss():
    ids, tg = _ids()
    res = {ub: _perturbed(GPT(CFG, units="mxfp4:mitchell", unit_backward=ub)).loss_and_grads(ids, tg)
           for ub in (False, True, "table")}
    assert res[False][0] == res[True][0] == res["table"][0]
    w = "h.0.mlp.fc.weight"
    assert not np.array_equal(res[False][1][w], res[True][1][w])
    assert not np.array_equal(res[False][1][w], res["table"][1][w])
    assert not np.array_equal(res[True][1][w], res["table"][1][w])


@pytest.mark.parametrize("ub", [False, True, "table"])
def test_gpt_same_bits_at_1_and_2_threads(ub):
    ids, tg = _ids()
    units = {"*": "mxfp8:mitchell", "h.0.attn.qk": "mxfp8", "h.1.attn.pv": "mxfp4"}
    out = []
    for n in (1, 2):
        m = _perturbed(GPT(CFG, units=units, unit_backward=ub, threads=n))
        loss, grads = m.loss_and_grads(ids, tg)
        out.append((m.forward(ids), loss, grads))
    assert_bits(out[0][0], out[1][0], "logits")
    assert out[0][1] == out[1][1]
    for n in out[0][2]:
        assert_bits(out[0][2][n], out[1][2][n], n)
    lutcore.set_num_threads(2)                                  # threads=None: lutcore's default
    m = _perturbed(GPT(CFG, units=units, unit_backward=ub))
    assert_bits(m.forward(ids), out[0][0], "logits at the default of 2")


def test_gpt_units_per_layer():
    m = GPT(CFG, units={"*": "mxfp4", "h.0.attn.qk": "mxfp8"})
    a = m.assignment(attention=True)
    assert a["h.0.attn.qk"] == MXUnits.parse("mxfp8")
    assert all(a[n] == MXUnits.parse("mxfp4") for n in m.layer_names())
    assert a["h.0.attn.pv"] is None and a["h.1.attn.qk"] is None and a["h.1.attn.pv"] is None
    ids, tg = _ids()
    loss, grads = m.loss_and_grads(ids, tg)
    assert np.isfinite(loss) and all(np.isfinite(g).all() for g in grads.values())
    # MX and integer units side by side
    m2 = GPT(CFG, units={"h.0.*": "mxfp8", "h.1.*": "exact"})
    a2 = m2.assignment()
    assert isinstance(a2["h.0.mlp.fc"], MXUnits) and not isinstance(a2["h.1.mlp.fc"], MXUnits)
    assert a2["lm_head"] is None
    assert np.isfinite(m2.loss_and_grads(ids, tg)[0])


@pytest.mark.parametrize("spec", ["mxfp8", "mxfp4:lmul"])
def test_gpt_head_alone_through_mx_is_units_matmul_of_the_float_features(spec):
    """Only lm_head through the unit: logits = units.matmul(hf, wte^T), hf the float model's final
    features (everything before the head is float, the same bits)."""
    ids, _ = _ids(B=3, L=7)
    f = _perturbed(GPT(CFG))
    m = _perturbed(GPT(CFG, units={"lm_head": spec}))
    hf = f._forward(ids, save=True)[1][1]                       # (B, L, C) the float final features
    u = MXUnits.parse(spec)
    want = mm_ref(u, hf.reshape(-1, CFG.dim), np.ascontiguousarray(f.parameters()["wte"].T))
    assert_bits(m.forward(ids).reshape(-1, CFG.vocab), want, spec)


@pytest.mark.parametrize("ub", [True, "table"])
def test_gpt_mlp_fc_alone_backward_through_the_units(ub):
    """Only h.1.mlp.fc through MX units: its weight gradient is the MXMatmul contract's of the
    layer's input m and output gradient dU as the model passes them (True: units.matmul(dU^T, m))."""
    ids, tg = _ids()
    u = MXUnits.parse("mxfp8:lmul")
    from lutcore.models import _layers as nn
    got = _perturbed(GPT(CFG, units={"h.1.mlp.fc": u.name}, unit_backward=ub)).loss_and_grads(ids, tg)[1]
    seen = {}
    saved = nn.linear_bwd

    def spy(dy, x, w, dw, db=None, mm=None, need_dx=True):
        if mm is not None:
            seen["dy"], seen["x"], seen["w"] = dy.reshape(-1, dy.shape[-1]).copy(), x.reshape(-1, x.shape[-1]).copy(), w
        return saved(dy, x, w, dw, db, mm, need_dx)
    import lutcore.models.gpt as G
    try:
        G.nn.linear_bwd = spy
        again = _perturbed(GPT(CFG, units={"h.1.mlp.fc": u.name}, unit_backward=ub)).loss_and_grads(ids, tg)[1]
    finally:
        G.nn.linear_bwd = saved
    assert_bits(again["h.1.mlp.fc.weight"], got["h.1.mlp.fc.weight"], "repeatable")
    dy, x, w = seen["dy"], seen["x"], seen["w"]
    assert np.array_equal(w, _perturbed(GPT(CFG)).parameters()["h.1.mlp.fc.weight"])    # the layer's weight
    want = mm_ref(u, np.ascontiguousarray(dy.T), x) if ub is True else table_ref(u, dy, x, w)[0]
    assert_bits(got["h.1.mlp.fc.weight"], want, "dW")


def test_gpt_attention_products_through_mx_units():
    """h.0.attn.qk / .pv through MX units: the block's attention is built from units.matmul(q, k^T)
    (scaled after the product, causal softmax) and units.values(p, v); the logits stay near float
    but are not float's."""
    import math

    from lutcore.models import _layers as nn
    from lutcore.models.gpt import _unit_attention
    ids, tg = _ids()
    spec = "mxfp8"
    u = MXUnits.parse(spec)
    m = _perturbed(GPT(CFG, units={"h.0.attn.qk": spec, "h.0.attn.pv": spec}))
    y_f = _perturbed(GPT(CFG)).forward(ids).astype(np.float64)
    nmse = {}
    for sp in ("mxint8", "mxfp8", "mxfp4"):
        y = _perturbed(GPT(CFG, units={"h.0.attn.qk": sp, "h.0.attn.pv": sp})).forward(ids).astype(np.float64)
        nmse[sp] = ((y - y_f) ** 2).sum() / (y_f ** 2).sum()
    assert 0 < nmse["mxfp8"] < MX_ATTN_NMSE, nmse
    assert 0 < nmse["mxint8"] < nmse["mxfp8"] < nmse["mxfp4"], nmse            # finer elements: nearer float
    loss, grads = m.loss_and_grads(ids, tg)
    assert np.isfinite(loss) and all(np.isfinite(g).all() for g in grads.values())
    # the first block's attention, from the products
    P = m.parameters()
    B, L = ids.shape
    H, hd = CFG.heads, CFG.dim // CFG.heads
    x = P["wte"][ids] + P["wpe"][:L]
    a, _ = nn.layernorm_fwd(x, P["h.0.ln1.weight"], P["h.0.ln1.bias"], CFG.ln_eps)
    qkv = nn.linear_fwd(a, P["h.0.attn.qkv.weight"], P["h.0.attn.qkv.bias"], None)
    qkv = np.ascontiguousarray(qkv.reshape(B, L, 3, H, hd).transpose(2, 0, 3, 1, 4))
    got, att = _unit_attention(qkv[0], qkv[1], qkv[2], u, u, "h.0.", None)
    for b in range(B):
        for h in range(H):
            q, k, v = qkv[0, b, h], qkv[1, b, h], qkv[2, b, h]
            s = mm_ref(u, q, np.ascontiguousarray(k.T)) * np.float32(1 / math.sqrt(hd))
            z = np.where(np.tril(np.ones((L, L), bool)), s.astype(np.float64), -np.inf)
            p = np.exp(z - z.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            assert np.allclose(att[b, h], p, atol=2e-6) and not np.triu(att[b, h], 1).any()
            assert_bits(got[b, h], values_ref(u, att[b, h], v), f"pv b{b} h{h}")


def test_gpt_mx_fp8_logits_near_float():
    ids, _ = _ids()
    f = _perturbed(GPT(CFG)).forward(ids).astype(np.float64)
    for units, budget in (("mxfp8", MX_FP8_NMSE), ({"*": "mxfp8", "*.qk": "mxfp8", "*.pv": "mxfp8"}, MX_FP8_NMSE)):
        y = _perturbed(GPT(CFG, units=units)).forward(ids).astype(np.float64)
        nmse = ((y - f) ** 2).sum() / (f ** 2).sum()
        assert 0 < nmse < budget, (units, nmse)


def test_gpt_mx_refusals():
    with pytest.raises(ValueError, match="two_pass"):
        GPT(CFG, units="mxfp8", two_pass=True)
    with pytest.raises(ValueError, match="mxfp9"):
        GPT(CFG, units="mxfp9")


# ------------------------------------------------------------------ MambaLM
MCFG = MambaConfig(d_model=16, n_layer=2, vocab_size=13, d_state=4, seed=2)


@pytest.mark.parametrize("ub", [False, True, "table"])
def test_mamba_through_mx_units(ub):
    ids, tg = _ids(L=8)
    out = []
    for n in (1, 2):
        m = MambaLM(MCFG, units="mxfp8:mitchell", unit_backward=ub, threads=n)
        assert all(isinstance(u, MXUnits) for u in m.assignment().values())
        loss, grads = m.loss_and_grads(ids, tg)
        assert np.isfinite(loss) and all(np.isfinite(g).all() for g in grads.values())
        out.append((m.forward(ids), loss, grads))
    assert_bits(out[0][0], out[1][0], "logits")
    assert out[0][1] == out[1][1]
    for n in out[0][2]:
        assert_bits(out[0][2][n], out[1][2][n], n)
    f = MambaLM(MCFG)
    assert abs(out[0][1] - f.loss(ids, tg)) < 0.5


@pytest.mark.parametrize("spec", ["mxfp4", "mxfp8:mitchell"])
def test_mamba_head_alone_through_mx_is_units_matmul_of_the_float_features(spec):
    ids, _ = _ids(L=8)
    f = MambaLM(MCFG)
    m = MambaLM(MCFG, units={"lm_head": spec})
    assert isinstance(m.assignment()["lm_head"], MXUnits)
    assert sum(u is not None for u in m.assignment().values()) == 1
    hf = f._forward(ids, save=False)[1][3]                      # (B, L, d_model) the float final features
    want = mm_ref(MXUnits.parse(spec), hf.reshape(-1, MCFG.d_model), np.ascontiguousarray(f.head_weight.T))
    assert_bits(m.forward(ids).reshape(-1, MCFG.vocab_size), want, spec)


def test_saved_mx_units_directory_as_the_models_units(tmp_path):
    u = MXUnits.parse("mxfp4:lmul@m9:promote=16")
    d = str(tmp_path / "u")
    u.save(d)
    ids, _ = _ids()
    by_name = _perturbed(GPT(CFG, units=u.name)).forward(ids)
    for units in (d, {"*": d}, u):
        m = _perturbed(GPT(CFG, units=units))
        assert all(v == u for v in m.assignment().values())
        assert_bits(m.forward(ids), by_name, str(units))
