"""Per-layer units: the mapping semantics (lutcore.units.assign), lutcore.torch
(approximate / set_units / assignment / save_assignment / load_assignment) and
lutcore's own GPT / MambaLM (set_units, assignment, layer_names).

Every per-layer forward is held to a plain expectation: each layer computed on its
own with the unit it was assigned (torch: the numpy oracle of the layer contract,
tests/reference/torch_layers_ref.py; the language models: the single-units model run
block by block), bit for bit.
"""
from _paths import TESTS  # noqa: F401
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import torch
from torch import nn

import lutcore.torch as lt
from lutcore.models import GPT, MambaLM
from lutcore.models.gpt import GPTConfig
from lutcore.models.mamba import MambaConfig
from lutcore.units import Units, approx, assign
from reference.torch_layers_ref import conv2d_ref, linear_ref

NAMES = ["conv1", "layer3.0.conv1", "layer3.0.conv2", "layer3.1.conv1", "layer3.1.conv2", "layer30", "fc"]


# ============================================================================ mapping semantics

def test_keys_exact_prefix_glob_first_match_wins():
    m = {"layer3.*.conv2": "a", "layer3": "b", "fc": "c", "*": "d"}
    got = assign.match(m, NAMES)
    assert got == {"conv1": "*", "layer3.0.conv1": "layer3", "layer3.0.conv2": "layer3.*.conv2",
                   "layer3.1.conv1": "layer3", "layer3.1.conv2": "layer3.*.conv2", "layer30": "*", "fc": "fc"}
    assert assign.covers("layer3", "layer3.0.conv1") and not assign.covers("layer3", "layer30")
    assert assign.covers("layer?", "layer3.0.conv1")            # a glob naming a module covers it
    assert not assign.covers("layer3.0", "layer3.0conv")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "ab", "0", "1", "10"]), min_size=1, max_size=4),
       st.lists(st.sampled_from(["a", "b", "ab", "0", "1", "10"]), min_size=1, max_size=4))
def test_a_plain_key_covers_exactly_its_dotted_descendants(key_parts, name_parts):
    key, name = ".".join(key_parts), ".".join(name_parts)
    assert assign.covers(key, name) == (name_parts[:len(key_parts)] == key_parts)


def test_key_matching_no_layer_lists_the_layers():
    with pytest.raises(ValueError) as e:
        assign.match({"layer3": 1, "layer4": 2, "lay*x": 3}, NAMES)
    msg = str(e.value)
    assert "'layer4'" in msg and "'lay*x'" in msg and "'layer3'" not in msg.split("match")[0]
    assert all(n in msg for n in NAMES)
    with pytest.raises(TypeError, match="str"):
        assign.match({3: "exact"}, NAMES)


def test_specs_resolved_once_and_none_is_float(monkeypatch):
    calls = []
    real = assign.resolve_spec

    def counting(spec):
        calls.append(spec)
        return real(spec)
    monkeypatch.setattr(assign, "resolve_spec", counting)
    got = assign.assign({"layer3": "mitchell", "fc": "none", "conv1": None, "*": "mitchell"}, NAMES)
    assert sorted(map(str, calls)) == ["None", "mitchell", "none"]
    assert got["fc"] is None and got["conv1"] is None
    assert got["layer30"] is got["layer3.0.conv1"] and got["layer30"].name == "mitchell"
    part = assign.assign({"fc": "exact"}, NAMES)
    assert list(part) == ["fc"]
    full = assign.assign({"fc": "exact"}, NAMES, fill=True)
    assert list(full) == NAMES and full["conv1"] is None
    with pytest.raises(ValueError, match=r"units\['fc'\]"):
        assign.assign({"fc": "no-such-unit"}, NAMES)


# ============================================================================ lutcore.torch

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.layer3 = nn.Sequential(Block(4), Block(4))
        self.layer30 = nn.Linear(4 * 5 * 7, 11)
        self.fc = nn.Linear(11, 3)

    def forward(self, x, layer=None):
        layer = layer or (lambda name, mod, h: mod(h))
        h = torch.relu(layer("conv1", self.conv1, x))
        for i, b in enumerate(self.layer3):
            h = torch.relu(layer(f"layer3.{i}.conv1", b.conv1, h))
            h = layer(f"layer3.{i}.conv2", b.conv2, h)
        h = torch.relu(layer("layer30", self.layer30, h.flatten(1)))
        return layer("fc", self.fc, h)


def _net():
    torch.manual_seed(0)
    return Net().eval()


