"""Attention's two products through MX units (lutcore.torch.attention with lutcore.units.mxunits.MXUnits)
against numpy compositions written here from the module docstring of lutcore/torch/attention.py, over
the MX oracle of tests/reference/mxunits_ref.py (block sums exact, scales applied per block, blocks
added in order; the narrow register for a declared accumulator):

* forward: per (batch, kv head), the G query heads stacked as rows,
      qs = float32(q * float32(scaling)),  s = units_qk.matmul(qs, k^T)   (qs's rows and k's rows in
      blocks along D),  x = s + mask,  p = lutcore's softmax (masked positions 0, the row sum in
      order),  o = units_pv.values(p', v)  (causal: each position's values in blocks along D, their
      scales folded into p, p's rows in blocks along S aligned to position 0, one MX product per
      D-block) — bit for bit, inside transformers' Llama / GPT-2 and on odd shapes;
* backward "ste": float attention's gradient at the same q, k, v, bit for bit (model and function);
* backward "table": per product through ``MXUnits.gradients()`` (dA[m, k] = sum_n dY[m, n]
  sb[blk(k), n] Ga[ca[m, k], cb[k, n]], dB[k, n] = sum_m dY[m, n] sa[m, blk(k)] Gb[...], each sum
  in index order in float32), chained through the softmax's backward (dX = (dP - sum_s p dP) p, the
  sum in order) and dq = dqs * float32(scaling) — bit for bit, model and function, dropout included;
* ``unit_matmul`` / ``UnitMatmul`` through MX units, broadcast and 1-D: the forward per slice, the
  "table" gradients per slice summed in slice order, "ste" torch.matmul's;
* the same bits at 1 and 2 threads (products large enough that 2 threads run);
* MX units whose 0 x b is not 0 for a finite b are refused for attention, naming the product.
"""
import numpy as np
import pytest

import torch
import torch.nn.functional as F  # noqa: E402

import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutcore.mx import mx_quantize  # noqa: E402
from lutcore.torch import attention as A  # noqa: E402
from lutcore.units import resolve  # noqa: E402
from lutcore.units.fpmul import FPUnit  # noqa: E402
from lutcore.units.mxunits import MXUnits  # noqa: E402
from reference import mxunits_ref as R
from reference.mx_values import mm_ref, values_grads_ref, values_ref  # noqa: E402
from reference.asserts import assert_bits_equal  # noqa: E402
from test_torch_attention import LOWEST, gpt2, ids_and_mask, llama, padded_mask, rand, softmax_ref  # noqa: E402

MAPPING = {"*": "mxfp8", "*.qk": "mxfp8", "*.pv": "mxfp4"}
MODELS = {"llama": llama, "gpt2": gpt2}


def U(spec):
    return resolve(spec, mx=True)


# ----------------------------------------------------------------------------- the MX oracle


def table_grads_ref(u, dy, a, b):
    """(dA (M, K), dB (K, N)) of u.matmul(a, b) through the unit's gradient tables (the oracle's
    value-order differences of its table): y = a @ w^T with w = b^T, rows of both in blocks along K."""
    K = a.shape[1]
    qa = mx_quantize(np.ascontiguousarray(a, np.float32), u.a.name, u.block, axis=1)
    qw = mx_quantize(np.ascontiguousarray(b.T, np.float32), u.b.name, u.block, axis=1)
    Ga, GbT = R.gradient_tables_ref(u.mul.products, u.a.values(), u.b.values())
    dW, dX = R.table_backward_ref(dy, qa.codes, qa.scales, qw.codes, qw.scales, Ga, GbT, K, u.block)
    return dX, np.ascontiguousarray(dW.T)


def _np(t):
    return t.detach().numpy()


def _stack(x, b, g, G):
    """Query heads g*G .. g*G+G-1 of batch b stacked as rows: (G*T, D)."""
    return np.ascontiguousarray(x[b, g * G:(g + 1) * G].reshape(-1, x.shape[-1]))


