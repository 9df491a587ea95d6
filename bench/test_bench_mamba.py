"""Mamba-1 kernels (selective scan, causal conv1d) and one whole block beside
numpy, torch, mambapy and transformers.

Shapes are a mamba-130m block: batch 2, L 512, D (d_inner) 1536, N 16, conv
K 4; the whole block at d_model 768 (expand 2 -> D 1536).  Under
LUTCORE_BENCH_SMALL=1 batch, L, D and d_model are divided by 8; N and K are
structural and stay.  Every implementation checks its output (and its
gradients) before it is timed; peak memory is measured in a fresh spawned
process (lutbench.peak_rss) and recorded as ``peak_mb``.

    group                                lutcore                              peers
    selective_scan[simplified] fwd       selective_scan(..., True,            numpy recurrence (loop over L, float32);
      BxLxDxN                              "simplified")                      mambapy pscan (no_grad); torch
                                                                              selective_scan_ref (sequential)
    selective_scan[simplified] fwd+bwd   selective_scan_forward(save) +       mambapy pscan + autograd
                                         selective_scan_backward(ctx=)        (.backward(dy)); both with peak_mb
    causal_conv1d fwd BxLxDxK            causal_conv1d(x, w, b)               F.conv1d(groups=D, padding=K-1)
    causal_conv1d fwd+bwd                + causal_conv1d_backward             torch autograd
    Mamba1Block fwd+bwd Bxlxd_model      blocks[0].forward + .backward        transformers MambaBlock (norm +
                                                                              MambaMixer + residual, use_mambapy)
                                                                              + autograd; both with peak_mb, tokens

Validation: the numpy recurrence against the test suite's float64 oracle on a
channel slice, lutcore against the numpy recurrence (FWD_TOL, norm-wise), the
torch peers against the same output; gradients of lutcore against the float64
oracle on a channel slice and of mambapy/torch against lutcore's (GRAD_TOL);
the block against transformers (same weights).  Layouts: each implementation
gets its native layout, made once outside the timing (lutcore (batch, L, D);
selective_scan_ref and F.conv1d (batch, D, L)).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import lutcore
from lutbench import (SEED, SLOW, dim, grouped, mambapy_pscan, need_module, peak_rss, rel_err,
                      requires_mambapy, requires_torch_nn, torch)
from lutcore.models.mamba import MambaConfig, MambaLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.scan_ref import (causal_conv1d_backward_ref, causal_conv1d_ref,  # noqa: E402
                                selective_scan_backward_ref, selective_scan_ref)

D_STATE, D_CONV = 16, 4
SCAN_SHAPES = [(dim(2), dim(512), dim(1536), D_STATE)]        # batch, L, D, N
CONV_SHAPES = [(dim(2), dim(512), dim(1536), D_CONV)]         # batch, L, D, K
BLOCK_SHAPES = [(dim(2), dim(512), dim(768))]                 # batch, L, d_model (expand 2)
ORACLE_CHANNELS = 64          # channels checked against the float64 oracle (batch 0)
FWD_TOL = 1e-5                # norm-wise relative error, float32 against float32 / float64
GRAD_TOL = 1e-4
BLOCK_TOL = 1e-4

SCAN_AXES = "batch x L x D x N"
CONV_AXES = "batch x L x D x K"


def _block_axes(shape):
    return f"batch x L x d_model; d_inner {2 * shape[2]}, N {D_STATE}"


if torch is not None:
    import torch.nn.functional as F


# ================================================================ selective scan

def scan_inputs(rng, shape):
    """Mamba-like inputs: dt_bias from mamba's dt init (softplus^-1 of dt in [1e-3, 0.1]),
    A = -(1..N) per channel (S4D-real), D = 1; u, z, B, C, dy standard normal."""
    b, L, Dm, N = shape
    f32 = np.float32
    dt = np.exp(rng.uniform(size=Dm) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
    return SimpleNamespace(
        u=rng.standard_normal((b, L, Dm), dtype=f32),
        delta=(0.5 * rng.standard_normal((b, L, Dm))).astype(f32),
        A=-np.tile(np.arange(1, N + 1, dtype=f32), (Dm, 1)),
        B=rng.standard_normal((b, L, N), dtype=f32),
        C=rng.standard_normal((b, L, N), dtype=f32),
        D=np.ones(Dm, f32),
        z=rng.standard_normal((b, L, Dm), dtype=f32),
        delta_bias=(dt + np.log(-np.expm1(-dt))).astype(f32),
        dy=rng.standard_normal((b, L, Dm), dtype=f32))


def _args(c):
    return c.u, c.delta, c.A, c.B, c.C, c.D, c.z, c.delta_bias


def _oracle_slice(c, k=ORACLE_CHANNELS):
    """Batch 0 and the first k channels of every input (channels are independent)."""
    k = min(k, c.u.shape[2])
    ch = lambda a: np.ascontiguousarray(a[:1, :, :k])     # noqa: E731
    return SimpleNamespace(u=ch(c.u), delta=ch(c.delta), A=c.A[:k], B=c.B[:1], C=c.C[:1], D=c.D[:k],
                           z=ch(c.z), delta_bias=c.delta_bias[:k], dy=ch(c.dy))


class NumpyScan:
    """The scan in numpy float32: loop over t, vectorised over (batch, D, N), in reused buffers.

    dt = softplus(delta + delta_bias); h_t = exp(dt_t*A)*h_{t-1} + (dt_t*u_t)*B_t;
    y_t = (C_t . h_t + D*u_t) * silu(z_t)  ("simplified" discretization)."""

    def __init__(self, shape):
        b, L, Dm, N = shape
        self.dt = np.empty((b, L, Dm), np.float32)
        self.du = np.empty((b, L, Dm), np.float32)
        self.g = np.empty((b, L, Dm), np.float32)
        self.h = np.empty((b, Dm, N), np.float32)
        self.dA = np.empty((b, Dm, N), np.float32)
        self.tmp = np.empty((b, Dm, N), np.float32)
        self.y = np.empty((b, L, Dm), np.float32)

    def __call__(self, u, delta, A, B, C, D, z, delta_bias):
        dt, du, g, h, dA, tmp, y = self.dt, self.du, self.g, self.h, self.dA, self.tmp, self.y
        np.add(delta, delta_bias, out=dt)
        np.logaddexp(0, dt, out=dt)                     # softplus (float32)
        np.multiply(dt, u, out=du)
        h.fill(0)
        for t in range(u.shape[1]):
            np.multiply(dt[:, t, :, None], A, out=dA)
            np.exp(dA, out=dA)
            h *= dA
            np.multiply(du[:, t, :, None], B[:, t, None, :], out=tmp)
            h += tmp
            np.multiply(h, C[:, t, None, :], out=tmp)
            np.sum(tmp, axis=-1, out=y[:, t])
        np.multiply(u, D, out=du)
        y += du
        with np.errstate(over="ignore"):
            np.negative(z, out=g)
            np.exp(g, out=g)
            g += 1
            np.divide(z, g, out=g)                      # silu(z) = z / (1 + exp(-z))
        y *= g
        return y


def scan_case(cases, shape):
    """Inputs, the numpy recurrence's output (the forward reference, itself checked
    against the float64 oracle on a channel slice)."""
    def build(rng):
        c = scan_inputs(rng, shape)
        c.want = NumpyScan(shape)(*_args(c)).copy()
        s = _oracle_slice(c)
        k = s.u.shape[2]
        err = rel_err(c.want[:1, :, :k], selective_scan_ref(*_args(s), True, "simplified"))
        assert err < FWD_TOL, f"numpy recurrence vs float64 oracle: {err:.2e}"
        c.numpy_oracle_err = err
        c.out = np.empty_like(c.u)
        return c
    return cases(("scan", shape), build)


def _torch_ref_inputs(c):
    """selective_scan_ref's layout: u, delta, z (batch, D, L); B, C (batch, N, L)."""
    tl = lambda a: torch.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1)))  # noqa: E731
    return (tl(c.u), tl(c.delta), torch.from_numpy(c.A), tl(c.B), tl(c.C), torch.from_numpy(c.D), tl(c.z),
            torch.from_numpy(c.delta_bias))