def _x():
    return torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(1))


def _reference(model, x, per_layer):
    """The forward with each layer computed alone: the numpy oracle with its unit's table, or
    torch's float layer for None."""
    def layer(name, mod, h):
        u = per_layer.get(name)
        if u is None:
            return _float(mod, h)
        w = mod.weight.detach().numpy()
        b = None if mod.bias is None else mod.bias.detach().numpy()
        if isinstance(mod, nn.Linear):
            return torch.from_numpy(linear_ref(h.detach().numpy(), w, b, u.mul))
        return torch.from_numpy(conv2d_ref(h.detach().numpy(), w, b, u.mul, padding=1))
    with torch.no_grad():
        return model(x, layer)


def _float(mod, h):
    if isinstance(mod, nn.Linear):
        return torch.nn.functional.linear(h, mod.weight, mod.bias)
    return torch.nn.functional.conv2d(h, mod.weight, mod.bias, padding=1)


def _bits_equal(a, b):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.shape == b.shape
    print("max |diff|", float(np.max(np.abs(a.astype(np.float64) - b))))
    assert np.array_equal(a.view(np.int32), b.view(np.int32))


def test_approximate_mapping_each_layer_through_its_unit():
    net, x = _net(), _x()
    mit, tr = approx.mitchell(), approx.truncated(6)
    mapping = {"layer3.*.conv2": mit, "layer3": "truncated:6", "fc": "none", "layer30": None, "conv1": "exact"}
    m = lt.approximate(net, mapping)
    a = lt.assignment(m)
    assert list(a) == NAMES
    want = {"conv1": Units.exact(), "layer3.0.conv1": tr, "layer3.0.conv2": mit, "layer3.1.conv1": tr,
            "layer3.1.conv2": mit, "layer30": None, "fc": None}
    assert {n: None if u is None else u.digest for n, u in a.items()} == \
        {n: None if u is None else u.digest for n, u in want.items()}
    assert all(isinstance(mod, lt.ApproxLayer) for n, mod in m.named_modules() if n in NAMES)
    with torch.no_grad():
        _bits_equal(m(x), _reference(net, x, want))
    # a layer no key covers stays float, as one mapped to None
    m2 = lt.approximate(net, {"layer3.0": "mitchell"})
    assert [n for n, u in lt.assignment(m2).items() if u is not None] == ["layer3.0.conv1", "layer3.0.conv2"]
    with torch.no_grad():
        _bits_equal(m2(x), _reference(net, x, {"layer3.0.conv1": mit, "layer3.0.conv2": mit}))
    with pytest.raises(ValueError, match="layer4"):
        lt.approximate(net, {"layer4": "mitchell"})


def test_all_keys_one_unit_equals_the_single_units_path_and_float_equals_torch():
    net, x = _net(), _x()
    with torch.no_grad():
        _bits_equal(lt.approximate(net, {"*": "mitchell"})(x), lt.approximate(net, "mitchell")(x))
        _bits_equal(lt.approximate(net, {"*": None})(x), net(x))          # float exactly as torch
        _bits_equal(lt.approximate(net, {"fc": "none"}, skip=["layer3"])(x), net(x))


def test_set_units_mapping_keeps_uncovered_layers_and_never_requantizes(monkeypatch):
    net, x = _net(), _x()
    m = lt.approximate(net, "mitchell")
    with torch.no_grad():
        m(x)                                                    # weights quantized once here
    from lutcore.torch import functional as fn
    calls = []
    for name in ("of_linear", "of_conv"):
        real = getattr(fn.QWeight, name)
        monkeypatch.setattr(fn.QWeight, name, staticmethod(lambda *a, _r=real, **k: calls.append(1) or _r(*a, **k)))
    lt.set_units(m, {"layer3.1": "truncated:6", "fc": None})
    a = lt.assignment(m)
    assert [None if u is None else u.name for u in a.values()] == \
        ["mitchell", "mitchell", "mitchell", "truncated:6", "truncated:6", "mitchell", None]
    tr, mit = approx.truncated(6), approx.mitchell()
    with torch.no_grad():
        got = m(x)
    assert calls == []                                          # switching re-quantized nothing
    want = {n: (None if u is None else u) for n, u in a.items()}
    _bits_equal(got, _reference(net, x, want))
    # a whole assignment back: the search's round trip
    lt.set_units(m, {n: mit for n in NAMES})
    lt.set_units(m, a)
    assert {n: None if u is None else u.digest for n, u in lt.assignment(m).items()} == \
        {n: None if u is None else u.digest for n, u in a.items()}
    with torch.no_grad():
        _bits_equal(m(x), got)
    assert calls == []
    lt.set_units(m, "none")                                     # one spec: every layer
    with torch.no_grad():
        _bits_equal(m(x), net(x))
    with pytest.raises(ValueError, match="layer30"):
        lt.set_units(m, {"layer3.2": "exact"})
    assert tr.name == "truncated:6"