def _mask_rows(mask, b, g, G, T, S):
    """The additive mask of the stacked rows (G*T, S) float32 (zeros without one)."""
    if mask is None:
        return np.zeros((G * T, S), np.float32)
    m = mask.numpy()[min(b, mask.shape[0] - 1)]                            # (1|H, T, S')
    heads = [m[min(h, m.shape[0] - 1)] for h in range(g * G, (g + 1) * G)]
    return np.ascontiguousarray(np.concatenate([np.broadcast_to(x, (T, x.shape[-1]))[:, :S] for x in heads]),
                                np.float32)


def forward_ref(q, k, v, mask, scaling, uqk, upv, drop=None):
    """out (B, T, H, Dv), p' (B, H, T, S) and, per (b, g), what the backward reads."""
    q, k, v = _np(q), _np(k), _np(v)
    B, H, T, D = q.shape
    KV, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // KV
    out = np.zeros((B, T, H, Dv), np.float32)
    P = np.zeros((B, H, T, S), np.float32)
    keep = {}
    for b in range(B):
        for g in range(KV):
            qs = (_stack(q, b, g, G) * np.float32(scaling)).astype(np.float32)         # (R, D)
            s = mm_ref(uqk, qs, k[b, g].T)                                            # (R, S)
            mk = _mask_rows(mask, b, g, G, T, S)
            p = softmax_ref((s + mk).astype(np.float32), mk <= LOWEST)
            pu = p if drop is None else (p * _stack(drop.numpy(), b, g, G)).astype(np.float32)
            o = values_ref(upv, pu, v[b, g])                                          # (R, Dv)
            for i in range(G):
                P[b, g * G + i] = pu[i * T:(i + 1) * T]
                out[b, :, g * G + i] = o[i * T:(i + 1) * T]
            keep[b, g] = (qs, p, pu)
    return out, P, keep


def table_chain_ref(q, k, v, mask, scaling, uqk, upv, dout, drop=None):
    """(dq, dk, dv) of the "table" backward (module docstring), per (b, g) on the stacked rows."""
    _, _, keep = forward_ref(q, k, v, mask, scaling, uqk, upv, drop)
    qn, kn, vn, dO = _np(q), _np(k), _np(v), _np(dout)
    B, H, T, D = qn.shape
    KV = kn.shape[1]
    G = H // KV
    dq, dk, dv = np.zeros(qn.shape, np.float32), np.zeros(kn.shape, np.float32), np.zeros(vn.shape, np.float32)
    for b in range(B):
        for g in range(KV):
            qs, p, pu = keep[b, g]
            go = np.concatenate([dO[b, :, h] for h in range(g * G, (g + 1) * G)])     # (R, Dv)
            dP, dv[b, g] = values_grads_ref(upv, go, pu, vn[b, g])
            if drop is not None:
                dP = (dP * _stack(drop.numpy(), b, g, G)).astype(np.float32)
            dot = R.index_order_sum((p * dP).astype(np.float32), axis=1)               # (R,)
            dS = ((dP - dot[:, None]).astype(np.float32) * p).astype(np.float32)
            dqs, dkt = table_grads_ref(uqk, dS, qs, kn[b, g].T)
            dk[b, g] = dkt.T
            dqg = (dqs * np.float32(scaling)).astype(np.float32)
            for i in range(G):
                dq[b, g * G + i] = dqg[i * T:(i + 1) * T]
    return dq, dk, dv


def float_grads(q, k, v, mask, scaling, dout, drop=None):
    xs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    o, _ = A.float_attention(*xs, mask, scaling, dropout_mask=drop)
    return [g.numpy() for g in torch.autograd.grad(o, xs, dout)]


# ----------------------------------------------------------------------------- inside transformers' models