def selective_scan_ref_torch(u, delta, A, B, C, D, z, delta_bias):
    """The published reference (mamba_ssm.ops.selective_scan_interface.selective_scan_ref),
    real A, input-dependent B and C, softplus, D and z given: precompute exp(dt*A) and
    dt*B*u for all steps, then a sequential loop over L."""
    delta = F.softplus(delta + delta_bias[..., None])                        # (b, D, L)
    b, Dm, N = u.shape[0], A.shape[0], A.shape[1]
    x = A.new_zeros((b, Dm, N))
    deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))               # (b, D, L, N)
    deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)                # (b, D, L, N)
    ys = []
    for i in range(u.shape[2]):
        x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
        ys.append(torch.einsum("bdn,bn->bd", x, C[:, :, i]))
    y = torch.stack(ys, dim=2)                                               # (b, D, L)
    out = y + u * D[:, None]
    return out * F.silu(z)


def scan_mambapy(u, delta, A, B, C, D, z, delta_bias):
    """mambapy's MambaBlock path (ssm: softplus(delta + bias); selective_scan: pscan on
    deltaA / deltaB*x; forward: y * silu(z)), all tensors (batch, L, D[, N])."""
    delta = F.softplus(delta + delta_bias)
    deltaA = torch.exp(delta.unsqueeze(-1) * A)                              # (b, L, D, N)
    deltaB = delta.unsqueeze(-1) * B.unsqueeze(2)                            # (b, L, D, N)
    BX = deltaB * u.unsqueeze(-1)                                            # (b, L, D, N)
    hs = mambapy_pscan(deltaA, BX)                                           # (b, L, D, N)
    y = (hs @ C.unsqueeze(-1)).squeeze(3)                                    # (b, L, D)
    y = y + D * u
    return y * F.silu(z)


