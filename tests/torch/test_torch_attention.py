"""lutcore.torch.attention: transformers' attention implementation "lutcore" (attention's two products
through units), approximate(..., attention=True), UnitMatmul.

The forward is held bit for bit to a composition written here from the numpy contract
(``lutcore.quant.attn_scores`` / float mask / the softmax below / ``attn_values``) per (batch, head),
and once to the same composition over the products' independent oracle (tests/reference/attn_ref.py);
the cache-decoded tokens and logits to the full recompute; 1 and 2 threads to each other; STE gradients
to torch's autograd through transformers' eager attention; "table" gradients to float64 finite
differences of the contract's smooth surrogate (per product) and to a numpy chain written here.

Error budgets (named, STYLE habit 10):
    EXACT_REL         exact units in attention only vs the eager float model: relative RMS of the logits
    MITCHELL_MIN_REL  Mitchell's approximate products in attention only: at least this far
    TABLE_CHAIN_RTOL  the table backward vs the float64 numpy chain (float32 sums in another order)
"""
import copy

import numpy as np
import pytest

import torch  # noqa: E402  (the test extra installs it)
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
import transformers as tf  # noqa: E402

import lutcore  # noqa: E402
import lutcore.torch as lt  # noqa: E402
from lutcore.ops import mathfn  # noqa: E402
from lutcore.quant import attn_scores, attn_values, qmatmul, quantize_codes  # noqa: E402
from lutcore.torch import attention as A  # noqa: E402
from lutcore.units import Units, approx  # noqa: E402
from reference.asserts import assert_bits_equal  # noqa: E402
from reference.gradcheck import fd4  # noqa: E402

EXACT_REL = 0.025
MITCHELL_MIN_REL = 0.015
TABLE_CHAIN_RTOL = 1e-5

LOWEST = np.finfo(np.float32).min
UNITS = {"exact": Units.exact(), "mitchell": approx.mitchell()}


# ----------------------------------------------------------------------------- models and inputs

def _lively(model, seed):
    """Weights large enough for peaked attention (the default init makes it nearly uniform)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * r if (p.ndim == 1 and "bias" not in name) else 0.05 * r if p.ndim == 1 else 0.25 * r)
    return model.eval()


def llama(seed=0, **over):
    cfg = tf.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
                         intermediate_size=64, vocab_size=50, **over)
    torch.manual_seed(seed)
    return _lively(tf.LlamaForCausalLM(cfg), seed)


def gpt2(seed=0):
    cfg = tf.GPT2Config(n_embd=32, n_head=4, n_layer=2, vocab_size=50, n_positions=64, bos_token_id=0,
                        eos_token_id=0)
    torch.manual_seed(seed)
    return _lively(tf.GPT2LMHeadModel(cfg), seed)


MODELS = {"llama": llama, "gpt2": gpt2}


def eager(model):
    m = copy.deepcopy(model)
    m.set_attn_implementation("eager")
    return m


def ids_and_mask(B=2, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 50, (B, T), generator=g)
    am = torch.ones(B, T, dtype=torch.long)
    am[1, :3] = 0                                             # a left-padded row: fully masked queries
    return ids, am


def rand(rng, *shape, scale=1.0):
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32))


def padded_mask(B, T, S, pad=2):
    """transformers' additive mask: causal (queries at the last T of S positions), row 1 left-padded."""
    m = np.zeros((B, 1, T, S), np.float32)
    for t in range(T):
        m[:, 0, t, S - T + t + 1:] = LOWEST
    m[1, 0, :, :pad] = LOWEST
    return torch.from_numpy(m)


# ----------------------------------------------------------------------------- the composition

def softmax_ref(x, masked):
    """Row softmax from the contract: masked positions 0, minus the max of the visible ones,
    lutcore's exp, the row sum in position order (a float32 loop), a division."""
    p = np.zeros_like(x)
    for r in range(x.shape[0]):
        vis = ~masked[r]
        if not vis.any():
            continue
        e = mathfn.exp(x[r] - x[r][vis].max())
        e[~vis] = 0
        tot = np.float32(0)
        for j in range(x.shape[1]):
            tot = np.float32(tot + e[j])
        p[r] = e / tot
    return p


def _oracle(name, u):
    """The independent numpy oracle of a product (tests/reference/attn_ref.py) with attn_scores' /
    attn_values' signature."""
    from reference.attn_ref import scores_ref, values_ref
    f = u.format
    fmt = (f.a_bits, f.a_signed, f.b_bits, f.b_signed)
    ref = scores_ref if name == "scores" else values_ref
    return lambda x, y, _u: ref(x, y, u.table(), fmt, 32)