@pytest.fixture
def calls(monkeypatch):
    """Every lut_attention call: {"args", "kw", "out", "p"} and, after a backward, "dout" / "dq" / "dk" /
    "dv" (hooks on the call's output and inputs: each input feeds attention alone)."""
    seen = []
    orig = A.lut_attention

    def spy(*args, **kw):
        out, p = orig(*args, **kw)
        rec = {"args": args, "kw": kw, "out": out.detach().clone(), "p": p.detach().clone()}
        if out.requires_grad:
            out.register_hook(lambda g: rec.__setitem__("dout", g.detach().clone()))
            for n, t in zip(("dq", "dk", "dv"), args[:3]):
                t.register_hook(lambda g, n=n: rec.__setitem__(n, g.detach().clone()))
        seen.append(rec)
        return out, p
    monkeypatch.setattr(A, "lut_attention", spy)
    return seen


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_model_attention_equals_the_mx_composition(kind, calls):
    model = lt.approximate(MODELS[kind](), MAPPING, attention=True)
    a = lt.assignment(model)
    att = [n for n in a if n.endswith((".qk", ".pv"))]
    assert len(att) == 4 and all(a[n].name == ("mxfp8" if n.endswith(".qk") else "mxfp4") for n in att)
    assert all(isinstance(u, MXUnits) for u in a.values())                       # the linears too
    ids, am = ids_and_mask()
    with torch.no_grad():
        model(ids, attention_mask=am)
    assert len(calls) == 2
    for c in calls:
        q, k, v, mask, scaling = c["args"]
        assert c["kw"]["qk_units"].name == "mxfp8" and c["kw"]["pv_units"].name == "mxfp4"
        want, wp, _ = forward_ref(q, k, v, mask, scaling, U("mxfp8"), U("mxfp4"))
        assert_bits_equal("out", c["out"].numpy(), want)
        assert_bits_equal("p", c["p"].numpy(), wp)
        assert (wp[1, :, :3] == 0).all() and (want[1, :3] == 0).all()          # padded queries: p = 0, out = 0


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_model_ste_backward_is_float_attentions_gradient(kind, calls):
    model = lt.approximate(MODELS[kind](), MAPPING, attention=True, backward="ste")
    ids, am = ids_and_mask()
    model(ids, attention_mask=am, labels=ids, use_cache=False).loss.backward()
    assert len(calls) == 2
    for c in calls:
        q, k, v, mask, scaling = c["args"]
        for n, want in zip(("dq", "dk", "dv"), float_grads(q, k, v, mask, scaling, c["dout"])):
            assert_bits_equal(n, c[n].numpy(), want)


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_model_table_backward_equals_the_chain(kind, calls):
    model = lt.approximate(MODELS[kind](), MAPPING, attention=True, backward="table")
    assert lt.backward_of(model)["model.layers.0.self_attn.qk" if kind == "llama" else "transformer.h.0.attn.qk"][0] \
        == "table"
    ids, am = ids_and_mask()
    model(ids, attention_mask=am, labels=ids, use_cache=False).loss.backward()
    assert len(calls) == 2
    for c in calls:
        q, k, v, mask, scaling = c["args"]
        want = table_chain_ref(q, k, v, mask, scaling, U("mxfp8"), U("mxfp4"), c["dout"])
        for n, w in zip(("dq", "dk", "dv"), want):
            assert_bits_equal(n, c[n].numpy(), w)
        ste = float_grads(q, k, v, mask, scaling, c["dout"])
        assert not np.array_equal(c["dq"].numpy(), ste[0])                    # not the straight-through one


# ----------------------------------------------------------------------------- lut_attention on odd shapes

def _mask(rng, B, T, S):
    """Additive (B, 1, T, S): causal with row 1 left-padded when the queries fit in S; otherwise
    random cannot-attend entries (-inf or float32's lowest) and small finite biases; every query
    keeps position 0 visible."""
    if T <= S:
        return padded_mask(B, T, S, pad=min(2, S - T)) if S > T else padded_mask(B, T, S, pad=0)
    m = (rng.standard_normal((B, 1, T, S)) * 0.5).astype(np.float32)
    cut = rng.random((B, 1, T, S)) < 0.4
    m[cut] = np.where(rng.random(cut.sum()) < 0.5, LOWEST, -np.inf)
    m[..., 0] = 0
    return torch.from_numpy(m)