FWD = grouped("selective_scan[simplified] fwd", SCAN_SHAPES, SCAN_AXES)
FWDBWD = grouped("selective_scan[simplified] fwd+bwd", SCAN_SHAPES, SCAN_AXES)


@pytest.mark.parametrize("shape", FWD)
def test_scan_fwd_lutcore(benchmark, record, cases, simd, shape):
    c = scan_case(cases, shape)
    call = lambda: lutcore.ops.selective_scan(*_args(c), True, "simplified")  # noqa: E731
    err = rel_err(call(), c.want)
    assert err < FWD_TOL, f"lutcore vs numpy recurrence: {err:.2e}"
    record("selective_scan[simplified] fwd", shape, "lutcore", rel_err_vs_numpy=float(f"{err:.3g}"),
           call='ops.selective_scan(u, delta, A, B, C, D, z, delta_bias, True, "simplified")')
    benchmark(call)


@pytest.mark.parametrize("shape", FWD)
def test_scan_fwd_numpy(benchmark, record, cases, shape):
    c = scan_case(cases, shape)
    fn = NumpyScan(shape)
    err = rel_err(fn(*_args(c)), c.want)
    assert err == 0.0, err                       # the same code as the reference: bit-identical
    record("selective_scan[simplified] fwd", shape, "numpy", threads=1,
           rel_err_vs_float64_oracle=float(f"{c.numpy_oracle_err:.3g}"),
           call="loop over L; exp(dt*A), h*dA + dt*u*B, sum(h*C) vectorised over (batch, D, N), float32")
    benchmark.pedantic(fn, args=_args(c), **SLOW)


@requires_mambapy
@pytest.mark.parametrize("shape", FWD)
def test_scan_fwd_mambapy(benchmark, record, cases, shape):
    c = scan_case(cases, shape)
    args = [torch.from_numpy(a) for a in _args(c)]

    def fn():
        with torch.no_grad():
            return scan_mambapy(*args)

    err = rel_err(fn().numpy(), c.want)
    assert err < FWD_TOL, f"mambapy pscan vs numpy recurrence: {err:.2e}"
    record("selective_scan[simplified] fwd", shape, "mambapy pscan", threads=torch.get_num_threads(),
           rel_err_vs_numpy=float(f"{err:.3g}"),
           call="no_grad: softplus; pscan(exp(dt*A), dt*B*u); hs @ C + D*u; * silu(z)")
    benchmark.pedantic(fn, **SLOW)


