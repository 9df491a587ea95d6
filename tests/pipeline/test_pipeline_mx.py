"""The pipeline through MX units (lutcore.units.mxunits.MXUnits: "mxfp8", "mxfp4:mitchell", ...) on tiny
random Hugging Face checkpoints (test_pipeline_models):

* ``Pipeline.from_pretrained(dir, units="mxfp8")`` gives lutcore.torch's ``approximate(hf_model, "mxfp8")``
  logits bit for bit (llama and gpt2; attention in float) — and with attention's products through MX
  units too (``approximate(..., attention=True)`` with the same mapping);
* per-layer mappings mixing MX, integer and float units: each matmul is its own unit's product — a
  fused q/k/v (gate/up) group whose parts differ gives the bits of the parts alone, one whose parts
  agree the bits of each part (an MX column is its own block-scaled sum); the first covering key wins
  ("*" first covers every weight); a split changes no bit;
* ``set_units`` between MX specs of the same element format keeps the weight's MX blocks (nothing
  quantized; the bits of a pipeline built with the new units); to MX units of another element
  format, or from integer units to MX units, the blocks are made from the Q8's values (observed:
  other bits than a build with those units, which quantizes the float weight) — unless the stage
  was built with ``keep_mx``; back to the build's element format restores its blocks; MX -> integer
  units gives the integer build's bits (and the fused decode again);
* ``generate`` through MX weights: the fused one-token decode is not taken, and the tokens are the
  argmax of full recomputes (attention in float).
"""
import numpy as np
import pytest

import torch

import lutcore
import lutcore.torch as lt
from lutcore.ops.matmul import matmul
from lutcore.pipeline import Pipeline, load_stage_weights, plan_from_splits, to_kn
from lutcore.pipeline.stage import Stage
from lutcore.quant import qmatmul, quantize
from lutcore.units import approx, resolve
from lutcore.units.mxunits import MXUnits

from test_pipeline_models import V, hf_model, save

PROMPT = np.random.default_rng(4).integers(1, V, 9)
LONG = np.random.default_rng(5).integers(1, V, 40)         # more than one MX block of positions


def U(spec):
    return resolve(spec, mx=True)


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """{kind: (checkpoint directory, the transformers model)}: 3 layers each."""
    out = {}
    for kind, over in (("llama", dict(num_hidden_layers=3)), ("gpt2", dict(n_layer=3))):
        m = hf_model(kind, seed=7, **over)
        out[kind] = (str(save(m, tmp_path_factory.mktemp(kind))), m)
    return out


def _eq(tag, a, b):
    print(f"{tag}: max |diff| {float(np.max(np.abs(a.astype(np.float64) - b))):.3e}")
    assert a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32)), tag


def _torch_logits(model, units, ids, attention=False):
    m = lt.approximate(model, units, attention=attention)
    with torch.no_grad():
        return m(torch.from_numpy(np.asarray(ids, np.int64)[None])).logits[0].numpy()


def _kn(w, name, o, i):
    return np.ascontiguousarray(to_kn(w[name], o, i, "out_in"), np.float32)


# ============================================================================ against lutcore.torch

@pytest.mark.parametrize("units", ["mxfp8", "mxfp4:mitchell"])
@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_mx_pipeline_is_lutcore_torchs_logits(ckpt, kind, units):
    """The same MX products on the same operands: 0.0 difference (the float parts agree to the bit
    where it matters: every MX-quantized activation lands on the same codes)."""
    path, model = ckpt[kind]
    with Pipeline.from_pretrained(path, units=units) as p:
        assert all(isinstance(u, MXUnits) and u.name == units for u in p.assignment().values())
        _eq(f"{kind} {units}", p.logits(LONG), _torch_logits(model, units, LONG))


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_mx_attention_pipeline_is_lutcore_torchs_logits(ckpt, kind):
    path, model = ckpt[kind]
    mapping = {"*": "mxfp8", "*.qk": "mxfp8", "*.pv": "mxfp4"}
    with Pipeline.from_pretrained(path, units=mapping) as p:
        a = p.assignment(attention=True)
        assert {u.name for n, u in a.items() if n.endswith(".pv")} == {"mxfp4"}
        _eq(f"{kind} MX attention", p.logits(LONG), _torch_logits(model, mapping, LONG, attention=True))


# ============================================================================ per-layer mappings

