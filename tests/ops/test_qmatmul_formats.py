"""The block-scaled product through units of other formats (zero points): qmatmul and QLinear
against the plain reference on odd shapes (K not a multiple of the block, blocks of one),
threads 1 and 2 bit-identical, every SIMD path; lutcore's GPT and the pipeline through such
units (a stage split changes no bit, a token decoded with the cache is the full recompute's)."""
import numpy as np
import pytest

import lutcore
from lutcore.quant import QF, QLinear, qmatmul
from lutcore.units import Units
from reference.format_ref import qmatmul_formats_ref

SPECS = ["8u x 8u", "8u x 4u", "7u x 7u", "4s x 4s", "8s x 4u"]


def _units(spec):
    return Units.from_mul(lambda a, b: (a * b) - ((a * b) & 0x11), format=spec)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("shape,block", [((1, 1, 1), 32), ((7, 33, 5), 32), ((3, 70, 9), 16), ((5, 7, 4), 1),
                                         ((2, 130, 3), 64)])
def test_qmatmul_formats_match_the_reference(simd, spec, shape, block):
    M, K, N = shape
    rng = np.random.default_rng(11)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    a[:, :1] = np.abs(a[:, :1])                          # a positive block start: a zero point != 0
    u = _units(spec)
    f = u.format
    want = qmatmul_formats_ref(a, b, u.table(), (f.a_bits, f.a_signed, f.b_bits, f.b_signed), block)
    y1 = qmatmul(a, b, u, block, threads=1)
    y2 = qmatmul(a, QF(b, f, block), u, block, threads=2)
    assert np.array_equal(y1.view(np.int32), want.view(np.int32))
    assert np.array_equal(y1.view(np.int32), y2.view(np.int32))
    # a QLinear holds its weight as a Q8 (a stage's weights): such units read that weight
    wq = lutcore.quantize(b, block, axis=0).dequantize()
    want_q = qmatmul_formats_ref(a, wq, u.table(), (f.a_bits, f.a_signed, f.b_bits, f.b_signed), block)
    q = QLinear(b, u, block, threads=2)
    assert np.array_equal(q(a).view(np.int32), want_q.view(np.int32))
    switched = QLinear(b, "exact", block, threads=2)                 # built with other units, switched later
    switched.units = u
    assert np.array_equal(switched(a).view(np.int32), want_q.view(np.int32))


def test_qmatmul_formats_refuse_signed_8bit_operands_and_nonfinite_values():
    u = _units("8u x 8u")
    a = np.ones((2, 4), np.float32)
    with pytest.raises(TypeError, match=r"^a: a Q8 holds signed 8-bit codes"):
        qmatmul(lutcore.quantize(a), np.ones((4, 2), np.float32), u)
    a[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"non-finite"):
        qmatmul(a, np.ones((4, 2), np.float32), u)


def test_gpt_trains_through_an_unsigned_unit_and_the_checkpoint_keeps_it(tmp_path):
    from lutcore.models import GPT, GPTConfig
    from lutcore.train.trainer import units_from_tensors, units_tensors
    u = _units("8u x 8u")
    m = GPT(GPTConfig(vocab=32, dim=32, context=8, layers=1, heads=2), units=u)
    rng = np.random.default_rng(0)
    tok, tgt = rng.integers(0, 32, (2, 8)), rng.integers(0, 32, (2, 8))
    loss1 = m.loss(tok, tgt)
    assert np.isfinite(loss1) and m.loss(tok, tgt) == loss1                     # the same bits every run
    back = units_from_tensors(units_tensors(u), u.name, "units.safetensors")
    assert back == u and back.format == u.format


def test_the_pipeline_through_an_unsigned_unit_splits_and_decodes_bit_for_bit(tmp_path):
    import torch
    import transformers
    from lutcore.pipeline import Pipeline
    cfg = transformers.LlamaConfig(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).eval().save_pretrained(tmp_path / "m")
    u = _units("8u x 8u")
    ids = np.array([1, 5, 9, 3, 7])
    one = Pipeline.from_pretrained(str(tmp_path / "m"), units=u)
    two = Pipeline.from_pretrained(str(tmp_path / "m"), splits=[1, 2], units=u)
    g1, g2 = one.generate(ids, 5), two.generate(ids, 5)
    assert np.array_equal(g1, g2)
    assert np.array_equal(one.logits(ids).view(np.int32), two.logits(ids).view(np.int32))
    full = one.logits(g1[:-1])
    assert int(np.argmax(full[-1])) == int(g1[-1])
    later = Pipeline.from_pretrained(str(tmp_path / "m"), units="exact")     # switched to the unit afterwards
    exact_logits = later.logits(ids)
    later.set_units(u)
    assert np.array_equal(later.logits(ids).view(np.int32), one.logits(ids).view(np.int32))
    assert np.array_equal(later.generate(ids, 5), g1)
    later.set_units("exact")                                                 # and back: the int8 path's bits
    assert np.array_equal(later.logits(ids).view(np.int32), exact_logits.view(np.int32))
