"""One case per parallel kernel family, for the shared-machine benchmarks (bench/ab_shared.py,
bench/test_bench_shared.py): how each family's N-thread call behaves when another process
holds a core.

Design: every family is a function ``family(threads)`` returning a list of ``Case``
(name, shape, lutcore(t), torch() or None, torch label) — a 5-tuple — built on fixed-seed
inputs.  ``lutcore(t)`` runs the family's public call with ``t`` threads (the builder
prepares what a thread count needs: a QLinear, a conv layer, a pipeline per count — only
1 and ``threads`` are prepared); ``torch()`` runs the peer at torch's own thread count
(set by the caller: lutbench.use_threads).  Before anything is timed the builder checks:
lutcore's output at 1 and at ``threads`` threads (integer: exact, against torch or numpy;
float: norm-wise, against torch or numpy) and, where the family promises it, the same bits
at both thread counts.  Shapes go through lutbench.dim (/8 under LUTCORE_BENCH_SMALL=1).

    family       case (lutcore call)                                  peer
    gemm_table   lut_gemm(a, b, approx.mitchell(), threads=t)         torch._int_mm (the exact product)
                 int8 256x1024x256; checked on 16 rows vs numpy's table gather
    gemm_exact   lut_gemm(a, pack_b(b), resolve("exact"), threads=t)  torch._int_mm, bit for bit
                 256x1024x256, 64x768x768
    sgemm        ops.matmul.matmul(x, w, out=, threads=t) 256x1024x256 torch.mm(out=)
    qlinear      quant.QLinear(w, resolve("exact"), threads=t)(x, out=) F.linear (float32)
                 K = N = 1024, x 64x1024 and 1x1024
    conv         lutcore.torch.approximate(Conv2d(64, 64, 3, padding=1), the float Conv2d
                 "exact", threads=t)(x), x 8x64x32x32 (quantize, im2col,
                 exact GEMM, dequantize)
    scan         ops.selective_scan(..., True, "simplified", threads=t) mambapy pscan if importable,
                 2x512x1536x16 (bench/test_bench_mamba.py's inputs)   else torch selective_scan_ref
    norm         _native.norm.rmsnorm_rows / layernorm_rows (isa, t)   F.rms_norm / F.layer_norm
                 2048x768 (as bench/ab_norm_attn.py calls them)
    attention    ops.attn.causal_attention(q, k, v, threads=t)        F.scaled_dot_product_attention
                 (2, 8, 512, 64)                                       (is_causal=True)
    adamw        train.AdamW(params).step(grads), opt.threads = t      torch.optim.AdamW(fused=True).step()
                 10M float32 in one tensor (bench/ab_adamw.py)
    decode       one token through Pipeline.from_pretrained(threads=t)  transformers LlamaForCausalLM, one
                 (the stage's fused native decode layer) at depth 128,  token with its DynamicCache at the
                 float32 and exact units; bench/test_bench_attention's  same depth (cropped back after
                 llama (hidden 256, 4 layers, 4/2 heads, vocab 2048)    each call)
    gradtables   torch._gradtables.table_grads(qx, qw, g, g, Ga, Gb, t,  torch: g @ W and g^T @ X (the two
                 GbT), Mitchell, 256x576x64 (bench/ab_gradtables.py)    float matmuls of a linear's backward)

``FAMILIES`` maps the family names to their builders (``CASES_PER_FAMILY``: how many cases
each returns); ``build(names, threads)`` returns [(family, [Case])].
"""
from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import lutcore  # noqa: E402
from lutbench import SEED, dim, rel_err, shape_str, torch  # noqa: E402

FLOAT_TOL = 1e-4          # float32 against float32 peers, norm-wise (matmul, norms, attention, scan)
QUANT_TOL = 0.05          # int8 block-scaled / per-tensor quantized against the float peer
DECODE_TOL = 1e-4         # float32 pipeline decode logits against transformers'
ADAM_TOL = 1e-6           # one AdamW step against a float64 numpy step


class Case(NamedTuple):
    name: str
    shape: str
    lutcore: Callable[[int], object]       # lutcore(threads) -> the output
    torch: Callable[[], object] | None     # torch() -> the output (torch's threads), or None
    torch_label: str


def _rng():
    return np.random.default_rng(SEED)


def _np(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def _same_bits(a, b, what):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape)
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"{what}: 1-thread and N-thread bits differ"


def _check_threads(fn, threads, what):
    """lutcore's output at 1 and at ``threads`` threads: the same bits; returns the N-thread one
    (copied: outputs may live in reused buffers)."""
    one = np.array(_np(fn(1)), copy=True)
    many = np.array(_np(fn(threads)), copy=True)
    _same_bits(one, many, what)
    return many