@requires_torch_nn
@pytest.mark.parametrize("shape", FWD)
def test_scan_fwd_torch_ref(benchmark, record, cases, shape):
    c = scan_case(cases, shape)
    args = _torch_ref_inputs(c)

    def fn():
        with torch.no_grad():
            return selective_scan_ref_torch(*args)

    err = rel_err(fn().numpy().transpose(0, 2, 1), c.want)
    assert err < FWD_TOL, f"torch selective_scan_ref vs numpy recurrence: {err:.2e}"
    record("selective_scan[simplified] fwd", shape, "torch selective_scan_ref", threads=torch.get_num_threads(),
           rel_err_vs_numpy=float(f"{err:.3g}"),
           call="mamba_ssm's selective_scan_ref formula in torch: einsum precompute, sequential loop over L",
           note="torch selective_scan_ref takes its published (batch, D, L) layout, transposed once "
                "outside the timing")
    benchmark.pedantic(fn, **SLOW)


# ---------------------------------------------------------------- forward + backward

GRAD_KEYS = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def scan_fb_lutcore(c):
    """lutcore's forward (saving the chunk states) + backward; returns the gradient dict."""
    def run():
        _, _, ctx = lutcore.ops.selective_scan_forward(*_args(c), True, "simplified", save_for_backward=True,
                                                       out=c.out)
        return lutcore.ops.selective_scan_backward(c.dy, ctx=ctx)
    return run


def scan_fb_mambapy(c):
    """mambapy's path with autograd: forward, then .backward(dy); returns the leaf tensors."""
    leaves = [torch.from_numpy(a.copy()).requires_grad_(True) for a in _args(c)]
    dy = torch.from_numpy(c.dy)

    def run():
        for t in leaves:
            t.grad = None
        scan_mambapy(*leaves).backward(dy)
        return leaves
    return run


def _mem_scan_fb_lutcore(shape):
    return scan_fb_lutcore(_scan_mem_inputs(shape))


def _mem_scan_fb_mambapy(shape):
    return scan_fb_mambapy(_scan_mem_inputs(shape))


def _scan_mem_inputs(shape):
    c = scan_inputs(np.random.default_rng(SEED), shape)
    c.out = np.empty_like(c.u)
    return c


def scan_grads_case(cases, shape):
    """lutcore's full-size gradients (checked against the float64 oracle on a slice)."""
    def build(rng):
        c = scan_case(cases, shape)
        s = _oracle_slice(c)
        want = selective_scan_backward_ref(s.dy, *_args(s), True, "simplified")
        s.out = np.empty_like(s.u)
        got = scan_fb_lutcore(s)()
        errs = {k: rel_err(got[k], want[k]) for k in GRAD_KEYS}
        bad = {k: e for k, e in errs.items() if not e < GRAD_TOL}
        assert not bad, f"lutcore scan gradients vs float64 oracle: {bad}"
        g = {k: v.copy() for k, v in scan_fb_lutcore(c)().items()}
        return SimpleNamespace(grads=g, oracle_err=max(errs.values()))
    return cases(("scan_grads", shape), build)


@pytest.mark.parametrize("shape", FWDBWD)
def test_scan_fwdbwd_lutcore(benchmark, record, cases, simd, shape):
    c = scan_case(cases, shape)
    ref = scan_grads_case(cases, shape)
    run = scan_fb_lutcore(c)
    got = run()
    errs = {k: rel_err(got[k], ref.grads[k]) for k in GRAD_KEYS}
    assert max(errs.values()) < GRAD_TOL, errs
    assert rel_err(c.out, c.want) < FWD_TOL
    mem = peak_rss(_mem_scan_fb_lutcore, shape, simd=lutcore.get_simd())
    record("selective_scan[simplified] fwd+bwd", shape, "lutcore",
           grad_rel_err_vs_float64_oracle=float(f"{ref.oracle_err:.3g}"), **mem,
           call='selective_scan_forward(..., "simplified", save_for_backward=True, out=); '
                'selective_scan_backward(dy, ctx=ctx)')
    benchmark(run)