SHAPES = [(T, S, D) for T in (1, 7, 33) for S in (1, 7, 33) for D in (8, 33)]


@pytest.mark.parametrize("T,S,D", SHAPES)
def test_lut_attention_odd_shapes_equal_the_composition(T, S, D):
    rng = np.random.default_rng(T * 1000 + S * 10 + D)
    B, KV, G, Dv = 2, 2, (1, 2)[(T + S + D) % 2], 5
    q, k, v = rand(rng, B, KV * G, T, D, scale=2), rand(rng, B, KV, S, D), rand(rng, B, KV, S, Dv, scale=3)
    mask = _mask(rng, B, T, S)
    uqk, upv = U("mxfp8"), U("mxfp4")
    out, p = A.lut_attention(q, k, v, mask, 0.3, qk_units=uqk, pv_units=upv)
    want, wp, _ = forward_ref(q, k, v, mask, 0.3, uqk, upv)
    assert_bits_equal("out", out.numpy(), want)
    assert_bits_equal("p", p.numpy(), wp)


@pytest.mark.parametrize("qk,pv", [("mxint8xfp8", "mxfp6:mitchell"), ("mxfp4:lmul", "mxfp8:mitchell@m10:promote=16"),
                                   ("mxfp8e5m2", "mxint8")])
def test_lut_attention_other_mx_units_and_a_bool_mask(qk, pv):
    """Mixed element formats, approximate multipliers, a narrow accumulator; a bool mask is the
    additive one (True: 0, False: lowest)."""
    rng = np.random.default_rng(5)
    B, KV, G, T, S, D, Dv = 2, 1, 3, 6, 37, 40, 7
    q, k, v = rand(rng, B, KV * G, T, D), rand(rng, B, KV, S, D, scale=2), rand(rng, B, KV, S, Dv)
    add = padded_mask(B, T, S, pad=3)
    uqk, upv = U(qk), U(pv)
    out, p = A.lut_attention(q, k, v, add > LOWEST, None, qk_units=qk, pv_units=pv)
    want, wp, _ = forward_ref(q, k, v, add, D ** -0.5, uqk, upv)
    assert_bits_equal("out", out.numpy(), want)
    assert_bits_equal("p", p.numpy(), wp)


# ----------------------------------------------------------------------------- backward of lut_attention

@pytest.mark.parametrize("G", [1, 2])
def test_ste_gradients_are_float_attentions(G):
    rng = np.random.default_rng(20 + G)
    B, KV, T, S, D, Dv = 2, 2, 5, 33, 33, 6
    q, k, v = (t.requires_grad_() for t in (rand(rng, B, KV * G, T, D), rand(rng, B, KV, S, D),
                                            rand(rng, B, KV, S, Dv)))
    mask = padded_mask(B, T, S, pad=4)
    dy = rand(rng, B, T, KV * G, Dv)
    drop = F.dropout(torch.ones(B, KV * G, T, S), 0.25, True)
    out, _ = A.lut_attention(q, k, v, mask, 0.4, qk_units="mxfp8", pv_units="mxfp4", dropout_mask=drop)
    out.backward(dy)
    for n, got, want in zip("qkv", (q.grad, k.grad, v.grad), float_grads(q, k, v, mask, 0.4, dy, drop)):
        assert_bits_equal(f"d{n}", got.numpy(), want)