def _need_torch():
    if torch is None:
        raise RuntimeError("torch is not importable: the shared benchmarks need it for the peers")


# ---------------------------------------------------------------- GEMM through a table / the exact table

def gemm_table(threads: int) -> list[Case]:
    """Mitchell's table GEMM (the table kernels' wide driver); the peer is the exact int8 product."""
    from lutcore.ops.gemm import lut_gemm
    from lutcore.units import approx
    M, K, N = dim(256), dim(1024), dim(256)
    rng = _rng()
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    u = approx.mitchell()
    out = np.empty((M, N), np.int32)

    def run(t):
        return lut_gemm(a, b, u, threads=t, out=out)

    got = _check_threads(run, threads, "lut_gemm[mitchell]")
    R = min(16, M)                                       # the table's definition on a row slice
    mul32 = u.mul.astype(np.int32)
    want = mul32[a[:R].view(np.uint8).astype(np.intp)[:, :, None] * 256 +
                 b.view(np.uint8).astype(np.intp)[None]].sum(axis=1, dtype=np.int64)
    assert np.array_equal(got[:R], want), "lut_gemm[mitchell] differs from the table's definition"
    peer = _int_mm_peer(a, b)
    return [Case("lut_gemm[mitchell]", shape_str((M, K, N)), run, peer,
                 "torch._int_mm (the exact product)" if peer else "-")]


def _int_mm_peer(a, b, want=None):
    if torch is None or not hasattr(torch, "_int_mm"):
        return None
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    to = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32)

    def peer():
        return torch._int_mm(ta, tb, out=to)
    if want is not None:
        assert np.array_equal(peer().numpy(), want), "torch._int_mm differs from lutcore's exact product"
    return peer


def gemm_exact(threads: int) -> list[Case]:
    """The exact int8 GEMM (B packed once, the whole-call driver) at two shapes."""
    from lutcore.ops.gemm import lut_gemm, pack_b
    from lutcore.units import resolve
    u = resolve("exact")
    out = []
    for M, K, N in ((dim(256), dim(1024), dim(256)), (dim(64), dim(768), dim(768))):
        rng = _rng()
        a = rng.integers(-128, 128, (M, K), dtype=np.int8)
        b = rng.integers(-128, 128, (K, N), dtype=np.int8)
        bp = pack_b(b)
        c = np.empty((M, N), np.int32)

        def run(t, a=a, bp=bp, c=c):
            return lut_gemm(a, bp, u, threads=t, out=c)
        got = _check_threads(run, threads, "lut_gemm[exact]")
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int32)   # exact: |C| < 2**53
        assert np.array_equal(got, want), "lut_gemm[exact] differs from the exact product"
        peer = _int_mm_peer(a, b, want) if M > 16 else None                        # _int_mm wants M > 16
        out.append(Case("lut_gemm[exact]", shape_str((M, K, N)), run, peer, "torch._int_mm" if peer else "-"))
    return out


# ---------------------------------------------------------------- float GEMM, quantized linear, conv

def sgemm(threads: int) -> list[Case]:
    from lutcore.ops.matmul import matmul
    _need_torch()
    M, K, N = dim(256), dim(1024), dim(256)
    rng = _rng()
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, N), dtype=np.float32)
    o = np.empty((M, N), np.float32)

    def run(t):
        return matmul(x, w, out=o, threads=t)
    got = _check_threads(run, threads, "ops.matmul")
    tx, tw, to = torch.from_numpy(x), torch.from_numpy(w), torch.empty(M, N)

    def peer():
        return torch.mm(tx, tw, out=to)
    err = rel_err(got, peer().numpy())
    assert err < FLOAT_TOL, f"ops.matmul vs torch.mm: {err:.2e}"
    return [Case("sgemm (ops.matmul)", shape_str((M, K, N)), run, peer, "torch.mm")]