def test_layer_units_setter_is_cheap():
    import time
    m = lt.approximate(_net(), "exact")
    layers = [mod for _, mod in lt.approximate_layers(m)]
    us = [approx.mitchell(), approx.truncated(4), None]
    t0 = time.perf_counter()
    for i in range(3000):
        layers[i % len(layers)].units = us[i % 3]
    per = (time.perf_counter() - t0) / 3000
    print(f"units setter: {per * 1e6:.2f} us")
    assert per < 50e-6


def test_assignment_round_trip_json(tmp_path):
    net, x = _net(), _x()
    d = tmp_path / "m8"
    approx.truncated(3).save(d)
    custom = Units.from_mul(np.asarray(approx.mitchell().mul), name="mine")
    m = lt.approximate(net, {"conv1": str(d), "layer3.0": "mitchell", "layer30": "truncated:6", "fc": None,
                             "*": "exact"})
    f = tmp_path / "a.json"
    lt.save_assignment(m, f)
    doc = json.loads(f.read_text())
    assert doc["format"] == "lutcore-assignment"
    L = doc["layers"]
    assert L["fc"] is None and L["layer3.0.conv1"]["name"] == "mitchell" and "path" not in L["layer3.0.conv1"]
    assert L["conv1"]["path"] == "m8" and L["conv1"]["digest"] == approx.truncated(3).digest   # relative to a.json
    back = lt.load_assignment(f)
    assert {n: None if u is None else u.digest for n, u in back.items()} == \
        {n: None if u is None else u.digest for n, u in lt.assignment(m).items()}
    m2 = lt.approximate(net, str(f))                            # an assignment file as the units
    with torch.no_grad():
        _bits_equal(m2(x), m(x))
    # a unit built in memory: an error naming the layer, or saved with units_dir=
    lt.set_units(m, {"fc": custom})
    with pytest.raises(ValueError, match="'fc'.*units_dir"):
        lt.save_assignment(m, tmp_path / "b.json")
    assert not (tmp_path / "b.json").exists()
    lt.save_assignment(m, tmp_path / "b.json", units_dir=tmp_path / "units")
    assert lt.load_assignment(tmp_path / "b.json")["fc"].digest == custom.digest
    # tables changed since: the digest mismatch names the layer and the path
    approx.truncated(5).save(d)
    with pytest.raises(ValueError, match=r"layer 'conv1'.*m8"):
        lt.load_assignment(f)
    # a plain {key: spec} JSON object is a mapping
    g = tmp_path / "plain.json"
    g.write_text(json.dumps({"layer3": "mitchell", "fc": None}))
    assert lt.load_assignment(g) == {"layer3": "mitchell", "fc": None}
    with pytest.raises(ValueError, match="not a readable JSON"):
        (tmp_path / "bad.json").write_text("{")
        lt.load_assignment(tmp_path / "bad.json")


def test_loaded_from_is_recorded(tmp_path):
    d = tmp_path / "u"
    approx.mitchell().save(d)
    assert Units.load(d).loaded_from == os.path.abspath(d)
    c = tmp_path / "m.c"
    c.write_text("#include <stdint.h>\nint16_t mul8(int8_t a, int8_t b) { return (int16_t)(a * b); }\n")
    from lutcore.units import resolve
    assert resolve(str(c)).loaded_from == f"{os.path.abspath(c)}:mul8"
    assert approx.mitchell().loaded_from is None


# ============================================================================ GPT / MambaLM

GCFG = GPTConfig(vocab=37, dim=16, context=9, layers=2, heads=2, seed=3)
MCFG = MambaConfig(vocab_size=37, d_model=16, n_layer=2, d_state=4, seed=3)


def _ids(V=37, shape=(2, 9), seed=5):
    return np.random.default_rng(seed).integers(0, V, shape)