@pytest.mark.parametrize("case", ["plain", "dropout", "gqa"])
def test_table_gradients_equal_the_chain(case):
    rng = np.random.default_rng({"plain": 30, "dropout": 31, "gqa": 32}[case])
    G = 3 if case == "gqa" else 1
    B, KV, T, S, D, Dv = 2, 2, 7, 37, 40, 9                                    # S, D across a block of 32
    q0, k0, v0 = rand(rng, B, KV * G, T, D, scale=2), rand(rng, B, KV, S, D), rand(rng, B, KV, S, Dv)
    mask = padded_mask(B, T, S, pad=5)                                         # every query sees a position
    drop = F.dropout(torch.ones(B, KV * G, T, S), 0.3, True) if case == "dropout" else None
    dy = rand(rng, B, T, KV * G, Dv)
    uqk, upv = U("mxfp8:mitchell"), U("mxfp4")
    q, k, v = (t.clone().requires_grad_() for t in (q0, k0, v0))
    out, p = A.lut_attention(q, k, v, mask, 0.35, qk_units=uqk, pv_units=upv, backward="table", dropout_mask=drop)
    want, wp, _ = forward_ref(q0, k0, v0, mask, 0.35, uqk, upv, drop)
    assert_bits_equal("out", out.detach().numpy(), want)
    assert_bits_equal("p", p.numpy(), wp)
    out.backward(dy)
    for n, got, w in zip("qkv", (q.grad, k.grad, v.grad), table_chain_ref(q0, k0, v0, mask, 0.35, uqk, upv, dy, drop)):
        assert_bits_equal(f"d{n}", got.numpy(), w)


def test_table_and_ste_mix_per_product_and_table_is_differentiable_once():
    rng = np.random.default_rng(33)
    B, KV, T, S, D = 1, 1, 4, 9, 16
    q0, k0, v0 = rand(rng, B, KV, T, D), rand(rng, B, KV, S, D), rand(rng, B, KV, S, D)
    dy = rand(rng, B, T, KV, D)
    uqk, upv = U("mxfp8"), U("mxfp4")
    # ("ste", "table"): dP through the tables, the scores' product straight through at qs and k
    q, k, v = (t.clone().requires_grad_() for t in (q0, k0, v0))
    out, _ = A.lut_attention(q, k, v, None, 0.25, qk_units=uqk, pv_units=upv, backward=("ste", "table"))
    out.backward(dy)
    _, _, keep = forward_ref(q0, k0, v0, None, 0.25, uqk, upv)
    qs, p, pu = keep[0, 0]
    dP, dv = values_grads_ref(upv, dy[0, :, 0].numpy(), pu, v0[0, 0].numpy())
    dS = ((dP - R.index_order_sum(p * dP, axis=1)[:, None]).astype(np.float32) * p).astype(np.float32)
    from lutcore.ops.matmul import matmul
    assert_bits_equal("dv", v.grad[0, 0].numpy(), dv)
    assert_bits_equal("dq", q.grad[0, 0].numpy(), (matmul(dS, k0[0, 0].numpy()) * np.float32(0.25)).astype(np.float32))
    assert_bits_equal("dk", k.grad[0, 0].numpy(), matmul(np.ascontiguousarray(dS.T), qs))
    q = q0.clone().requires_grad_()
    out, _ = A.lut_attention(q, k0, v0, None, None, qk_units=uqk, pv_units=upv, backward="table")
    g = torch.autograd.grad(out.sum(), q, create_graph=True)[0]
    with pytest.raises(RuntimeError, match="attention: backward='table' is differentiable once"):
        g.sum().backward()


# ----------------------------------------------------------------------------- UnitMatmul through MX units

UM_CASES = [  # (a shape, b shape)
    ((5, 40), (40, 3)),
    ((2, 1, 6, 35), (3, 35, 4)),                                    # broadcast leading dims
    ((7,), (7, 5)),                                                 # 1-D operands
    ((4, 6, 33), (33,)),
]


def _slices(a, b):
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    ia = np.broadcast_to(np.arange(int(np.prod(a2.shape[:-2], dtype=np.int64))).reshape(a2.shape[:-2]), batch).ravel()
    ib = np.broadcast_to(np.arange(int(np.prod(b2.shape[:-2], dtype=np.int64))).reshape(b2.shape[:-2]), batch).ravel()
    return a2.reshape(-1, *a2.shape[-2:]).numpy(), b2.reshape(-1, *b2.shape[-2:]).numpy(), ia, ib