def qlinear(threads: int) -> list[Case]:
    """The block-scaled linear through the exact table; a QLinear per thread count (its
    ``threads`` is fixed at construction; the weight is quantized and packed once each)."""
    from lutcore.quant import QLinear
    from lutcore.units import resolve
    _need_torch()
    import torch.nn.functional as F
    K = N = dim(1024)
    rng = _rng()
    w = (rng.standard_normal((K, N), dtype=np.float32) / np.float32(math.sqrt(K))).astype(np.float32)
    lins = {t: QLinear(w, resolve("exact"), threads=t) for t in sorted({1, threads})}
    tw = torch.from_numpy(np.ascontiguousarray(w.T))                       # (N, K), as nn.Linear holds it
    out = []
    for M in (dim(64), 1):
        x = rng.standard_normal((M, K), dtype=np.float32)
        y = np.empty((M, N), np.float32)

        def run(t, x=x, y=y):
            return lins[t](x, out=y)
        got = _check_threads(run, threads, "QLinear")
        tx = torch.from_numpy(x)

        def peer(tx=tx):
            with torch.no_grad():
                return F.linear(tx, tw)
        err = rel_err(got, peer().numpy())
        assert err < QUANT_TOL, f"QLinear[exact] vs F.linear: {err:.2e}"
        out.append(Case("QLinear[exact]", shape_str((M, K, N)), run, peer, "F.linear (float32)"))
    return out


def conv(threads: int) -> list[Case]:
    """A 3x3 conv through the exact units (lutcore.torch: quantize, im2col, GEMM, dequantize)."""
    _need_torch()
    import lutcore.torch as lt
    B, C, HW = 8, dim(64), 32
    g = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    flt = torch.nn.Conv2d(C, C, 3, padding=1).requires_grad_(False)
    x = torch.randn(B, C, HW, HW, generator=g)
    layers = {t: lt.approximate(flt, "exact", threads=t).requires_grad_(False) for t in sorted({1, threads})}

    def run(t):
        with torch.no_grad():
            return layers[t](x)

    def peer():
        with torch.no_grad():
            return flt(x)
    got = _check_threads(run, threads, "ApproxConv2d")
    err = rel_err(got, peer().numpy())
    assert err < QUANT_TOL, f"ApproxConv2d[exact] vs float Conv2d: {err:.2e}"
    M, K = B * HW * HW, 9 * C
    return [Case("conv2d 3x3[exact] (lutcore.torch)", f"{B}x{C}x{HW}x{HW} (GEMM {M}x{K}x{C})", run, peer,
                 "torch Conv2d (float32)")]


# ---------------------------------------------------------------- scan, norms, attention

def scan(threads: int) -> list[Case]:
    """The selective scan, forward, on bench/test_bench_mamba.py's inputs."""
    import test_bench_mamba as tb
    shape = tb.SCAN_SHAPES[0]
    c = tb.scan_inputs(_rng(), shape)
    args = tb._args(c)

    def run(t):
        return lutcore.ops.selective_scan(*args, True, "simplified", threads=t)
    got = _check_threads(run, threads, "selective_scan")
    peer, label = None, "-"
    if torch is not None and tb.mambapy_pscan is not None:
        targs = [torch.from_numpy(a) for a in args]

        def peer():
            with torch.no_grad():
                return tb.scan_mambapy(*targs)
        want, label = peer().numpy(), "mambapy pscan"
    elif torch is not None:
        targs = tb._torch_ref_inputs(c)

        def peer():
            with torch.no_grad():
                return tb.selective_scan_ref_torch(*targs)
        want, label = peer().numpy().transpose(0, 2, 1), "torch selective_scan_ref (sequential; no mambapy)"
    else:
        want = tb.NumpyScan(shape)(*args)
    err = rel_err(got, want)
    assert err < FLOAT_TOL, f"selective_scan vs {label}: {err:.2e}"
    return [Case("selective_scan[simplified] fwd", shape_str(shape), run, peer, label)]


def norm(threads: int) -> list[Case]:
    """RMSNorm and LayerNorm rows (the native calls bench/ab_norm_attn.py times)."""
    from lutcore import _simd
    from lutcore._native import norm as _d
    _need_torch()
    import torch.nn.functional as F
    R, C = dim(2048), 768
    rng = _rng()
    x = rng.standard_normal((R, C), dtype=np.float32)
    w = rng.standard_normal(C, dtype=np.float32)
    b = rng.standard_normal(C, dtype=np.float32)
    y, xh, rs = np.empty_like(x), np.empty_like(x), np.empty(R, np.float32)
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
    eps = 1e-5

    def rms(t):
        _d.rmsnorm_rows(y, x, w, eps, rs, _simd.isa(), t)
        return y

    def ln(t):
        _d.layernorm_rows(y, xh, rs, x, w, b, eps, _simd.isa(), t)
        return y

    def rms_peer():
        return F.rms_norm(tx, (C,), tw, eps)

    def ln_peer():
        return F.layer_norm(tx, (C,), tw, tb, eps)
    out = []
    for name, run, peer, label in (("rmsnorm fwd", rms, rms_peer, "F.rms_norm"),
                                   ("layernorm fwd", ln, ln_peer, "F.layer_norm")):
        got = _check_threads(run, threads, name)
        err = rel_err(got, peer().numpy())
        assert err < FLOAT_TOL, f"{name} vs {label}: {err:.2e}"
        out.append(Case(name, shape_str((R, C)), run, peer, label))
    return out


