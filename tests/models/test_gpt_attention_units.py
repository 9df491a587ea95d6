"""lutcore's GPT with attention's own products through units: keys "h.{i}.attn.qk" / ".pv"
(only keys naming them cover them); each product is lutcore.quant.attn_scores / attn_values
per (batch, head) -- the same bits at 1 and 2 threads, the scores scaled after the product, the
same causal softmax rows; exact units stay near float; the STE backward is the float attention's
gradient at the units' probabilities; the dry-run counter counts the products; bad keys and
units are named; and a checkpoint keeps nothing of it (attention units are a runtime choice)."""
import math

import numpy as np
import pytest

import lutcore
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.ops.attn import causal_attention_backward
from lutcore.quant import attn_scores, attn_values
from lutcore.units import Units, approx

CFG = GPTConfig(vocab=40, dim=32, context=16, layers=2, heads=2, seed=1)
IDS = np.random.default_rng(0).integers(0, 40, (2, 13))


def _gpt(units):
    return GPT(CFG, units=units)


def test_keys_and_names():
    m = _gpt({"*": "exact", "h.*.attn.qk": "mitchell", "h.1.attn.pv": "exact"})
    a = m.assignment(attention=True)
    assert a["h.0.attn.qk"].name == "mitchell" and a["h.0.attn.pv"] is None and a["h.1.attn.pv"].name == "exact"
    assert "h.0.attn.qk" not in m.layer_names() and "h.0.attn.qk" in m.layer_names(attention=True)
    assert all(v is None for k, v in _gpt({"*": "mitchell"}).assignment(attention=True).items() if k.endswith("qk"))
    m.set_units("exact")                                   # one spec: attention back to float
    assert all(v is None for k, v in m.assignment(attention=True).items() if k.endswith((".qk", ".pv")))


def test_forward_is_the_composition_of_the_products():
    m = _gpt({"h.0.attn.qk": "mitchell", "h.0.attn.pv": "mitchell"})
    lutcore.set_num_threads(1)
    y1 = m.forward(IDS)
    lutcore.set_num_threads(2)
    assert np.array_equal(m.forward(IDS).view(np.int32), y1.view(np.int32))
    # the first block's attention, rebuilt from the products (float layers as the model runs them)
    f = _gpt(None)
    assert not np.array_equal(f.forward(IDS).view(np.int32), y1.view(np.int32))
    P = m.parameters()
    B, L = IDS.shape
    from lutcore.models import _layers as nn
    x = P["wte"][IDS] + P["wpe"][:L]
    a, _ = nn.layernorm_fwd(x, P["h.0.ln1.weight"], P["h.0.ln1.bias"], CFG.ln_eps)
    qkv = nn.linear_fwd(a, P["h.0.attn.qkv.weight"], P["h.0.attn.qkv.bias"], None)
    H, hd = CFG.heads, CFG.dim // CFG.heads
    qkv = np.ascontiguousarray(qkv.reshape(B, L, 3, H, hd).transpose(2, 0, 3, 1, 4))
    u = approx.mitchell()
    from lutcore.models.gpt import _unit_attention
    got, att = _unit_attention(qkv[0], qkv[1], qkv[2], u, u, "h.0.", None)
    for b in range(B):
        for h in range(H):
            s = attn_scores(qkv[0, b, h], qkv[1, b, h], u) * np.float32(1 / math.sqrt(hd))
            z = np.where(np.tril(np.ones((L, L), bool)), s.astype(np.float64), -np.inf)
            ref = np.exp(z - z.max(-1, keepdims=True))
            ref /= ref.sum(-1, keepdims=True)                         # the softmax of the units' scores
            assert np.allclose(att[b, h], ref, atol=2e-6) and not np.triu(att[b, h], 1).any()
            want = attn_values(att[b, h], qkv[2, b, h], u)
            assert np.array_equal(got[b, h].view(np.int32), want.view(np.int32))


def test_exact_units_stay_near_float_and_training_runs_through_them():
    f, e = _gpt(None), _gpt({"*.qk": "exact", "*.pv": "exact"})
    assert np.abs(e.forward(IDS) - f.forward(IDS)).max() < 0.05
    loss, grads = e.loss_and_grads(IDS, IDS)
    assert np.isfinite(loss) and all(np.isfinite(g).all() for g in grads.values())
    assert abs(loss - f.loss(IDS, IDS)) < 0.05


def test_ste_backward_is_float_attentions_gradient_at_the_units_probabilities():
    """The block's cache holds the units' probabilities (the bits of an independent _unit_attention
    call), and the block's gradients are the float attention backward at them: the same as the
    gradients of a GPT whose attention forward returns those probabilities in float."""
    import lutcore.models.gpt as G
    from lutcore.models.gpt import _unit_attention
    one = GPTConfig(vocab=40, dim=32, context=16, layers=1, heads=2, seed=1)
    m = GPT(one, units={"h.0.attn.qk": "mitchell", "h.0.attn.pv": "mitchell"})
    u = approx.mitchell()
    x = m.parameters()["wte"][IDS] + m.parameters()["wpe"][:IDS.shape[1]]
    _, cache = m._block_fwd(0, x)
    q, k, v, att = cache[2], cache[3], cache[4], cache[5]
    _, want_att = _unit_attention(q, k, v, u, u, "h.0.", None)
    assert np.array_equal(att.view(np.int32), want_att.view(np.int32))
    assert not np.array_equal(att, G.causal_attention(q, k, v)[1])          # not float attention's
    loss, grads = m.loss_and_grads(IDS, IDS)
    ref = GPT(one)                   # float attention's branch, its forward swapped for the units'

    def fwd(q_, k_, v_):
        return _unit_attention(q_, k_, v_, u, u, "h.0.", None)
    saved = G.attention_fwd
    try:
        G.attention_fwd = fwd
        loss2, grads2 = ref.loss_and_grads(IDS, IDS)                          # the float backward
    finally:
        G.attention_fwd = saved
    assert loss2 == loss
    for n in grads:
        assert np.array_equal(grads[n], grads2[n]), n


def test_counts_and_bad_input():
    m = _gpt(None)
    c = m.count_products(IDS, attention=True)
    B, L = IDS.shape
    assert c["h.0.attn.qk"] == B * CFG.heads * L * L * (CFG.dim // CFG.heads) == c["h.1.attn.pv"]
    assert "h.0.attn.qk" not in m.count_products(IDS)
    with pytest.raises(ValueError, match="attention products .* no attention"):
        MambaLM(MambaConfig(d_model=8, n_layer=1, vocab_size=40, d_state=4), units={"*.qk": "exact"})
    bad = Units.from_mul(lambda a, b: a * b + (a == 0) * (b > 3), name="zero-leaks")
    with pytest.raises(ValueError, match="h.1.attn.pv: units 'zero-leaks' give"):
        _gpt({"h.1.attn.pv": bad})
    with pytest.raises(ValueError, match="h.0.attn.pv: units 'exact' .* signed 1-bit first operand"):
        _gpt({"h.0.attn.pv": "exact:1s x 8s"})
    with pytest.raises(ValueError, match="h.0.attn.qk"):
        _gpt({"h.0.attn.qk": Units.exact().with_accumulator(
            __import__("lutcore.units.accumulator", fromlist=["Accumulator"]).Accumulator(
                16, True, adder=__import__("test_accum_paths")._or1_adder()))})