@pytest.mark.parametrize("sa,sb", UM_CASES)
def test_unit_matmul_forward_and_table_backward_per_slice(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a0, b0 = rand(rng, *sa, scale=3), rand(rng, *sb)
    u = U("mxfp8:lmul")
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    y = lt.unit_matmul(a, b, "mxfp8:lmul", backward="table")
    assert y.shape == torch.matmul(a0, b0).shape
    A3, B3, ia, ib = _slices(a0, b0)
    want = np.stack([mm_ref(u, A3[i], B3[j]) for i, j in zip(ia, ib)]).reshape(y.shape)
    assert_bits_equal("y", y.detach().numpy(), want)
    dy = rand(rng, *y.shape)
    y.backward(dy)
    dy3 = dy.reshape(len(ia), A3.shape[1], B3.shape[2]).numpy()
    da, db = np.zeros(A3.shape, np.float32), np.zeros(B3.shape, np.float32)
    for s, (i, j) in enumerate(zip(ia, ib)):                                     # slices summed in slice order
        ga, gb = table_grads_ref(u, dy3[s], A3[i], B3[j])
        da[i] = (da[i] + ga).astype(np.float32)
        db[j] = (db[j] + gb).astype(np.float32)
    assert_bits_equal("da", a.grad.numpy(), da.reshape(sa))
    assert_bits_equal("db", b.grad.numpy(), db.reshape(sb))


def test_unit_matmul_module_table_and_ste():
    rng = np.random.default_rng(41)
    a0, b0 = rand(rng, 2, 3, 5, 34), rand(rng, 2, 1, 34, 6)
    mm = lt.UnitMatmul("mxfp8", "table", name="scores")
    assert isinstance(mm.units, MXUnits) and "units=mxfp8@" in repr(mm)
    grads = {}
    for mode, f in (("table", mm), ("ste", lt.UnitMatmul("mxfp8")), ("torch", torch.matmul)):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        y = f(a, b)
        y.backward(torch.ones_like(y))
        grads[mode] = (a.grad, b.grad, y.detach())
    assert_bits_equal("module = function", grads["table"][2].numpy(),
                      lt.unit_matmul(a0, b0, "mxfp8").numpy())
    for i, n in enumerate("ab"):
        assert_bits_equal(f"ste d{n}", grads["ste"][i].numpy(), grads["torch"][i].numpy())
    assert not torch.equal(grads["table"][0], grads["ste"][0])
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    y = lt.unit_matmul(a, b, "mxfp8", backward="table")
    y.backward(torch.ones_like(y))
    assert_bits_equal("module table da", grads["table"][0].numpy(), a.grad.numpy())
    assert_bits_equal("module table db", grads["table"][1].numpy(), b.grad.numpy())


# ----------------------------------------------------------------------------- threads

def test_same_bits_at_1_and_2_threads():
    """Products of 2^20 multiplications and more: the scores, p v and their table passes run on
    a team of 2 (recorded), with the bits of 1 thread."""
    from lutcore import _threads
    rng = np.random.default_rng(50)
    q0, k0, v0 = rand(rng, 1, 2, 64, 64), rand(rng, 1, 1, 128, 64), rand(rng, 1, 1, 128, 64)
    a0, b0 = rand(rng, 64, 128), rand(rng, 128, 64)
    mask = padded_mask(2, 64, 128, pad=0)[:1]                                  # causal
    dy = rand(rng, 1, 64, 2, 64)
    got = []
    for n in (1, 2):
        lutcore.set_num_threads(n)
        q, k, v, a, b = (t.clone().requires_grad_() for t in (q0, k0, v0, a0, b0))
        with _threads.record() as rec:
            out, p = A.lut_attention(q, k, v, mask, None, qk_units="mxfp8:mitchell", pv_units="mxfp6",
                                     backward="table")
            out.backward(dy)
        assert {("mxgemm.exact", n), ("gradtables.table_pass", n)} <= set(rec), rec
        with _threads.record() as rec:
            y = lt.UnitMatmul("mxfp4", "table", threads=n)(a, b)
            y.backward(torch.ones_like(y))
        assert {("mxgemm.exact", n), ("gradtables.table_pass", n)} <= set(rec), rec
        got.append([t.detach().numpy().copy() for t in (out, p, q.grad, k.grad, v.grad, y, a.grad, b.grad)])
    for name, x, y in zip(("out", "p", "dq", "dk", "dv", "y", "da", "db"), *got):
        assert_bits_equal(name, x, y)


# ----------------------------------------------------------------------------- refusals

def _zero_row_unit():
    """e4m3 x e4m3 products with T[0, j] = 1 for every finite j: 0 x b != 0."""
    return MXUnits(FPUnit.from_function("e4m3", "e4m3", lambda x, y: np.where(x == 0, 1.0, x * y), name="plus1"))


def test_mx_units_without_a_zero_row_are_refused_naming_the_product():
    bad = _zero_row_unit()
    assert bad.name == "mxfp8:plus1"
    rng = np.random.default_rng(60)
    fin = np.isfinite(bad.b.values())
    assert (bad.mul.products[0, fin] == 1).all()
    model = llama()
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: MX units 'mxfp8:plus1' give 1\.0 "
                                         r"for 0 x e4m3 code \d+: attention's products need 0 x b = 0"):
        lt.approximate(model, {"*": "mxfp8", "*.qk": bad, "*.pv": "mxfp8"}, attention=True)
    with pytest.raises(ValueError, match=r"model\.layers\.1\.self_attn\.pv: MX units 'mxfp8:plus1'"):
        lt.approximate(model, {"model.layers.1.self_attn.pv": bad, "*": "mxfp8"}, attention=True)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: MX units 'mxfp8:plus1'"):
        lt.approximate(model, bad, attention=True)                               # one spec: every product
    m = lt.approximate(model, {"*": bad}, attention=True)                        # the weights only: fine
    assert m.model.layers[0].self_attn.lutcore_qk_units is None
    assert m.model.layers[0].mlp.up_proj.units is bad
    m = lt.approximate(model, MAPPING, attention=True)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.pv: MX units 'mxfp8:plus1'"):
        lt.set_units(m, {"*.pv": bad})
    assert m.model.layers[0].self_attn.lutcore_pv_units.name == "mxfp4"          # nothing changed
    q, k = rand(rng, 1, 2, 3, 8), rand(rng, 1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"attn7\.pv: MX units 'mxfp8:plus1'"):
        A.lut_attention(q, k, k, None, qk_units="mxfp8", pv_units=bad, layer="attn7")
    with pytest.raises(ValueError, match=r"mod\.qk: MX units 'mxfp8:plus1'"):
        A.attach(torch.nn.Module(), bad, None, name="mod")


# ----------------------------------------------------------------------------- causality

def test_a_rows_output_depends_on_its_visible_positions_alone():
    rng = np.random.default_rng(70)
    q, k, v = rand(rng, 1, 1, 8, 16), rand(rng, 1, 1, 8, 16), rand(rng, 1, 1, 8, 16)
    mask = padded_mask(2, 8, 8, pad=0)[:1]                                      # causal
    later = v.clone()
    later[0, 0, 7] *= 100                                                       # only the last position's value
    for pv in ("mitchell", "mxfp8", "mxfp4:mitchell@m10:promote=16"):
        o1, _ = A.lut_attention(q, k, v, mask, None, qk_units=None, pv_units=pv)
        o2, _ = A.lut_attention(q, k, later, mask, None, qk_units=None, pv_units=pv)
        assert torch.equal(o1[:, :7], o2[:, :7]), pv