def attention(threads: int) -> list[Case]:
    from lutcore.ops.attn import causal_attention
    _need_torch()
    import torch.nn.functional as F
    B, H, L, hd = 2, 8, dim(512), 64
    rng = _rng()
    q, k, v = (rng.standard_normal((B, H, L, hd), dtype=np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))

    def run(t):
        return causal_attention(q, k, v, threads=t)[0]

    def peer():
        return F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    got = _check_threads(run, threads, "causal_attention")
    err = rel_err(got, peer().numpy())
    assert err < FLOAT_TOL, f"causal_attention vs SDPA: {err:.2e}"
    return [Case("causal_attention fwd", shape_str((B, H, L, hd)), run, peer, "F.scaled_dot_product_attention")]


# ---------------------------------------------------------------- AdamW

def adamw(threads: int) -> list[Case]:
    """One AdamW step on 10M float32 parameters (one tensor), weight decay 0.01, as ab_adamw.py.
    The first step (N threads) and torch's are checked against a float64 step; the 1- and
    N-thread bits are not compared (every step moves the state on)."""
    from lutcore.train import AdamW
    _need_torch()
    E = dim(10_000_000)
    lr, betas, eps, wd = 1e-3, (0.9, 0.999), 1e-8, 0.01
    rng = _rng()
    p0 = rng.standard_normal(E, dtype=np.float32)
    g = rng.standard_normal(E, dtype=np.float32) * np.float32(1e-2)
    p64, g64 = p0.astype(np.float64), g.astype(np.float64)      # one float64 step from zero moments
    m, v = (1 - betas[0]) * g64, (1 - betas[1]) * g64 * g64
    want = p64 * (1 - lr * wd) - lr * (m / (1 - betas[0])) / (np.sqrt(v / (1 - betas[1])) + eps)
    del p64, g64, m, v
    params, grads = {"p": p0.copy()}, {"p": g}
    opt = AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd, threads=threads)
    opt.step(grads)
    err = rel_err(params["p"], want)
    assert err < ADAM_TOL, f"lutcore AdamW vs the float64 step: {err:.2e}"
    tp = torch.from_numpy(p0.copy()).requires_grad_(True)
    tp.grad = torch.from_numpy(g)
    topt = torch.optim.AdamW([tp], lr=lr, betas=betas, eps=eps, weight_decay=wd, fused=True)
    topt.step()
    err = rel_err(tp.detach().numpy(), want)
    assert err < ADAM_TOL, f"torch fused AdamW vs the float64 step: {err:.2e}"
    del want

    def run(t):
        opt.threads = t
        return opt.step(grads)
    return [Case("AdamW step", f"1x{E}", run, topt.step, "torch AdamW(fused=True)")]


# ---------------------------------------------------------------- the fused decode layer

DECODE_DEPTH = dim(128)


def decode(threads: int) -> list[Case]:
    """One token at depth DECODE_DEPTH through a 1-stage pipeline's fused native decode layer
    (float32 weights, and the exact units' Q8 weights), a pipeline per thread count; the peer
    is transformers' forward of that token with its cache (cropped back after each call)."""
    _need_torch()
    import test_bench_attention as ta
    from lutcore.pipeline import Pipeline
    P = DECODE_DEPTH
    ids = np.random.default_rng(7).integers(0, ta.VOCAB, P + 1).astype(np.int64)
    tok = int(ids[P])
    counts = sorted({1, threads})
    try:
        import transformers
        transformers.utils.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
    with tempfile.TemporaryDirectory() as d:
        hm = ta.make_model(d, max(256, P + 8))
        pipes = {(u, t): Pipeline.from_pretrained(d, units=u, threads=t) for u in (None, "exact") for t in counts}
    hm.eval()
    for p in pipes.values():
        for st in p._ring.stages:
            assert st._fusable, "the stage does not take the fused decode path"
        p._ring.reset()
        p._ring.forward(ids[:P], 0, True, True)          # the prompt's caches, kept; each call rewinds to P

    def lut_run(u):
        def run(t):
            ring = pipes[(u, t)]._ring
            for c in ring.caches:
                c.pos = P
            return ring.forward(np.array([tok], np.int64), P, True, True)
        return run

    import inspect
    kw = "cache" if "cache" in inspect.signature(hm.forward).parameters else "past_key_values"   # 5.x: cache
    with torch.no_grad():
        first = hm(torch.from_numpy(ids[None, :P]), use_cache=True)
    cache = getattr(first, kw)
    x1 = torch.tensor([[tok]])

    def peer():
        with torch.no_grad():
            out = hm(x1, use_cache=True, **{kw: cache}).logits[0]
        cache.crop(-1)                                   # back to depth P
        return out
    want = peer().numpy()
    assert cache.get_seq_length() == P
    out = []
    for u, tol, label in ((None, DECODE_TOL, "float32"), ("exact", QUANT_TOL, "exact units")):
        run = lut_run(u)
        got = _check_threads(run, threads, f"decode {label}")
        assert any(st._fused is not None for st in pipes[(u, threads)]._ring.stages), "no fused decode ran"
        err = rel_err(got, want)
        assert err < tol, f"decode ({label}) vs transformers: {err:.2e}"
        out.append(Case(f"decode layer ({label}), 1 token", f"h{ta.HIDDEN}xL{ta.LAYERS}xV{ta.VOCAB} @{P}", run,
                        peer, "transformers LlamaForCausalLM + DynamicCache (float32)"))
    return out