@requires_mambapy
@pytest.mark.parametrize("shape", FWDBWD)
def test_scan_fwdbwd_mambapy(benchmark, record, cases, shape):
    ref = scan_grads_case(cases, shape)
    c = scan_case(cases, shape)
    run = scan_fb_mambapy(c)
    leaves = run()
    errs = {k: rel_err(t.grad.numpy(), ref.grads[k]) for k, t in zip(GRAD_KEYS, leaves)}
    assert max(errs.values()) < GRAD_TOL, f"mambapy gradients vs lutcore: {errs}"
    mem = peak_rss(_mem_scan_fb_mambapy, shape)
    record("selective_scan[simplified] fwd+bwd", shape, "mambapy pscan + autograd",
           threads=torch.get_num_threads(), grad_rel_err_vs_lutcore=float(f"{max(errs.values()):.3g}"), **mem,
           call="scan_mambapy(*leaves).backward(dy), grads of all 8 inputs")
    benchmark.pedantic(run, **SLOW)


# ================================================================ causal conv1d

def conv_case(cases, shape):
    def build(rng):
        b, L, Dm, K = shape
        f32 = np.float32
        x = rng.standard_normal((b, L, Dm), dtype=f32)
        w = rng.uniform(-1 / math.sqrt(K), 1 / math.sqrt(K), (Dm, K)).astype(f32)
        bias = rng.uniform(-1 / math.sqrt(K), 1 / math.sqrt(K), Dm).astype(f32)
        dy = rng.standard_normal((b, L, Dm), dtype=f32)
        want = causal_conv1d_ref(x, w, bias)
        gwant = causal_conv1d_backward_ref(dy, x, w, bias)
        return SimpleNamespace(x=x, w=w, bias=bias, dy=dy, want=want, gwant=gwant)
    return cases(("conv", shape), build)


def _conv_bytes(shape, passes):
    b, L, Dm, _ = shape
    return passes * 4 * b * L * Dm


def _torch_conv_inputs(c):
    """F.conv1d's layout: x, dy (batch, D, L); weight (D, 1, K)."""
    tl = lambda a: torch.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1)))  # noqa: E731
    return tl(c.x), torch.from_numpy(c.w[:, None, :].copy()), torch.from_numpy(c.bias), tl(c.dy)


CONV_FWD = grouped("causal_conv1d fwd", CONV_SHAPES, CONV_AXES)
CONV_FB = grouped("causal_conv1d fwd+bwd", CONV_SHAPES, CONV_AXES)
CONV_NOTE = ("F.conv1d takes (batch, D, L), transposed once outside the timing, and computes "
             "L+K-1 outputs of which the first L are kept")


@pytest.mark.parametrize("shape", CONV_FWD)
def test_conv_fwd_lutcore(benchmark, record, cases, simd, shape):
    c = conv_case(cases, shape)
    err = rel_err(lutcore.ops.causal_conv1d(c.x, c.w, c.bias), c.want)
    assert err < FWD_TOL, err
    record("causal_conv1d fwd", shape, "lutcore", bytes=_conv_bytes(shape, 2),
           call="ops.causal_conv1d(x, w, bias)")
    benchmark(lutcore.ops.causal_conv1d, c.x, c.w, c.bias)


@requires_torch_nn
@pytest.mark.parametrize("shape", CONV_FWD)
def test_conv_fwd_torch(benchmark, record, cases, shape):
    c = conv_case(cases, shape)
    K, L = shape[3], shape[1]
    xt, wt, bt, _ = _torch_conv_inputs(c)

    def fn():
        with torch.no_grad():
            return F.conv1d(xt, wt, bt, padding=K - 1, groups=xt.shape[1])[..., :L]

    err = rel_err(fn().numpy().transpose(0, 2, 1), c.want)
    assert err < FWD_TOL, err
    record("causal_conv1d fwd", shape, "torch", threads=torch.get_num_threads(), bytes=_conv_bytes(shape, 2),
           call="F.conv1d(x, w, b, padding=K-1, groups=D)[..., :L]", note=CONV_NOTE)
    benchmark(fn)


