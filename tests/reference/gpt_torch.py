"""The GPT of lutcore.models.gpt written with torch's own layers — the
conformance reference (autograd supplies its backward) for the tests and the
GPT training-step benchmark.  ``tp``: {lutcore parameter name: torch tensor}."""


def torch_gpt_loss(tp, ids, tg, cfg):
    """The same architecture, written with torch's own layers (autograd supplies the backward)."""
    import torch
    import torch.nn.functional as F
    B, L = ids.shape
    C, H = cfg.dim, cfg.heads
    x = tp["wte"][ids] + tp["wpe"][:L]
    for i in range(cfg.layers):
        P = lambda k: tp[f"h.{i}.{k}"]            # noqa: E731
        a = F.layer_norm(x, (C,), P("ln1.weight"), P("ln1.bias"), cfg.ln_eps)
        q, k, v = F.linear(a, P("attn.qkv.weight"), P("attn.qkv.bias")).split(C, dim=-1)
        q, k, v = (t.view(B, L, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, L, C)
        x = x + F.linear(y, P("attn.proj.weight"), P("attn.proj.bias"))
        m = F.layer_norm(x, (C,), P("ln2.weight"), P("ln2.bias"), cfg.ln_eps)
        x = x + F.linear(F.gelu(F.linear(m, P("mlp.fc.weight"), P("mlp.fc.bias")), approximate="tanh"),
                         P("mlp.proj.weight"), P("mlp.proj.bias"))
    x = F.layer_norm(x, (C,), tp["ln_f.weight"], tp["ln_f.bias"], cfg.ln_eps)
    logits = x @ tp["wte"].T
    loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), torch.as_tensor(tg).reshape(-1))
    return logits, loss