def composed(q, k, v, mask, scaling, units_qk, units_pv, scores=attn_scores, values=attn_values):
    """out (B, T, H, Dv), p (B, H, T, S) per (batch, head) from attn_scores / mask / softmax_ref / attn_values
    (or the oracle's ``scores`` / ``values``)."""
    q, k, v = q.numpy(), k.numpy(), v.numpy()
    B, H, T, D = q.shape
    KV, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // KV
    out = np.zeros((B, T, H, Dv), np.float32)
    P = np.zeros((B, H, T, S), np.float32)
    for b in range(B):
        for h in range(H):
            qs = (q[b, h] * np.float32(scaling)).astype(np.float32)                  # (T, D)
            s = scores(qs, k[b, h // G], units_qk)                                    # (T, S)
            mk = np.zeros((T, S), np.float32) if mask is None else \
                np.broadcast_to(mask.numpy()[min(b, mask.shape[0] - 1), 0], (T, S))
            p = softmax_ref((s + mk).astype(np.float32), mk <= LOWEST)
            P[b, h] = p
            out[b, :, h] = values(p, v[b, h // G], units_pv)
    return out, P


@pytest.fixture
def calls(monkeypatch):
    """Every lut_attention call the model makes: (args, kwargs, (out, p))."""
    seen = []
    orig = A.lut_attention

    def spy(*args, **kw):
        r = orig(*args, **kw)
        seen.append((args, kw, tuple(t.detach().clone() for t in r)))
        return r
    monkeypatch.setattr(A, "lut_attention", spy)
    return seen


# ----------------------------------------------------------------------------- forward bits

@pytest.mark.parametrize("units", ["exact", "mitchell"])
@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_model_attention_equals_the_composition(kind, units, calls):
    u = UNITS[units]
    model = lt.approximate(MODELS[kind](), u, attention=True)
    assert model.config._attn_implementation == "lutcore"
    ids, am = ids_and_mask()
    with torch.no_grad():
        model(ids, attention_mask=am)
    assert len(calls) == 2                                          # one per layer
    for args, kw, (out, p) in calls:
        q, k, v, mask, scaling = args
        assert kw["qk_units"] is u and kw["pv_units"] is u
        want, wp = composed(q, k, v, mask, scaling, u, u)
        assert_bits_equal("out", out.numpy(), want)
        assert_bits_equal("p", p.numpy(), wp)
        assert (wp[1, :, :3] == 0).all()                             # padded queries see nothing: p = 0, out = 0


U8 = Units.from_mul(lambda a, b: a * b, format="8u x 8u -> 16u", name="u8")       # zero points on both sides


@pytest.mark.parametrize("units", ["mitchell", "u8"])
@pytest.mark.parametrize("G", [1, 2, 4])
def test_lut_attention_gqa_and_odd_shapes_equal_the_composition(G, units):
    rng = np.random.default_rng(G)
    B, KV, T, S, D, Dv = 2, 2, 5, 37, 40, 9                         # S, D: across a block of 32
    q, k, v = rand(rng, B, KV * G, T, D), rand(rng, B, KV, S, D), rand(rng, B, KV, S, Dv)
    mask = padded_mask(B, T, S, pad=4)
    u = U8 if units == "u8" else UNITS[units]
    out, p = A.lut_attention(q, k, v, mask, 0.3, qk_units=u, pv_units=u)
    want, wp = composed(q, k, v, mask, 0.3, u, u)
    assert_bits_equal("out", out.numpy(), want)
    assert_bits_equal("p", p.numpy(), wp)
    if G == 2:                                                      # and the products' independent oracle
        want, wp = composed(q, k, v, mask, 0.3, u, u, _oracle("scores", u), _oracle("values", u))
        assert_bits_equal("out vs oracle", out.numpy(), want)
        assert_bits_equal("p vs oracle", p.numpy(), wp)


def test_masked_positions_underflow_to_zero_and_the_softmax_is_the_stage_one():
    """exp of the additive lowest-value mask is 0 before any explicit zeroing; with a causal mask
    the softmax has the bits of lutcore's native causal softmax (the pipeline stage's)."""
    from lutcore.ops.rows import softmax_causal
    rng = np.random.default_rng(3)
    T = S = 11
    s = (rng.standard_normal((2, T, S)) * 4).astype(np.float32)
    causal = np.triu(np.ones((T, S), bool), 1)
    x = (s + np.where(causal, LOWEST, 0).astype(np.float32)).astype(np.float32)
    p_plain = A.softmax_rows(x, None, 1)                             # no mask given: underflow alone
    assert (p_plain[:, causal] == 0).all()
    p = A.softmax_rows(x, causal[None], 1)
    assert_bits_equal("p", p, p_plain)
    native = s.copy()
    softmax_causal(native, T, 0)
    assert_bits_equal("softmax vs softmax_causal", p, native)
    assert (A.softmax_rows(x, np.ones((1, T, S), bool), 1) == 0).all()    # nothing visible: all 0


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_close_to_eager_with_exact_units_farther_with_mitchell(kind):
    model = MODELS[kind]()
    ids, am = ids_and_mask()
    keep = am.bool()                                                      # real positions only
    with torch.no_grad():
        ref = eager(model)(ids, attention_mask=am).logits[keep]
        rel = {}
        for name, u in UNITS.items():
            m = lt.approximate(model, {"*.qk": u, "*.pv": u}, attention=True)   # the linears stay float
            got = m(ids, attention_mask=am).logits[keep]
            rel[name] = float((got - ref).norm() / ref.norm())
    print(f"\n{kind}: relative RMS vs eager: {rel}")
    assert rel["exact"] < EXACT_REL
    assert rel["mitchell"] > max(MITCHELL_MIN_REL, 2 * rel["exact"])


def test_float_products_are_eager_bits():
    model = llama()
    m = lt.approximate(model, {"model.layers.0.self_attn.qk": "mitchell"}, attention=True)
    m1 = lt.approximate(model, {"*": "mitchell"}, attention=True)                   # "*": the weights only
    for _, lin in lt.approximate_layers(m1):
        lin.units = None
    ids, am = ids_and_mask()
    real = am.bool()                                  # a padded query's row: 0 here, eager's mean of v there
    with torch.no_grad():
        ref = eager(model)(ids, attention_mask=am).logits[real]
        assert torch.equal(m1(ids, attention_mask=am).logits[real], ref)
        assert not torch.equal(m(ids, attention_mask=am).logits[real], ref)
    a0, a1 = m.model.layers[0].self_attn, m.model.layers[1].self_attn
    assert a0.lutcore_qk_units.name == "mitchell" and a0.lutcore_pv_units is None
    assert a1.lutcore_qk_units is None and a1.lutcore_pv_units is None
    q_proj = m.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, lt.ApproxLinear) and q_proj.units is None                # converted, float


def test_set_units_set_backward_and_assignment_reach_the_products(tmp_path):
    model = llama()
    m = lt.approximate(model, "exact", attention=True, skip=["model.layers.1.self_attn"])
    a0, a1 = m.model.layers[0].self_attn, m.model.layers[1].self_attn
    assert a1.lutcore_qk_units is None and a1.lutcore_skipped                       # skipped: float, not a product
    assert a0.lutcore_qk_units.name == "exact"                                      # one spec, attention=True
    lt.set_units(m, "mitchell")                                                     # one spec: the weights;
    assert a0.lutcore_qk_units is None and a0.lutcore_pv_units is None              # attention back to float
    lt.set_units(m, {"*": "mitchell", "*.qk": "mitchell", "*.pv": "mitchell"})
    assert a0.lutcore_qk_units.name == a0.lutcore_pv_units.name == "mitchell" and a1.lutcore_pv_units is None
    lt.set_units(m, {"model.layers.0.self_attn.pv": "none"})
    assert a0.lutcore_pv_units is None and a0.lutcore_qk_units.name == "mitchell"
    lt.set_backward(m, {"*.qk": "table"})
    lt.set_backward(m, "units")                                                     # one value: the layers
    assert lt.backward_of(m)["model.layers.0.self_attn.qk"] == ("table", None)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: backward='units'"):
        lt.set_backward(m, {"*.qk": "units"})
    bad = Units.from_mul(lambda a, b: a * b - 1, name="minus1")
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.pv: units 'minus1' give -1"):
        lt.set_units(m, {"*": bad, "*.pv": bad})
    assert a0.lutcore_qk_units.name == "mitchell" and m.model.layers[0].mlp.up_proj.units.name == "mitchell"
    a = lt.assignment(m)
    assert a["model.layers.0.self_attn.qk"].name == "mitchell" and a["model.layers.0.self_attn.pv"] is None
    path = lt.save_assignment(m, tmp_path / "a.json")
    b = lt.assignment(lt.approximate(model, path, attention=True))
    digest = lambda u: None if u is None else u.digest                                   # noqa: E731
    assert all(digest(b[n]) == digest(u) for n, u in a.items())
    assert b["model.layers.1.self_attn.qk"] is None                                      # uncovered: float


@pytest.mark.parametrize("n", [1, 2])
def test_every_native_call_uses_the_models_threads(n):
    from lutcore import _threads
    lutcore.set_num_threads(3)                                  # a leak of the default shows
    m = lt.approximate(llama(), {"*.qk": "mitchell", "*.pv": "mitchell"}, attention=True, backward="table",
                       threads=n)
    ids, am = ids_and_mask()
    rng = np.random.default_rng(0)
    q, k = rand(rng, 1, 4, 128, 16).requires_grad_(), rand(rng, 1, 2, 128, 16)       # products worth a team
    with _threads.record() as rec:
        m(ids, attention_mask=am, labels=ids).loss.backward()
        mm = lt.UnitMatmul("mitchell", "table", threads=n)
        mm(torch.ones(3, 4, requires_grad=True), torch.ones(4, 2)).sum().backward()
        A.lut_attention(q, k, k, None, qk_units="mitchell", pv_units="mitchell", threads=n)[0].sum().backward()
    counts = {c for _, c in rec}
    assert counts <= {1, n} and n in counts, rec                     # 1: a product too small to share


# ----------------------------------------------------------------------------- cache, threads

def static_model(kind="llama", units="mitchell"):
    """Linears with calibrated static scales too: every row's bits depend on that row alone."""
    m = lt.approximate(MODELS[kind](), units, attention=True, activations="static")
    return lt.calibrate(m, [torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(5))])


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_generate_with_cache_equals_full_recompute(kind):
    model = static_model(kind)
    ids, _ = ids_and_mask(T=5)
    n = 6
    model.generation_config.eos_token_id = None               # n tokens, no stop
    with torch.no_grad():
        g = model.generate(ids, max_new_tokens=n, do_sample=False, use_cache=True, output_logits=True,
                           return_dict_in_generate=True, pad_token_id=0)
        toks = ids
        for i in range(n):                                    # greedy by full recompute of the prefix
            logits = model(toks).logits[:, -1]
            assert torch.equal(logits, g.logits[i]), f"step {i}: {float((logits - g.logits[i]).abs().max())}"
            toks = torch.cat([toks, logits.argmax(-1, keepdim=True)], 1)
    assert torch.equal(toks, g.sequences)


def test_manual_cache_loop_with_padding_equals_full_recompute():
    model = static_model("llama")
    ids, am = ids_and_mask(T=6)
    pos = (am.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        cache = tf.DynamicCache(config=model.config)
        out = model(ids, attention_mask=am, position_ids=pos, cache=cache, use_cache=True)
        toks = ids
        for step in range(5):
            full = model(toks, attention_mask=am, position_ids=pos).logits[:, -1]
            assert torch.equal(full, out.logits[:, -1]), step
            nxt = full.argmax(-1, keepdim=True)
            toks = torch.cat([toks, nxt], 1)
            am = torch.cat([am, torch.ones_like(nxt)], 1)
            pos = torch.cat([pos, pos[:, -1:] + 1], 1)
            out = model(nxt, attention_mask=am, position_ids=pos[:, -1:], cache=out.past_key_values, use_cache=True)


@pytest.mark.parametrize("backward", ["ste", "table"])
def test_same_bits_at_1_and_2_threads(backward):
    model = lt.approximate(llama(), "mitchell", attention=True, backward=backward)
    ids, am = ids_and_mask()
    got = []
    for n in (1, 2):
        lutcore.set_num_threads(n)
        torch.set_num_threads(n)
        model.zero_grad()
        loss = model(ids, attention_mask=am, labels=ids).loss
        loss.backward()
        got.append((loss.detach().clone(), {k: p.grad.clone() for k, p in model.named_parameters()}))
    torch.set_num_threads(2)
    assert torch.equal(got[0][0], got[1][0])
    for k in got[0][1]:
        assert_bits_equal(k, got[0][1][k].numpy(), got[1][1][k].numpy())


# ----------------------------------------------------------------------------- STE backward

@pytest.mark.parametrize("G", [1, 2])
@pytest.mark.parametrize("units", ["exact", "mitchell"])
def test_ste_gradients_are_eager_attentions(units, G):
    from transformers.models.llama.modeling_llama import eager_attention_forward
    rng = np.random.default_rng(7)
    B, KV, T, S, D = 2, 2, 6, 8, 8
    q0, k0, v0 = rand(rng, B, KV * G, T, D), rand(rng, B, KV, S, D), rand(rng, B, KV, S, D)
    mask = padded_mask(B, T, S)                                 # every query sees a position
    dy = rand(rng, B, T, KV * G, D)
    mod = nn.Module()
    mod.num_key_value_groups, mod.training = G, False
    grads = []
    for f in ("lut", "eager"):
        q, k, v = (t.clone().requires_grad_() for t in (q0, k0, v0))
        if f == "lut":
            out, _ = A.lut_attention(q, k, v, mask, 0.35, qk_units=units, pv_units=units)
        else:
            out, _ = eager_attention_forward(mod, q, k, v, mask, scaling=0.35)
        out.backward(dy)
        grads.append((q.grad, k.grad, v.grad))
    for n, a, b in zip("qkv", *grads):
        assert_bits_equal(f"d{n}", a.numpy(), b.numpy())


def test_fully_masked_rows_pass_no_gradient():
    """A query that sees nothing has p = 0 (eager: uniform p, and a gradient into its scores)."""
    rng = np.random.default_rng(9)
    q, k, v = (rand(rng, 2, 2, 6, 8).requires_grad_() for _ in range(3))
    mask = padded_mask(2, 6, 6)                                 # row 1: queries 0 and 1 see only padding
    out, p = A.lut_attention(q, k, v, mask, None, qk_units="exact", pv_units="exact")
    assert (p[1, :, :2] == 0).all() and (out[1, :2] == 0).all()
    out.backward(torch.ones_like(out))
    assert (q.grad[1, :, :2] == 0).all()


def test_ste_is_twice_differentiable_and_dropout_reuses_its_mask():
    rng = np.random.default_rng(8)
    q, k, v = (rand(rng, 1, 2, 4, 8).requires_grad_() for _ in range(3))
    drop = F.dropout(torch.ones(1, 2, 4, 4), 0.5, True)
    grads = []
    for f in (A.lut_attention, A.float_attention):
        kw = dict(qk_units="mitchell", pv_units="mitchell") if f is A.lut_attention else {}
        out, _ = f(q, k, v, None, None, dropout_mask=drop, **kw)
        g = torch.autograd.grad(out.square().sum(), (q, k, v), create_graph=True)
        h = torch.autograd.grad(sum(x.sum() for x in g), q)[0]
        assert torch.isfinite(h).all() and h.abs().sum() > 0
        out, _ = f(q, k, v, None, None, dropout_mask=drop, **kw)
        grads.append(torch.autograd.grad(out, (q, k, v), torch.ones_like(out)))
    for n, x, y in zip("qkv", *grads):
        assert_bits_equal(f"d{n}", x.numpy(), y.numpy())


# ----------------------------------------------------------------------------- table backward

def _grid_units():
    """Exact products on the grid, with the partials of F(a, b) = a b + 2 sin(pi a) cos(b / 23) +
    1.5 sin(pi b) cos(a / 17) as gradient tables: F is the exact product at every code pair, so the
    forward is the surrogate's at grid points and its finite differences check the tables' use."""
    v = np.arange(256).astype(np.uint8).view(np.int8).astype(np.float64)
    a, b = np.meshgrid(v, v, indexing="ij")
    ga = b + 2 * np.pi * np.cos(np.pi * a) * np.cos(b / 23) - 1.5 / 17 * np.sin(np.pi * b) * np.sin(a / 17)
    gb = a - 2 / 23 * np.sin(np.pi * a) * np.sin(b / 23) + 1.5 * np.pi * np.cos(np.pi * b) * np.cos(a / 17)
    return Units.exact().with_gradients(ga, gb)


def _F(a, b):
    return a * b + 2 * np.sin(np.pi * a) * np.cos(b / 23) + 1.5 * np.sin(np.pi * b) * np.cos(a / 17)


def _fd(f, x):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        def at(d, i=i):
            y = x.copy()
            y[i] += d
            return f(y)
        g[i] = fd4(at, 1e-4 * max(1.0, abs(x[i])))
    return g


def test_table_scores_product_fd_of_the_surrogate():
    """UnitMatmul(backward="table") — the scores' product — against float64 central differences of
    L(a, b) = sum dY * sum_blk sa sb sum_k F(a / sa, b / sb), scales held, at grid inputs."""
    u = _grid_units()
    rng = np.random.default_rng(11)
    M, K, N, blk = 3, 40, 4, 32
    nb = -(-K // blk)
    qa = rng.integers(-127, 128, (M, K)).astype(np.float64)
    qb = rng.integers(-127, 128, (K, N)).astype(np.float64)
    for j in range(nb):                                       # a 127 in every block: the scale is known
        qa[:, j * blk] = 127
        qb[j * blk, :] = -127
    sa = rng.uniform(0.5, 2, (M, nb)) / 127
    sb = rng.uniform(0.5, 2, (nb, N)) / 127
    blk_of = np.arange(K) // blk
    sa, sb = sa.astype(np.float32).astype(np.float64), sb.astype(np.float32).astype(np.float64)
    a0 = (qa * sa[:, blk_of]).astype(np.float32)
    b0 = (qb * sb[blk_of, :]).astype(np.float32)
    dy = rng.standard_normal((M, N))
    a = torch.from_numpy(a0).requires_grad_()
    b = torch.from_numpy(b0).requires_grad_()
    y = lt.UnitMatmul(u, "table", grad_h="supplied")(a, b)
    assert_bits_equal("forward", y.detach().numpy(), qmatmul(a0, b0, u))
    y.backward(torch.from_numpy(dy.astype(np.float32)))

    def L(av, bv):
        tot = 0.0
        for j in range(nb):
            ks = blk_of == j
            ca = av[:, ks] / sa[:, j:j + 1]                   # (M, k)
            cb = bv[ks, :] / sb[j:j + 1, :]                   # (k, N)
            tot += (dy * sa[:, j:j + 1] * sb[j:j + 1, :] * _F(ca[:, :, None], cb[None]).sum(1)).sum()
        return tot
    a64, b64 = a0.astype(np.float64), b0.astype(np.float64)
    fa, fb = _fd(lambda t: L(t, b64), a64), _fd(lambda t: L(a64, t), b64)
    np.testing.assert_allclose(a.grad.double().numpy(), fa, rtol=1e-4, atol=1e-4 * np.abs(fa).max())
    np.testing.assert_allclose(b.grad.double().numpy(), fb, rtol=1e-4, atol=1e-4 * np.abs(fb).max())


def test_table_values_product_fd_of_the_surrogate():
    """values_table_grads (the p v product) against float64 central differences of
    L(p, v) = sum dO * sum_blk s_p sum_s F(p s_v / s_p, v / s_v), scales held, at grid inputs."""
    from lutcore.torch._gradtables import tables_for
    u = _grid_units()
    rng = np.random.default_rng(12)
    R, S, Dv, blk = 3, 37, 5, 32
    nb = -(-S // blk)
    qv = rng.integers(-127, 128, (S, Dv)).astype(np.float64)
    qv[:, 0] = 127
    sv = (rng.uniform(0.5, 2, S) / 127).astype(np.float32).astype(np.float64)
    qp = rng.integers(0, 128, (R, S)).astype(np.float64)
    blk_of = np.arange(S) // blk
    for j in range(nb):
        qp[:, j * blk] = 127
    sp = (rng.uniform(0.5, 2, (R, nb)) / 127).astype(np.float32).astype(np.float64)
    v0 = (qv * sv[:, None]).astype(np.float32)
    p0 = (qp * sp[:, blk_of] / sv[None, :]).astype(np.float32)
    # the forward's own codes and scales are these
    cv, s_v, _ = quantize_codes(v0, 8, True, axis=1)
    assert np.array_equal(cv, qv) and np.allclose(s_v[:, 0], sv, rtol=1e-6)
    dy = rng.standard_normal((R, Dv))
    dp, dv = A.values_table_grads(dy.astype(np.float32), p0, v0, blk, tables_for(u, "supplied", "t"), 1)
    sv32 = s_v[:, 0].astype(np.float64)                               # the scales the pass holds
    pp = (p0 * s_v.reshape(1, S)).astype(np.float32)
    sp32 = np.stack([np.abs(pp[:, blk_of == j]).max(1) / np.float32(127) for j in range(nb)], 1).astype(np.float64)

    def L(pv, vv):
        ca = pv * sv32[None, :] / sp32[:, blk_of]                     # (R, S)
        cb = vv / sv32[:, None]                                       # (S, Dv)
        return (dy * (sp32[:, blk_of][:, :, None] * _F(ca[:, :, None], cb[None])).sum(1)).sum()
    p64, v64 = p0.astype(np.float64), v0.astype(np.float64)
    fp, fv = _fd(lambda t: L(t, v64), p64), _fd(lambda t: L(p64, t), v64)
    np.testing.assert_allclose(dp, fp, rtol=1e-4, atol=1e-4 * np.abs(fp).max())
    np.testing.assert_allclose(dv, fv, rtol=1e-4, atol=1e-4 * np.abs(fv).max())


def _chain_ref(q, k, v, mask, scaling, u, dy):
    """(dq, dk, dv) float64 of the table backward written from the contract: per (batch, head), the
    forward's codes, the products' table formulas with direct table lookups, softmax's backward."""
    Ga, Gb = (t.astype(np.float64) for t in u.gradients(1))
    q, k, v, dy = q.numpy(), k.numpy(), v.numpy(), dy.numpy()
    B, H, T, D = q.shape
    KV, S, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // KV
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    blk = 32

    def sym(x, axis):                                                 # codes, scales (float32 contract)
        c, s, _ = quantize_codes(x, 8, True, axis=axis)
        return c, s
    for b in range(B):
        for h in range(H):
            kk, vv, go = k[b, h // G], v[b, h // G], dy[b, :, h].astype(np.float64)
            qs = (q[b, h] * np.float32(scaling)).astype(np.float32)
            s = attn_scores(qs, kk, u)
            mk = np.broadcast_to(mask.numpy()[b, 0], (T, S))
            p = softmax_ref((s + mk).astype(np.float32), mk <= LOWEST).astype(np.float64)
            cv, sv = sym(vv, 1)                                      # (S, Dv), (S, 1)
            pp = (p.astype(np.float32) * sv.reshape(1, S)).astype(np.float32)
            dP, dV = np.zeros((T, S)), np.zeros((S, Dv))
            for j in range(0, S, blk):
                cp, spj = sym(pp[:, j:j + blk], 1)                   # (T, n), (T, 1)
                for i, sidx in enumerate(range(j, min(S, j + blk))):
                    ia, ib = cp[:, i] & 0xff, cv[sidx] & 0xff        # (T,), (Dv,)
                    dP[:, sidx] = sv[sidx, 0] * (go * Ga[ia[:, None], ib[None, :]]).sum(1)
                    if sv[sidx, 0] > 0:
                        dV[sidx] = (go * spj * Gb[ia[:, None], ib[None, :]]).sum(0) / sv[sidx, 0]
            dS = (dP - (p * dP).sum(1, keepdims=True)) * p
            dQs, dK = np.zeros((T, D)), np.zeros((S, D))
            for j in range(0, D, blk):
                ca, sa = sym(qs[:, j:j + blk], 1)                    # (T, n), (T, 1)
                cb, sb = sym(kk[:, j:j + blk], 1)                    # (S, n), (S, 1)
                A_ = Ga[(ca[:, None, :] & 0xff), (cb[None, :, :] & 0xff)]      # (T, S, n)
                B_ = Gb[(ca[:, None, :] & 0xff), (cb[None, :, :] & 0xff)]
                dQs[:, j:j + blk] = (dS[:, :, None] * sb.reshape(1, S, 1) * A_).sum(1)
                dK[:, j:j + blk] = (dS[:, :, None] * sa.reshape(T, 1, 1) * B_).sum(0)
            dq[b, h] = dQs * np.float32(scaling)
            dk[b, h // G] += dK
            dv[b, h // G] += dV
    return dq, dk, dv


@pytest.mark.parametrize("G", [1, 2])
def test_table_chain_equals_the_reference(G):
    rng = np.random.default_rng(13)
    B, KV, T, S, D = 2, 2, 5, 5, 36
    q0, k0, v0 = rand(rng, B, KV * G, T, D), rand(rng, B, KV, S, D), rand(rng, B, KV, S, 7)
    mask = padded_mask(B, T, S)
    dy = rand(rng, B, T, KV * G, 7)
    u = UNITS["mitchell"]
    q, k, v = (t.clone().requires_grad_() for t in (q0, k0, v0))
    out, _ = A.lut_attention(q, k, v, mask, 0.4, qk_units=u, pv_units=u, backward="table")
    out.backward(dy)
    want = _chain_ref(q0, k0, v0, mask, 0.4, u, dy)
    for n, got, w in zip("qkv", (q.grad, k.grad, v.grad), want):
        err = np.abs(got.numpy() - w).max() / np.abs(w).max()
        print(f"d{n}: max rel err {err:.2e}")
        assert err < TABLE_CHAIN_RTOL, n


def test_table_is_differentiable_once_and_mixes_with_ste():
    rng = np.random.default_rng(14)
    q, k, v = (rand(rng, 1, 2, 4, 8).requires_grad_() for _ in range(3))
    out, _ = A.lut_attention(q, k, v, None, None, qk_units="exact", pv_units="exact", backward="table")
    g = torch.autograd.grad(out.sum(), q, create_graph=True)[0]
    with pytest.raises(RuntimeError, match="attention: backward='table' is differentiable once"):
        g.sum().backward()
    out, _ = A.lut_attention(q, k, v, None, None, qk_units="exact", pv_units=None, backward=("table", "ste"))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_exact_table_backward_is_close_to_ste():
    """Ga[a, b] = b, Gb[a, b] = a: the table chain is the float chain at the forward's quantized
    operands, close to the float attention's gradient."""
    rng = np.random.default_rng(15)
    grads = []
    for mode in ("table", "ste"):
        q, k, v = (rand(np.random.default_rng(15), 1, 2, 6, 16).requires_grad_() for _ in range(3))
        out, _ = A.lut_attention(q, k, v, None, None, qk_units="exact", pv_units="exact", backward=mode)
        out.backward(torch.ones_like(out))
        grads.append([t.grad for t in (q, k, v)])
    del rng
    for a, b in zip(*grads):
        assert float((a - b).norm() / b.norm()) < 0.05


# ----------------------------------------------------------------------------- UnitMatmul

UM_CASES = [  # (a shape, b shape): one line per case
    ((5, 40), (40, 3)),
    ((2, 3, 7, 33), (2, 3, 33, 4)),
    ((2, 1, 7, 9), (3, 9, 4)),                                      # broadcast leading dims
    ((7,), (7, 5)),                                                 # 1-D operands
    ((4, 6, 7), (7,)),
]


def _slices(a, b):
    a2, b2 = (a.unsqueeze(0) if a.dim() == 1 else a), (b.unsqueeze(-1) if b.dim() == 1 else b)
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    return a2.expand(*batch, *a2.shape[-2:]), b2.expand(*batch, *b2.shape[-2:]), batch


@pytest.mark.parametrize("sa,sb", UM_CASES)
def test_unit_matmul_forward_is_qmatmul_per_slice(sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = rand(rng, *sa), rand(rng, *sb)
    u = UNITS["mitchell"]
    y = lt.UnitMatmul(u)(a, b)
    assert y.shape == torch.matmul(a, b).shape
    ae, be, batch = _slices(a, b)
    want = np.stack([qmatmul(ae.reshape(-1, *ae.shape[-2:])[i].numpy(), be.reshape(-1, *be.shape[-2:])[i].numpy(), u)
                     for i in range(int(np.prod(batch, dtype=np.int64)))]).reshape(torch.matmul(a, b).shape)
    assert_bits_equal("y", y.numpy(), want)


@pytest.mark.parametrize("sa,sb", UM_CASES)
def test_unit_matmul_ste_gradients_are_torch_matmuls(sa, sb):
    rng = np.random.default_rng(3)
    a0, b0 = rand(rng, *sa), rand(rng, *sb)
    outs = []
    for f in (lt.UnitMatmul("mitchell"), torch.matmul):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        y = f(a, b)
        y.backward(torch.ones_like(y) * 0.5 + torch.arange(y.numel()).reshape(y.shape) % 3)
        outs.append((a.grad, b.grad))
    for n, x, y in zip("ab", *outs):
        assert_bits_equal(f"d{n}", x.numpy(), y.numpy())


def test_unit_matmul_table_broadcast_sums_slices_in_order():
    rng = np.random.default_rng(4)
    u = UNITS["mitchell"]
    a0, b0 = rand(rng, 2, 1, 6, 35), rand(rng, 3, 35, 4)
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    y = lt.UnitMatmul(u, "table")(a, b)
    dy = rand(rng, *y.shape)
    y.backward(dy)
    from lutcore.torch._gradtables import tables_for
    tabs = tables_for(u, None, "t")
    da, db = np.zeros((2, 6, 35), np.float32), np.zeros((3, 35, 4), np.float32)
    for i in range(2):
        for j in range(3):
            ga, gb = A.matmul_table_grads(dy[i, j].numpy(), a0[i, 0].numpy(), b0[j].numpy(), 32, tabs, 1)
            da[i] += ga
            db[j] += gb
    assert_bits_equal("da", a.grad.numpy().reshape(2, 6, 35), da)
    assert_bits_equal("db", b.grad.numpy(), db)


# ----------------------------------------------------------------------------- bad input

def test_attention_true_without_attention_modules():
    with pytest.raises(ValueError, match="attention=True: Sequential has no attention module.*UnitMatmul"):
        lt.approximate(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), "exact", attention=True)
    with pytest.raises(TypeError, match="attention: expected a bool"):
        lt.approximate(llama(), "exact", attention="yes")


def test_unit_without_zero_row_names_the_layer():
    bad = Units.from_mul(lambda a, b: a * b + 1, name="plus1")                  # T[0, b] = 1
    model = llama()
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: units 'plus1' give 1 for 0 x"):
        lt.approximate(model, bad, attention=True)
    with pytest.raises(ValueError, match=r"model\.layers\.1\.self_attn\.pv: units 'plus1'"):
        lt.approximate(model, {"model.layers.1.self_attn.pv": bad, "*": "exact"}, attention=True)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: units 'plus1'"):
        lt.approximate(model, {"*.qk": bad, "*.pv": "exact"}, attention=True)
    m = lt.approximate(model, {"*": bad}, attention=True)                           # the weights only: fine
    assert m.model.layers[0].self_attn.lutcore_qk_units is None
    assert model.config._attn_implementation != "lutcore"                            # a copy was converted


def test_bad_backward_and_units_name_the_product():
    model = llama()
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: backward='units' is not available"):
        lt.approximate(model, "exact", backward="units", attention=True)
    m = lt.approximate(model, "exact", backward={"*": "units"}, attention=True)     # the products keep "ste"
    assert m.model.layers[0].mlp.up_proj.backward == "units"
    assert lt.backward_of(m)["model.layers.0.self_attn.pv"] == ("ste", None)
    with pytest.raises(ValueError, match=r"model\.layers\.0\.self_attn\.qk: backward='table'.*signed 8 x 8"):
        lt.approximate(model, U8, backward="table", attention=True)
    with pytest.raises(ValueError, match="units: key 'nope' matches no layer"):
        lt.approximate(model, {"nope": "exact"}, attention=True)


def test_bad_tensors_name_the_layer():
    m = lt.approximate(llama(), {"*.qk": "exact", "*.pv": "exact"}, attention=True)
    ids, _ = ids_and_mask()
    with pytest.raises(TypeError, match=r"model\.layers\.0\.self_attn: query has dtype torch\.float64"):
        m.double()(ids)
    rng = np.random.default_rng(0)
    q, k = rand(rng, 1, 3, 4, 8), rand(rng, 1, 2, 4, 8)
    with pytest.raises(ValueError, match="attention: expected query .* H a multiple of KV"):
        A.lut_attention(q, k, k, None)
    with pytest.raises(ValueError, match="mm: a and b cannot be multiplied"):
        lt.UnitMatmul("exact", name="mm")(q, q)
    plain = llama()
    plain.set_attn_implementation(A.register())
    with pytest.raises(ValueError, match="LlamaAttention: the attention implementation 'lutcore' reads its units"):
        plain(ids)