@pytest.mark.parametrize("shape", CONV_FB)
def test_conv_fwdbwd_lutcore(benchmark, record, cases, simd, shape):
    c = conv_case(cases, shape)

    def fn():
        y = lutcore.ops.causal_conv1d(c.x, c.w, c.bias)
        return y, lutcore.ops.causal_conv1d_backward(c.dy, c.x, c.w, c.bias)

    y, (dx, dw, db) = fn()
    errs = [rel_err(y, c.want)] + [rel_err(g, w) for g, w in zip((dx, dw, db), c.gwant)]
    assert max(errs) < FWD_TOL, errs
    record("causal_conv1d fwd+bwd", shape, "lutcore", bytes=_conv_bytes(shape, 5),
           call="ops.causal_conv1d(x, w, b); ops.causal_conv1d_backward(dy, x, w, b)")
    benchmark(fn)


@requires_torch_nn
@pytest.mark.parametrize("shape", CONV_FB)
def test_conv_fwdbwd_torch(benchmark, record, cases, shape):
    c = conv_case(cases, shape)
    K, L = shape[3], shape[1]
    xt, wt, bt, dyt = _torch_conv_inputs(c)
    leaves = [t.clone().requires_grad_(True) for t in (xt, wt, bt)]

    def fn():
        for t in leaves:
            t.grad = None
        x, w, b = leaves
        y = F.conv1d(x, w, b, padding=K - 1, groups=x.shape[1])[..., :L]
        y.backward(dyt)
        return y

    y = fn()
    x, w, b = leaves
    errs = [rel_err(y.detach().numpy().transpose(0, 2, 1), c.want),
            rel_err(x.grad.numpy().transpose(0, 2, 1), c.gwant[0]),
            rel_err(w.grad.numpy()[:, 0, :], c.gwant[1]), rel_err(b.grad.numpy(), c.gwant[2])]
    assert max(errs) < FWD_TOL, errs
    record("causal_conv1d fwd+bwd", shape, "torch autograd", threads=torch.get_num_threads(),
           bytes=_conv_bytes(shape, 5), call="F.conv1d(...)[..., :L].backward(dy)", note=CONV_NOTE)
    benchmark(fn)


# ================================================================ whole Mamba-1 block

def block_config(shape):
    return MambaConfig(d_model=shape[2], n_layer=1, vocab_size=256, d_state=D_STATE, d_conv=D_CONV,
                       discretization="simplified")


PREFIX = "backbone.layers.0."


def block_inputs(rng, shape):
    b, L, d = shape
    model = MambaLM(block_config(shape))
    x = rng.standard_normal((b, L, d), dtype=np.float32)
    dy = rng.standard_normal((b, L, d), dtype=np.float32)
    return SimpleNamespace(model=model, x=x, dy=dy)


def block_fb_lutcore(c):
    """Mamba1Block forward, then backward into reused (zeroed) gradient buffers."""
    blk = c.model.blocks[0]
    grads = {k: np.zeros_like(v) for k, v in c.model.parameters().items() if k.startswith(PREFIX)}

    def run():
        for g in grads.values():
            g.fill(0)
        res, cache = blk.forward(c.x)
        dx = blk.backward(c.dy, cache, grads)
        return res, dx, grads
    return run


HF_MAMBA = "transformers.models.mamba.modeling_mamba"


def hf_mamba_config(cfg: MambaConfig):
    """transformers' MambaConfig of the same model (lutcore's config.json), mambapy scan, no cache."""
    tf = need_module("transformers")
    d = cfg.to_hf()
    d.pop("lutcore", None)
    return tf.MambaConfig(**d, use_mambapy=True, use_cache=False)


def hf_impl_name(base: str) -> str:
    iu = need_module("transformers.utils.import_utils")
    return f"{base} (mambapy scan)" if iu.is_mambapy_available() else f"{base} (sequential scan)"


def block_fb_hf(c):
    """transformers' MambaBlock (RMSNorm + MambaMixer + residual) with lutcore's weights, train mode;
    forward + .backward(dy) with autograd, gradients of the weights and of x."""
    mm = need_module(HF_MAMBA)
    blk = mm.MambaBlock(hf_mamba_config(c.model.config), layer_idx=0)
    sd = {k[len(PREFIX):]: torch.from_numpy(v.copy()) for k, v in c.model.parameters().items()
          if k.startswith(PREFIX)}
    blk.load_state_dict(sd, strict=True)
    blk.train()
    x = torch.from_numpy(c.x.copy()).requires_grad_(True)
    dy = torch.from_numpy(c.dy)

    def run():
        blk.zero_grad(set_to_none=True)
        x.grad = None
        out = blk(x)
        out.backward(dy)
        return out, x, blk
    return run