MIXED = {   # MX, integer and float; "*" last: the first covering key wins
    "llama": {"model.layers.0.self_attn.q_proj": "mxfp4:mitchell", "model.layers.0.self_attn.k_proj": "exact",
              "model.layers.0.self_attn.v_proj": "none", "*.down_proj": "mitchell", "model.layers.2.mlp.up_proj":
              "mxint8xfp8", "lm_head": "none", "*": "mxfp8"},
    "gpt2": {"transformer.h.0.attn.c_attn": "mxfp4:mitchell", "transformer.h.1.mlp": "mitchell",
             "transformer.h.2.attn.c_proj": "none", "lm_head": "none", "*": "mxint8"},
}


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_mixed_mapping_split_and_assignment(ckpt, kind):
    path, _ = ckpt[kind]
    with Pipeline.from_pretrained(path, units=MIXED[kind]) as whole, \
            Pipeline.from_pretrained(path, splits=[1, 2], units=MIXED[kind], threads=2) as split:
        a = whole.assignment()
        kinds = {("float" if u is None else "mx" if isinstance(u, MXUnits) else "int") for u in a.values()}
        assert kinds == {"float", "mx", "int"} and a["lm_head"] is None
        assert split.assignment() == a
        if kind == "llama":
            assert a["model.layers.0.self_attn.q_proj"].name == "mxfp4:mitchell"
            assert a["model.layers.0.self_attn.k_proj"].name == "exact" and a["model.layers.0.self_attn.v_proj"] is None
            assert a["model.layers.1.mlp.down_proj"].name == "mitchell"
            assert a["model.layers.1.mlp.up_proj"].name == "mxfp8"
            assert a["model.layers.2.mlp.up_proj"].name == "mxint8xfp8"
        _eq(f"{kind} split", split.logits(LONG), whole.logits(LONG))
        seq = whole.generate(PROMPT, 5)
        assert split.generate(PROMPT, 5).tolist() == seq.tolist()


def test_star_first_covers_every_weight(ckpt):
    """The first key covering a layer gives its units: with "*" first, the keys after it name layers
    (no error) but assign nothing — every weight, lm_head included, runs mxfp8."""
    path, _ = ckpt["llama"]
    with Pipeline.from_pretrained(path, units={"*": "mxfp8", "*.q_proj": "mxfp4:mitchell", "lm_head": "none"}) as p:
        assert {u.name for u in p.assignment().values()} == {"mxfp8"}


def test_each_matmul_is_its_units_product(ckpt):
    """Layer 0 of the llama checkpoint: the fused q/k/v with q through mxfp4:mitchell, k through the
    exact int8 unit and v in float — each the product of its part alone; layer 2's gate (mxfp8) and up
    (mxint8xfp8) likewise; layer 1's gate/up (both mxfp8, one fused matrix) are mxfp8's products of
    each part, and its down_proj the int8 Mitchell product; lm_head in float."""
    path, _ = ckpt["llama"]
    with Pipeline.from_pretrained(path, units=MIXED["llama"]) as p:
        st = p.stages[0]
        spec = st.spec
        w = load_stage_weights(path, spec, plan_from_splits(spec, [spec.layers])[0])
        C, Q, KVd, I = spec.hidden, spec.q_dim, spec.kv_dim, spec.inter
        rng = np.random.default_rng(0)
        h = rng.standard_normal((5, C)).astype(np.float32)
        hi = rng.standard_normal((5, I)).astype(np.float32)
        pre = "model.layers.{}."
        q = U("mxfp4:mitchell").matmul(h, _kn(w, pre.format(0) + "self_attn.q_proj.weight", Q, C))
        k = qmatmul(h, quantize(_kn(w, pre.format(0) + "self_attn.k_proj.weight", KVd, C), axis=0), "exact")
        v = matmul(h, _kn(w, pre.format(0) + "self_attn.v_proj.weight", KVd, C))
        L0, L1, L2 = st.layers
        _eq("fused q|k|v", st._mm(h, L0.wqkv, None, np.empty((5, Q + 2 * KVd), np.float32)),
            np.concatenate([q, k, v], axis=1))
        for L, i, us in ((L1, 1, ("mxfp8", "mxfp8")), (L2, 2, ("mxfp8", "mxint8xfp8"))):
            want = [U(u).matmul(h, _kn(w, pre.format(i) + f"mlp.{r}_proj.weight", I, C))
                    for u, r in zip(us, ("gate", "up"))]
            _eq(f"layer {i} gate|up", st._mm(h, L.wup, None, np.empty((5, 2 * I), np.float32)),
                np.concatenate(want, axis=1))
        d = qmatmul(hi, quantize(_kn(w, pre.format(1) + "mlp.down_proj.weight", C, I), axis=0), approx.mitchell())
        _eq("layer 1 down_proj", st._mm(hi, L1.wdown, None, np.empty((5, C), np.float32)), d)
        o = U("mxfp8").matmul(h[:, :Q], _kn(w, pre.format(1) + "self_attn.o_proj.weight", C, Q))
        _eq("layer 1 o_proj", st._mm(np.ascontiguousarray(h[:, :Q]), L1.wo, None, np.empty((5, C), np.float32)), o)


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_mx_and_float_mapping_is_lutcore_torchs(ckpt, kind):
    """A mapping of MX units and float inside the layers gives lutcore.torch's logits with the same
    mapping.  (No integer unit: lutcore.torch's int8 layers quantize their activations otherwise than
    the pipeline's; and an MX head: a float head's sums run in another order than torch's, last-bit
    differences that no later quantization absorbs.)"""
    path, model = ckpt[kind]
    mapping = {k: v for k, v in MIXED[kind].items() if (v == "none" and k != "lm_head") or v.startswith("mx")}
    with Pipeline.from_pretrained(path, units=mapping) as p:
        _eq(kind, p.logits(LONG), _torch_logits(model, mapping, LONG))


