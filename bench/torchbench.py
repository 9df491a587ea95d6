"""Cases shared by bench/test_bench_torch.py (pytest-benchmark) and bench/torch_ratios.py
(the alternating side-by-side run whose ratios go into BENCHMARKS.md).

Design: one builder per case so both front ends time the very same layers on the very
same inputs, each validated before it is timed:

    peer()              the TorchApprox CPU algorithm (bench/torchapprox_peer.cpp) built with
                        torch.utils.cpp_extension, or None when it cannot build (then the
                        numpy definition, gemm_ref, is the peer: slower, and said so)
    GEMM_SHAPES         ResNet-18 (CIFAR, batch 8) conv layers as im2col GEMMs (M, K, N), the
                        linear (256, 768, 3072), and batch 1 of each
    layer_case(shape)   the lutcore layer with that GEMM (ApproxConv2d 3x3 pad 1 on the
                        matching input, or ApproxLinear), its float twin, the int8 operands
                        of the product and the peer's inputs
    resnet18_cifar()    a ResNet-18 for 32x32 inputs (BasicBlocks, batch norm), seeded
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from lutbench import dim, torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

# (M, K, N) = (B*H*W, 9*C, O) for a 3x3 pad-1 conv C -> O on (B, C, H, W); the linear as (M, K, N)
RESNET_CONVS = [(8, 3, 64, 32), (8, 64, 64, 32), (8, 128, 128, 16), (8, 256, 256, 8), (8, 512, 512, 4)]
LINEAR = (256, 768, 3072)


def conv_gemm(B, C, O, HW):
    return (B * HW * HW, 9 * C, O)


def cases():
    """[(label, kind, spec)]: conv specs (B, C, O, HW) and linear specs (M, K, N), batch 8 then batch 1."""
    out = []
    for b in (8, 1):
        for B, C, O, HW in RESNET_CONVS:
            s = (b, dim(C) if C > 3 else C, dim(O), HW)
            out.append((f"conv {'x'.join(map(str, conv_gemm(*s)))}", "conv", s))
        M = LINEAR[0] if b == 8 else 1
        s = (dim(M) if M > 1 else 1, dim(LINEAR[1]), dim(LINEAR[2]))
        out.append((f"linear {'x'.join(map(str, s))}", "linear", s))
    return out


_PEER = []


def peer():
    """The compiled TorchApprox-algorithm module (ta_gemm), or None if it cannot be built."""
    if not _PEER:
        try:
            from torch.utils.cpp_extension import load
            _PEER.append(load(name="lutcore_ta_peer", sources=[str(HERE / "torchapprox_peer.cpp")],
                              extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"], verbose=False))
        except Exception as e:  # noqa: BLE001 - no compiler: the numpy definition stands in
            print(f"torchapprox peer did not build ({e}); using the numpy definition", file=sys.stderr)
            _PEER.append(None)
    return _PEER[0]


def layer_case(kind, spec, units, seed=20240611):
    """The approximate layer, its float twin, the input, and the peer's int8 operands."""
    import lutcore.torch as lt
    from lutcore.torch import functional as fn
    g = torch.Generator().manual_seed(seed)
    if kind == "conv":
        B, C, O, HW = spec
        flt = torch.nn.Conv2d(C, O, 3, padding=1)
        x = torch.randn(B, C, HW, HW, generator=g)
    else:
        M, K, N = spec
        flt = torch.nn.Linear(K, N)
        x = torch.randn(M, K, generator=g)
    flt.requires_grad_(False)
    layer = lt.approximate(flt, units)
    layer.requires_grad_(False)
    # the GEMM operands the layer feeds its product: patches (M, K) and weight rows (N, K)
    qw = layer._lc_weight()
    if kind == "conv":
        geo = fn._Conv(x, flt.weight, 1, 1, 1, 1, "bench")
        q, _ = fn.quantize_tensor(x, None, "input", "bench", 2)
        a = geo.patches(q, 2)[0].copy()
    else:
        q, _ = fn.quantize_tensor(x, None, "input", "bench", 2)
        a = q.reshape(x.shape).copy()
    lut = torch.from_numpy(layer.units.mul.astype(np.int32))
    return SimpleNamespace(layer=layer, flt=flt, x=x, a=a, w=np.ascontiguousarray(qw.q), lut=lut,
                           macs=a.shape[0] * a.shape[1] * qw.q.shape[0])


def peer_call(c):
    """A callable running the peer's product on the case's operands (and its output)."""
    p = peer()
    ta, tw = torch.from_numpy(c.a), torch.from_numpy(c.w)
    if p is not None:
        return lambda: p.ta_gemm(ta, tw, c.lut)
    from reference.gemm_ref import lut_gemm_ref
    mul = c.lut.numpy().astype(np.int16)
    return lambda: torch.from_numpy(lut_gemm_ref(c.a, c.w.T.copy(), mul))


# ---------------------------------------------------------------- ResNet-18 (CIFAR)

def resnet18_cifar(num_classes: int = 10, seed: int = 0):
    nn = torch.nn
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    return ResNet18()


def resnet_macs_per_image(model) -> int:
    """Multiply-accumulates of one 32x32 image through the model's convs and linears."""
    macs = []

    def hook(m, inp, out):
        if isinstance(m, torch.nn.Conv2d):
            macs.append(out.numel() // out.shape[0] * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1])
        elif isinstance(m, torch.nn.Linear):
            macs.append(out.numel() // out.shape[0] * m.in_features)

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        model(torch.zeros(1, 3, 32, 32))
    for h in hs:
        h.remove()
    return int(sum(macs))