def _mem_block_lutcore(shape):
    return block_fb_lutcore(block_inputs(np.random.default_rng(SEED), shape))


def _mem_block_hf(shape):
    return block_fb_hf(block_inputs(np.random.default_rng(SEED), shape))


def block_case(cases, shape):
    """Inputs and lutcore's float32 result (output, dx, gradients)."""
    def build(rng):
        c = block_inputs(rng, shape)
        res, dx, grads = block_fb_lutcore(c)()
        c.res, c.dx, c.grads = res.copy(), dx.copy(), {k: v.copy() for k, v in grads.items()}
        return c
    return cases(("block", shape), build)


def hf_block_case(cases, shape):
    """transformers' result on the same weights and inputs (skips without transformers/torch)."""
    def build(rng):
        c = block_case(cases, shape)
        out, x, blk = block_fb_hf(c)()
        grads = {PREFIX + n: p.grad.numpy().copy() for n, p in blk.named_parameters()}
        return SimpleNamespace(res=out.detach().numpy().copy(), dx=x.grad.numpy().copy(), grads=grads)
    if torch is None:
        pytest.skip("torch is not importable")
    return cases(("hf_block", shape), build)


def block_errors(res, dx, grads, ref):
    errs = {"out": rel_err(res, ref.res), "dx": rel_err(dx, ref.dx)}
    errs.update({k[len(PREFIX):]: rel_err(grads[k], ref.grads[k]) for k in ref.grads})
    return errs


BLOCK = [p for s in BLOCK_SHAPES
         for p in grouped("Mamba1Block fwd+bwd", [s], _block_axes(s))]


@pytest.mark.parametrize("shape", BLOCK)
def test_block_fwdbwd_lutcore(benchmark, record, cases, simd, shape):
    c = block_case(cases, shape)
    run = block_fb_lutcore(c)
    res, dx, grads = run()
    errs = block_errors(res, dx, grads, c)              # this SIMD path against the default one
    assert max(errs.values()) < BLOCK_TOL, errs
    extra = {}
    if torch is not None:
        try:
            ref = hf_block_case(cases, shape)
        except pytest.skip.Exception:
            ref = None
        if ref is not None:
            e = block_errors(res, dx, grads, ref)
            assert max(e.values()) < BLOCK_TOL, f"lutcore block vs transformers: {e}"
            extra["rel_err_vs_transformers"] = float(f"{max(e.values()):.3g}")
    mem = peak_rss(_mem_block_lutcore, shape, simd=lutcore.get_simd())
    record("Mamba1Block fwd+bwd", shape, "lutcore", tokens=shape[0] * shape[1], **mem, **extra,
           call="MambaLM(MambaConfig(d_model, n_layer=1, discretization='simplified')).blocks[0]: "
                "forward(x); backward(dy, cache, grads)")
    benchmark(run)


@requires_torch_nn
@pytest.mark.parametrize("shape", BLOCK)
def test_block_fwdbwd_transformers(benchmark, record, cases, shape):
    c = block_case(cases, shape)
    ref = hf_block_case(cases, shape)
    errs = block_errors(ref.res, ref.dx, ref.grads, c)
    assert max(errs.values()) < BLOCK_TOL, f"transformers block vs lutcore: {errs}"
    run = block_fb_hf(c)
    run()
    mem = peak_rss(_mem_block_hf, shape, imports=(HF_MAMBA,))
    record("Mamba1Block fwd+bwd", shape, hf_impl_name("transformers MambaBlock"), threads=torch.get_num_threads(),
           tokens=shape[0] * shape[1], rel_err_vs_lutcore=float(f"{max(errs.values()):.3g}"), **mem,
           call="MambaBlock(MambaConfig(..., use_mambapy=True)).train(): out = blk(x); out.backward(dy)",
           note="transformers' MambaBlock = RMSNorm + MambaMixer + residual, the same layer as lutcore's "
                "Mamba1Block; torch fallbacks (no mamba_ssm / causal_conv1d kernels on CPU)")
    benchmark.pedantic(run, **SLOW)