def test_gpt_layer_names_and_uniform_mapping_equals_single_units():
    m = GPT(GCFG)
    names = m.layer_names()
    assert names == [f"h.{i}.{k}" for i in range(2) for k in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")] \
        + ["lm_head"]
    assert all(u is None for u in m.assignment().values())
    ids = _ids()
    single = GPT(GCFG, params=m.parameters(), units="mitchell")
    per = GPT(GCFG, params=m.parameters()).set_units({"*": "mitchell"})
    assert per.units is not None and per.units.name == "mitchell"
    assert np.array_equal(per.forward(ids), single.forward(ids))
    l1, g1 = single.loss_and_grads(ids, ids)
    l2, g2 = per.loss_and_grads(ids, ids)
    assert l1 == l2 and all(np.array_equal(g1[k], g2[k]) for k in g1)
    assert np.array_equal(GPT(GCFG, params=m.parameters(), units={"*": None}).forward(ids), m.forward(ids))


def test_gpt_per_layer_equals_blocks_run_with_their_units():
    base = GPT(GCFG)
    P = base.parameters()
    ids = _ids()
    m = GPT(GCFG, params=P, units={"h.0": "mitchell", "h.1": "truncated:6"})          # the head: float
    assert m.units is None and m.assignment()["lm_head"] is None
    mit, tr = GPT(GCFG, params=P, units="mitchell"), GPT(GCFG, params=P, units="truncated:6")
    h = P["wte"][ids] + P["wpe"][:ids.shape[1]]
    h = mit._block_fwd(0, h)[0]
    h = tr._block_fwd(1, h)[0]
    from lutcore.models import _layers as L
    hf, _ = L.layernorm_fwd(h, P["ln_f.weight"], P["ln_f.bias"], GCFG.ln_eps)
    want = L.linear_fwd(hf, P["wte"], None, None)
    assert np.array_equal(m.forward(ids), want)


def test_gpt_each_matmul_goes_through_its_layers_unit(monkeypatch):
    from lutcore.models.unitmm import UnitMatmul
    m = GPT(GCFG, units="exact")
    by_id = {id(v): k[:-len(".weight")] if k.endswith(".weight") else "lm_head" for k, v in m.parameters().items()}
    seen = []
    real = UnitMatmul.forward

    def rec(self, x2, w):
        seen.append((by_id[id(w)], self.units.name))
        return real(self, x2, w)
    monkeypatch.setattr(UnitMatmul, "forward", rec)
    m.set_units({"h.1.mlp": "mitchell", "h.0.attn.qkv": None, "lm_head": "reduced:4"})
    m.forward(_ids())
    want = {"h.0.attn.proj": "exact", "h.0.mlp.fc": "exact", "h.0.mlp.proj": "exact", "h.1.attn.qkv": "exact",
            "h.1.attn.proj": "exact", "h.1.mlp.fc": "mitchell", "h.1.mlp.proj": "mitchell", "lm_head": "reduced:4"}
    assert dict(seen) == want and len(seen) == len(want)          # h.0.attn.qkv ran in float
    with pytest.raises(ValueError, match="h.2"):
        m.set_units({"h.2": "exact"})


def test_mamba_per_layer():
    base = MambaLM(MCFG)
    names = base.layer_names()
    assert names == [f"backbone.layers.{i}.mixer.{k}" for i in range(2)
                     for k in ("in_proj", "x_proj", "dt_proj", "out_proj")] + ["lm_head"]
    P = base.parameters()
    ids = _ids(shape=(2, 7))
    single = MambaLM(MCFG, params=P, units="mitchell")
    per = MambaLM(MCFG, params=P).set_units({"*": "mitchell"})
    assert np.array_equal(per.forward(ids), single.forward(ids))
    l1, g1 = single.loss_and_grads(ids, ids)
    l2, g2 = per.loss_and_grads(ids, ids)
    assert l1 == l2 and all(np.array_equal(g1[k], g2[k]) for k in g1)
    # block 0 through mitchell, block 1 and the head float: the blocks run alone
    m = MambaLM(MCFG, params=P, units={"backbone.layers.0": "mitchell"})
    h = P["backbone.embeddings.weight"][ids]
    h = single.blocks[0].forward(h, save=False)[0]
    h = base.blocks[1].forward(h, save=False)[0]
    from lutcore.models import _layers as L
    hf, _ = L.rmsnorm_fwd(h, P["backbone.norm_f.weight"], MCFG.rms_eps)
    assert np.array_equal(m.forward(ids), L.linear_fwd(hf, base.head_weight, None, None))
    # switching units keeps the block objects and costs no rebuild
    blocks = list(m.blocks)
    m.set_units({"backbone.layers.1.mixer.out_proj": "truncated:6"})
    assert m.blocks == blocks and m.assignment()["backbone.layers.1.mixer.out_proj"].name == "truncated:6"
    assert m.assignment()["backbone.layers.1.mixer.in_proj"] is None
    # and the step (decoding) path uses them too
    lg, _ = m.step(ids[:, 0])
    want, _ = MambaLM(MCFG, params=P, units=m.assignment()).step(ids[:, 0])
    assert np.array_equal(lg, want)


def test_lm_assignment_saves_and_loads(tmp_path):
    m = GPT(GCFG, units={"h.0": "mitchell", "lm_head": "exact"})
    f = assign.save_assignment(m, tmp_path / "a.json")
    back = assign.load_assignment(f)
    assert {k: None if u is None else u.name for k, u in back.items()} == \
        {k: None if u is None else u.name for k, u in m.assignment().items()}
    ids = _ids()
    assert np.array_equal(GPT(GCFG, params=m.parameters(), units=str(f)).forward(ids), m.forward(ids))


def test_checkpoint_of_a_mixed_model_is_refused(tmp_path):
    from lutcore.train import Trainer
    m = GPT(GPTConfig(vocab=256, dim=16, context=9, layers=2, heads=2), units={"h.0": "mitchell"})
    assert m.mixed_units and m.units is None
    tr = Trainer(m)
    with pytest.raises(ValueError, match="per-layer units"):
        tr.save_checkpoint(tmp_path / "ck")


def test_assignment_with_circuits_by_path(tmp_path):
    """Units from a Verilog module (mul.v:top) and a C function (mul.c:fn) are saved by path,
    relative to the file, and read back with their digests checked."""
    import shutil
    here = os.path.join(TESTS, "circuits")
    shutil.copy(os.path.join(here, "behavioural_mul.v"), tmp_path / "b.v")
    shutil.copy(os.path.join(here, "array_mul.c"), tmp_path / "a.c")
    net = _net()
    m = lt.approximate(net, {"conv1": f"{tmp_path / 'b.v'}:bmul", "fc": f"{tmp_path / 'a.c'}:mul8_trunc4"})
    a = lt.assignment(m)
    assert a["conv1"].loaded_from == f"{tmp_path / 'b.v'}:bmul" and a["conv1"].is_exact
    f = lt.save_assignment(m, tmp_path / "x.json")
    L = json.loads(open(f).read())["layers"]
    assert L["conv1"]["path"] == "b.v:bmul" and L["fc"]["path"] == "a.c:mul8_trunc4" and L["layer30"] is None
    back = lt.load_assignment(f)
    assert back["fc"].digest == a["fc"].digest and back["conv1"].digest == Units.exact().digest
    src = (tmp_path / "a.c").read_text().replace("array_mul(a, b, 4)", "array_mul(a, b, 6)")
    (tmp_path / "a.c").write_text(src)
    with pytest.raises(ValueError, match=r"layer 'fc'.*a\.c:mul8_trunc4"):
        lt.load_assignment(f)


def test_evaluate_units_on_a_lutcore_model_per_layer():
    from lutcore.evaluate import evaluate_units
    m = GPT(GCFG)
    ids = _ids(shape=(1, 4 * 9 + 1)).reshape(-1)
    res = evaluate_units(m, ids, units=["mitchell", {"*": "mitchell"}, {"h.1.mlp": "truncated:6"}], seq_len=9)
    r = res.rows
    assert r[0]["loss"] == r[1]["loss"] and r[1]["units"] == "per-layer" and r[1]["name"] == "all mitchell"
    assert r[2]["layers"] == {n: ("truncated:6" if n.startswith("h.1.mlp") else "none") for n in m.layer_names()}
    want = GPT(GCFG, params=m.parameters(), units={"h.1.mlp": "truncated:6"})
    wins = np.stack([ids[w * 9: w * 9 + 9] for w in range(4)])
    lg = want.forward(wins).astype(np.float64)
    mx = lg.max(-1, keepdims=True)
    nll = np.log(np.exp(lg - mx).sum(-1)) + mx[..., 0] - np.take_along_axis(
        lg, np.stack([ids[w * 9 + 1: w * 9 + 10] for w in range(4)])[..., None], -1)[..., 0]
    assert abs(r[2]["loss"] - nll.mean()) < 1e-9
    with pytest.raises(ValueError, match="h.5"):
        evaluate_units(m, ids, units=[{"h.5": "exact"}], seq_len=9)