# ---------------------------------------------------------------- gradient tables

def gradtables(threads: int) -> list[Case]:
    """backward="table"'s gradient pass (dX and dW through Mitchell's gradient tables), native,
    checked against the numpy fallback; the peer is a float linear's two backward matmuls."""
    from lutcore.torch import _gradtables
    from lutcore.torch._gradtables import table_grads
    from lutcore.units import approx
    _need_torch()
    M, K, O = dim(256), dim(576), 64
    u = approx.by_name("mitchell")
    ga, gb, gbt = _gradtables.tables_for(u, 1, "bench")
    rng = _rng()
    a = rng.integers(-127, 128, (M, K)).astype(np.int8)
    w = rng.integers(-127, 128, (O, K)).astype(np.int8)
    g = rng.standard_normal((M, O)).astype(np.float32)

    def run(t):
        dx, s = table_grads(a, w, g, g, ga, gb, t, gbt)
        return np.concatenate([dx.ravel(), s.ravel()])
    got = _check_threads(run, threads, "table_grads")
    dx, s = table_grads(a, w, g, g, ga, gb, 1)                                   # the numpy fallback
    err = rel_err(got, np.concatenate([dx.ravel(), s.ravel()]))
    assert err < FLOAT_TOL, f"table_grads native vs numpy: {err:.2e}"
    tx, tw, tg = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(w.astype(np.float32)), torch.from_numpy(g)
    dxo, dwo = torch.empty(M, K), torch.empty(O, K)

    def peer():
        torch.mm(tg, tw, out=dxo)                        # dX = g W
        torch.mm(tg.t(), tx, out=dwo)                    # dW = g^T X
        return dxo, dwo
    want = (g.astype(np.float64) @ w.astype(np.float64), g.T.astype(np.float64) @ a.astype(np.float64))
    for t_, w_ in zip(peer(), want):
        assert rel_err(t_.numpy(), w_) < FLOAT_TOL
    return [Case("table_grads[mitchell] dX+dW", shape_str((M, K, O)), run, peer,
                 "torch mm x2 (a float linear's backward)")]


# cases each family returns (test_bench_shared.py parametrizes over them before building)
CASES_PER_FAMILY = {"gemm_table": 1, "gemm_exact": 2, "sgemm": 1, "qlinear": 2, "conv": 1, "scan": 1, "norm": 2,
                    "attention": 1, "adamw": 1, "decode": 2, "gradtables": 1}

FAMILIES: dict[str, Callable[[int], list[Case]]] = {
    "gemm_table": gemm_table,
    "gemm_exact": gemm_exact,
    "sgemm": sgemm,
    "qlinear": qlinear,
    "conv": conv,
    "scan": scan,
    "norm": norm,
    "attention": attention,
    "adamw": adamw,
    "decode": decode,
    "gradtables": gradtables,
}


def build(names=None, threads: int = 2):
    """[(family, [Case])] for the named families (all by default), validated."""
    names = list(FAMILIES) if not names else list(names)
    bad = [n for n in names if n not in FAMILIES]
    if bad:
        raise ValueError(f"unknown families {bad}; known: {list(FAMILIES)}")
    out = []
    for n in names:
        cs = FAMILIES[n](threads)
        assert len(cs) == CASES_PER_FAMILY[n], (n, len(cs))
        out.append((n, cs))
    return out