# ============================================================================ set_units

def _mx_blocks(p):
    """{(stage, module name): (QLinear, its MX blocks)} over the pipeline's stages."""
    return {(i, n): (m, m.mx) for i, s in enumerate(p.stages) for m, n, _ in s._unit_matrices()}


def test_set_units_within_an_element_format_keeps_the_blocks(ckpt, monkeypatch):
    path, _ = ckpt["llama"]
    new = {"model.layers.0.self_attn.q_proj": "mxfp8:mitchell", "model.layers.1.mlp": "mxfp8@m10:promote=16",
           "model.layers.2": "mxint8xfp8", "lm_head": "mxfp8:lmul"}           # second operand e4m3 throughout
    with Pipeline.from_pretrained(path, splits=[2, 1], units="mxfp8") as p:
        p.generate(PROMPT, 3)
        before = _mx_blocks(p)
        calls = []
        real = MXUnits.quantize
        monkeypatch.setattr(MXUnits, "quantize", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
        p.set_units(new)
        assert calls == []                                        # nothing quantized
        after = _mx_blocks(p)
        same = [k for k, (m, mx) in after.items() if m is before[k][0]]
        assert len(same) == len(after) - 3                        # all but the split q|k|v of layer 0
        assert all(after[k][1] is before[k][1] for k in same)     # the very blocks
        monkeypatch.setattr(MXUnits, "quantize", real)
        want = {**new, "*": "mxfp8"}
        with Pipeline.from_pretrained(path, units=want) as fresh:
            assert {n: u.digest for n, u in p.assignment().items()} == \
                {n: u.digest for n, u in fresh.assignment().items()}
            _eq("after set_units", p.logits(LONG), fresh.logits(LONG))
            assert p.generate(PROMPT, 4).tolist() == fresh.generate(PROMPT, 4).tolist()


def test_set_units_to_another_element_format_requantizes_from_the_q8(ckpt):
    """Observed: mxfp8 -> mxfp4 makes the e2m1 blocks from the Q8's values (every QLinear's product is
    mxfp4's with the dequantized Q8 as the weight), so the logits are not those of a pipeline built
    with mxfp4 (which quantizes the float weight); back to mxfp8, the build's own blocks return."""
    path, _ = ckpt["llama"]
    with Pipeline.from_pretrained(path, units="mxfp8") as p, Pipeline.from_pretrained(path, units="mxfp8") as f8, \
            Pipeline.from_pretrained(path, units="mxfp4") as f4:
        want8, want4 = f8.logits(LONG), f4.logits(LONG)
        p.set_units("mxfp4")
        u4 = U("mxfp4")
        x = np.random.default_rng(1).standard_normal((3, p.spec.hidden)).astype(np.float32)
        head = p.stages[0]._head
        _eq("head from the Q8", head(x), u4.matmul(x, head.q8.dequantize()))
        got4 = p.logits(LONG)
        assert not np.array_equal(got4, want4)
        print(f"mxfp8 -> mxfp4 vs built with mxfp4: max |diff| {float(np.abs(got4 - want4).max()):.3g}")
        p.set_units("mxfp8")
        _eq("back to mxfp8", p.logits(LONG), want8)


def test_set_units_from_int8_to_mx_and_back(ckpt, monkeypatch):
    """Built with the exact int8 unit, switched to mxfp8: the blocks come from the Q8 (observed: not
    the bits of a build with mxfp8); a stage built with keep_mx=["mxfp8"] has the float weight's blocks
    too and gives them.  MX -> int8 gives the int8 build's bits and its fused one-token decode."""
    path, _ = ckpt["llama"]
    with Pipeline.from_pretrained(path, units="exact") as p, Pipeline.from_pretrained(path, units="mxfp8") as f8, \
            Pipeline.from_pretrained(path, units="exact") as fe:
        want8, want_e = f8.logits(LONG), fe.logits(LONG)
        p.set_units("mxfp8")
        x = np.random.default_rng(2).standard_normal((3, p.spec.hidden)).astype(np.float32)
        head = p.stages[0]._head
        _eq("head from the Q8", head(x), U("mxfp8").matmul(x, head.q8.dequantize()))
        assert not np.array_equal(p.logits(LONG), want8)
        spec = p.spec
        plan = plan_from_splits(spec, [spec.layers])[0]
        kept = Pipeline.from_stages([Stage(spec, plan, load_stage_weights(path, spec, plan), units="exact",
                                           keep_mx=["mxfp8", U("mxfp4")])])
        kept.set_units("mxfp8")
        _eq("keep_mx", kept.logits(LONG), want8)
        kept.set_units("mxfp4")
        with Pipeline.from_pretrained(path, units="mxfp4") as f4:
            _eq("keep_mx mxfp4", kept.logits(LONG), f4.logits(LONG))
        with pytest.raises(TypeError, match="keep_mx: expected MX units.*'mitchell'"):
            Stage(spec, plan, load_stage_weights(path, spec, plan), units="exact", keep_mx=["mitchell"])
        # MX -> int8: the Q8 was never touched
        p.set_units("exact")
        _eq("back to exact", p.logits(LONG), want_e)
        st = p.stages[0]
        assert st._fusable and fe.stages[0]._fusable
        fused = []
        real = Stage._decode_fused
        monkeypatch.setattr(Stage, "_decode_fused", lambda self, *a: fused.append(1) or real(self, *a))
        assert p.generate(PROMPT, 4).tolist() == fe.generate(PROMPT, 4).tolist()
        assert fused                                              # the native one-token decode again


# ============================================================================ generate

@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_generate_through_mx_weights_is_the_full_recompute_argmax(ckpt, kind, monkeypatch):
    path, _ = ckpt[kind]
    monkeypatch.setattr(Stage, "_decode_fused", lambda *a: pytest.fail("the fused decode ran for MX weights"))
    layer1 = {"llama": "model.layers.1", "gpt2": "transformer.h.1"}[kind]
    with Pipeline.from_pretrained(path, units={layer1: "mitchell", "*": "mxfp8"}) as p, \
            Pipeline.from_pretrained(path, splits=[1, 1, 1], units="mxfp4:mitchell") as p3:
        assert not any(s._fusable for s in p.stages + p3.stages)
        for pipe in (p, p3):
            seq = pipe.generate(PROMPT, 6)
            toks = list(PROMPT)
            for _ in range(6):
                toks.append(int(np.argmax(pipe.logits(np.array(toks))[-1])))
            assert seq.tolist() == toks


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_generate_through_mx_attention_is_the_full_recompute_argmax(ckpt, kind):
    """attention's q k^T and p v through MX units: p v is causal (each position's values in blocks
    along D), so a token decoded with the KV cache has the bits of the full recompute."""
    path, _ = ckpt[kind]
    with Pipeline.from_pretrained(path, units={"*.qk": "mxfp8", "*.pv": "mxfp4:mitchell", "*": "mxfp8"}) as p:
        seq = p.generate(PROMPT, 6)
        toks = list(PROMPT)
        for _ in range(6):
            toks.append(int(np.argmax(p.logits(np.array(toks))[-1])))
        assert seq.tolist() == toks
        full = p.logits(np.array(toks))
        for n in (len(PROMPT), len(toks) - 1):                   # a prefix's rows: the same bits
            assert np.array_equal(p.logits(np.array(toks[:n])).view(np.uint32), full[:n].view(np.uint32))
