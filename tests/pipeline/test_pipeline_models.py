"""Tiny random Hugging Face models for the pipeline tests, and the checks that
the configs transformers writes for them are read as intended.

The builders (imported by the other test_pipeline* modules) make a
``transformers`` model from a config, give it generic weights (norm gains off
1, biases off 0, matrices large enough that every layer moves the result — a
dropped layer must change the tokens) from a seeded torch generator, and save
it with ``save_pretrained``.  No hub access.

    KINDS         llama (tied), llama_untied (llama3 RoPE scaling), qwen2 (q/k/v biases),
                  mistral (sliding window 5), gpt2, mamba
    hf_model(kind, seed=0, **config overrides) -> transformers model (eval, float32)
    save(model, path, dtype="float32"|"bfloat16", **save kwargs) -> path
"""
import copy

import numpy as np
import pytest

import torch
import transformers as tf

from lutcore._io import read_config  # noqa: E402
from lutcore.pipeline import ArchSpec  # noqa: E402

V = 128
TF5 = int(tf.__version__.split(".")[0]) >= 5


def _rope(rope_theta, **scaling):
    """RoPE settings as this transformers version spells them (rope_parameters from 5.0)."""
    if TF5:
        return {"rope_parameters": {"rope_theta": rope_theta, **scaling}}
    return {"rope_theta": rope_theta, "rope_scaling": scaling}

CONFIGS = {
    # the seed's two architectures: 6 layers so splits like [1, 1, 1, 1, 1, 1] exist
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=64, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, vocab_size=V, max_position_embeddings=64, rms_norm_eps=1e-5,
        tie_word_embeddings=True)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(
        n_embd=64, n_layer=6, n_head=4, vocab_size=V, n_positions=64, n_inner=128, layer_norm_epsilon=1e-5,
        bos_token_id=0, eos_token_id=0)),
    # the rest of the families, smaller
    "llama_untied": ("LlamaConfig", "LlamaForCausalLM", dict(
        hidden_size=48, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=3,
        intermediate_size=80, vocab_size=V, tie_word_embeddings=False, **_rope(
            rope_type="llama3", rope_theta=50000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=16))),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=96, vocab_size=V, tie_word_embeddings=True)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(
        hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
        intermediate_size=96, vocab_size=V, sliding_window=5, tie_word_embeddings=False)),
    "mamba": ("MambaConfig", "MambaForCausalLM", dict(
        hidden_size=32, num_hidden_layers=3, vocab_size=V, state_size=8, conv_kernel=4, expand=2,
        time_step_rank=4, use_bias=True, pad_token_id=0, bos_token_id=0, eos_token_id=0)),
}
KINDS = tuple(CONFIGS)


def hf_model(kind, seed=0, **over):
    cfg_name, model_name, kw = CONFIGS[kind]
    cfg = getattr(tf, cfg_name)(**{**kw, **over})
    torch.manual_seed(seed)
    model = getattr(tf, model_name)(cfg).eval()
    gen = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            if kind == "mamba":                       # as tests/models/test_mamba_model.py: livelier dt
                if name.endswith("dt_proj.bias"):
                    p.copy_(torch.rand(p.shape, generator=gen) * 3.5 - 3.0)
                else:
                    p.add_(0.05 * r)
            elif p.ndim == 1 and "bias" not in name:  # norm gains
                p.copy_(1 + 0.1 * r)
            elif p.ndim == 1:
                p.copy_(0.05 * r)
            elif "embed" in name or "wte" in name or "wpe" in name:
                p.copy_(0.05 * r)
            else:
                p.copy_(0.08 * r)
    return model


def save(model, path, dtype="float32", **kw):
    m = model if dtype == "float32" else copy.deepcopy(model).to(getattr(torch, dtype))
    m.save_pretrained(path, **kw)
    return path


def reference_model(model, path):
    """The checkpoint at ``path`` loaded by transformers in float32: exactly the weights it
    stores (bf16-rounded for a bf16 checkpoint), with buffers such as RoPE's inv_freq
    computed afresh in float32 (a model cast to bf16 and back would keep them rounded)."""
    kw = {"dtype" if TF5 else "torch_dtype": torch.float32}
    return type(model).from_pretrained(path, **kw).eval()


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(ids, np.int64)[None])).logits[0].float().numpy()


def hf_greedy(model, ids, n):
    """transformers' greedy continuation by exactly n tokens (no stopping at EOS)."""
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.from_numpy(np.asarray(ids, np.int64)[None]), max_new_tokens=n,
                             do_sample=False, pad_token_id=0)
    return out[0].numpy()


# ============================================================================ the specs of saved configs

@pytest.mark.parametrize("kind,family", [("llama", "llama"), ("gpt2", "gpt2"), ("llama_untied", "llama"),
                                         ("qwen2", "llama"), ("mistral", "llama"), ("mamba", "mamba")])
def test_saved_config_is_read_as_built(tmp_path, kind, family):
    m = hf_model(kind)
    save(m, tmp_path)
    spec = ArchSpec.from_config(read_config(tmp_path))
    c = m.config
    assert spec.family == family and spec.model_type == c.model_type
    assert spec.layers == c.num_hidden_layers and spec.hidden == c.hidden_size and spec.vocab == V
    assert spec.tie == bool(c.tie_word_embeddings)
    if family == "llama":
        assert (spec.heads, spec.kv_heads) == (c.num_attention_heads, c.num_key_value_heads)
        assert spec.head_dim == (getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
        assert spec.qkv_bias == (kind == "qwen2")
        assert spec.rope and spec.norm == "rms" and spec.gated
    if kind == "llama_untied":
        assert spec.rope_theta == 50000.0 and spec.rope_scaling["rope_type"] == "llama3"
    if kind == "mistral":
        assert [spec.window(i) for i in range(3)] == [5, 5, 5]
    if kind == "gpt2":
        assert spec.norm == "ln" and spec.qkv_fused and not spec.rope and spec.max_pos == 64
        assert spec.act == "gelu_new" and spec.inter == 128
