"""A whole ResNet-18 (CIFAR) training step through Mitchell with each backward beside torch
float32, the arms alternated round by round in ONE process (issue: training through the tables).

    python bench/ab_resnet18.py [--rounds 5] [--budget 0.1] [--threads 2] [--batch 32]
                                [--arms float,ste,units,table] [--profile table] [--tree DIR]

    model   ResNet-18 for CIFAR (He et al. 2016, the CIFAR variant of kuangliu/pytorch-cifar):
            3x3 stem 3->64 (stride 1, no max-pool), 4 stages of 2 BasicBlocks (64/128/256/512
            channels, stride 1/2/2/2, a 1x1 conv + BatchNorm shortcut where the shape changes),
            BatchNorm, ReLU, global average pool, fc 512->10; 11.2 M parameters, 0.56 GMAC an image
    step    SGD(lr 0.01, momentum 0.9, weight decay 5e-4).zero_grad(); cross_entropy(model(x), y)
            .backward(); .step() on a fixed batch (32, 3, 32, 32) in train mode
    arms    torch float32 | lutcore.torch.approximate(model, "mitchell", backward=b) for b in
            ste, units, table: every conv (20) and the fc through the unit

Every arm starts from the same float weights; before timing each takes one step whose loss and
gradients must be finite.  A round calls each arm in turn for --budget s (at least one step),
every step timed; the table gives min / median over all steps, images/s from the min, and the
time ratio to torch float (min and median).  2 threads for torch and lutcore (--threads).

--profile ARM times the parts of ARM's step per stage (stem, layer1..4, fc) by wrapping the
functions of lutcore.torch.functional / _gradtables (forward: input quantization, im2col, the LUT
GEMM, dequantization, the weight check; backward: the input's quantization again, its patches,
dY's layout, the dX and dW passes, fold, dW's layout) and prints that table; the rest of the step
is torch (BatchNorm, ReLU, the loss, SGD) and autograd.  --tree DIR imports lutcore from another
checkout (a "before" build).  Arms table-<v> switch one part of the planes path off in the same
process (VARIANTS: gathers, noskip, nosym, nopad, nochunk), so each part's effect is measured
against the table arm round by round.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.1, help="seconds each arm is stepped a round")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--arms", default="float,ste,units,table",
                   help="of float, ste, units, table, and table-<v> (v: gathers, noskip, nosym, nopad, nochunk)")
    p.add_argument("--profile", default="", help="an arm whose step is broken down per stage and part")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--tree", default=str(HERE.parent))
    return p.parse_args(argv)


if __name__ == "__main__":
    A = _args()
    sys.path[:0] = [str(Path(A.tree).resolve()), str(HERE)]

import lutcore  # noqa: E402  (before torch: its OpenMP spin settings, DESIGN "Other pools")
from lutbench import alternate, cpu_counters, cpu_name, other_cpu_share, torch, use_threads  # noqa: E402

nn = torch.nn
F = torch.nn.functional

SEED = 20261207
UNITS = "mitchell"
BACKWARDS = ("ste", "units", "table")


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 32x32 inputs: x (N, 3, 32, 32) -> logits (N, classes)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        stages, cin = [], 64
        for i, c in enumerate((64, 128, 256, 512)):
            stages.append(nn.Sequential(BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))                          # (N, 64, 32, 32)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))    # (N, 512, 4, 4)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def macs(model, x) -> int:
    """Multiply-accumulates of the model's convs and linears on x (forward)."""
    total = [0]

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            total[0] += out.numel() * m.weight[0].numel()
        elif isinstance(m, nn.Linear):
            total[0] += out.numel() // out.shape[-1] * m.weight.numel()
    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(x)
    for h in hs:
        h.remove()
    return total[0]


VARIANTS = {      # "table-<variant>": the table arm with one of the planes path's parts switched off
    "gathers": "the gradient-table pass as gathers (lutcore.torch._gradtables.USE_PLANES = False)",
    "noskip": "dW without leaving out its code-0 steps (planes_pass(..., skip=False))",
    "nosym": "dW's codes not read by magnitude (planes_pass(..., sym=False))",
    "nopad": "the planes operands' rows not padded (functional.ROW_PAD = 0)",
    "nochunk": "dX's patch gradients folded all at once (functional.FOLD_CHUNK = 2**62)",
}


@contextlib.contextmanager
def _set(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def variant(name):
    """A context that switches one part off for its block (VARIANTS), or does nothing."""
    from lutcore.ops import gradtables as room
    from lutcore.torch import _gradtables as gt
    from lutcore.torch import functional as fn
    orig = room.planes_pass
    if name == "gathers":
        return _set(gt, "USE_PLANES", False)
    if name in ("noskip", "nosym"):
        key = name[2:]
        return _set(room, "planes_pass", lambda *a, **k: orig(*a, **{**k, key: False}))
    if name == "nopad":
        return _set(fn, "ROW_PAD", 0)
    if name == "nochunk":
        return _set(fn, "FOLD_CHUNK", 2 ** 62)
    return contextlib.nullcontext()


def build(batch: int, arms, threads: int):
    """{arm: step()} from one float model and one batch; each step returns (loss, model)."""
    import lutcore.torch as lt
    torch.manual_seed(SEED)
    base = ResNet18()
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    steps = {}
    for arm in arms:
        backward, _, var = arm.partition("-")
        if arm == "float":
            model = copy.deepcopy(base)
        else:
            model = lt.approximate(base, UNITS, backward=backward, threads=threads)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)

        def step(model=model, opt=opt, var=var):
            with variant(var):
                opt.zero_grad(set_to_none=False)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
            return loss, model
        steps[arm] = step
    return steps, x


def check(arm, step):
    """One step: the loss and every gradient finite (and some gradient non-zero)."""
    loss, model = step()
    loss = loss.detach()
    assert torch.isfinite(loss), f"{arm}: loss {float(loss)}"
    norm = 0.0
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), f"{arm}: gradient of {name} not finite"
        norm += float(p.grad.double().pow(2).sum())
    assert norm > 0, f"{arm}: every gradient is zero"
    return float(loss), norm ** 0.5


# ------------------------------------------------------------------------- the profile

STAGES = ("stem", "layer1", "layer2", "layer3", "layer4", "fc")


def stage_of(layer: str) -> str:
    head = layer.split(".")[0]
    return "stem" if head in ("conv1", "bn1") else head


class Profile:
    """Wall time per (stage, part) of lutcore's work in a step, by wrapping the functions of
    lutcore.torch.functional, _gradtables, lutcore.ops.gradtables and lutcore.ops.im2col that a
    layer's forward and backward call: the parts (``totals=False``), or each layer's whole
    autograd forward and backward (``totals=True``: they contain the parts, so they are timed in
    steps of their own).  A part called inside another counts in the outer one only."""

    def __init__(self, totals: bool):
        self.totals = totals
        self.t = collections.defaultdict(float)
        self.layer, self.phase = "?", "fwd"
        self._undo = []
        self._depth = 0

    def _patch(self, owner, name, wrapper_of):
        orig = owner.__dict__[name]
        static = isinstance(orig, staticmethod)
        fn = orig.__func__ if static else orig
        w = wrapper_of(fn)
        setattr(owner, name, staticmethod(w) if static else w)
        self._undo.append((owner, name, orig))

    def _timer(self, label):
        """A wrapper factory: time the call under label (a str, or f(args) -> str) in the current
        (stage, phase)."""
        prof = self

        def wrapper_of(fn):
            def wrapper(*a, **k):
                if prof._depth:
                    return fn(*a, **k)
                prof._depth += 1
                t0 = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    prof._depth -= 1
                    name = label(a) if callable(label) else label
                    prof.t[(stage_of(prof.layer), name.format(phase=prof.phase))] += time.perf_counter() - t0
            return wrapper
        return wrapper_of

    def _marker(self, phase, layer_of, timed):
        """A wrapper factory for an autograd Function's forward / backward: sets the phase and the
        layer (and times the whole call when ``timed``)."""
        prof = self

        def wrapper_of(fn):
            def wrapper(ctx, *a):
                prof.phase, prof.layer = phase, layer_of(ctx, a)
                t0 = time.perf_counter()
                try:
                    return fn(ctx, *a)
                finally:
                    if timed:
                        prof.t[(stage_of(prof.layer), f"{phase}: whole layer")] += time.perf_counter() - t0
            return wrapper
        return wrapper_of

    def __enter__(self):
        from lutcore.ops import gradtables as room
        from lutcore.ops import im2col as i2c
        from lutcore.torch import _gradtables as gt
        from lutcore.torch import functional as fn
        conv, lin = fn.LutConvFunction, fn.LutLinearFunction
        self._patch(conv, "forward", self._marker("fwd", lambda ctx, a: a[8], self.totals))
        self._patch(lin, "forward", self._marker("fwd", lambda ctx, a: a[7], self.totals))
        self._patch(conv, "backward", self._marker("bwd", lambda ctx, a: ctx.lc[5], self.totals))
        self._patch(lin, "backward", self._marker("bwd", lambda ctx, a: ctx.lc[4], self.totals))
        if self.totals:
            return self
        T = self._timer
        self._patch(fn.WeightCache, "get", T("weight check / re-quantize (before the forward)"))
        self._patch(fn, "quantize_tensor", T("{phase}: quantize x (bwd: again) / dY (units)"))
        self._patch(fn._Conv, "patches", T("{phase}: im2col"))
        self._patch(fn, "product", T("fwd: LUT GEMM"))
        self._patch(fn, "_dequant", T("fwd: dequantize"))
        self._patch(fn, "_fold", T("bwd: fold dX (F.fold)"))
        self._patch(fn, "_gemm_f32", T("bwd units: LUT GEMMs"))
        self._patch(i2c, "_im2col_kmajor", T("bwd: k-major patches"))
        self._patch(i2c, "_fold_kmajor", T("bwd: fold dX (native)"))
        self._patch(i2c, "_scaled_om", T("bwd: layouts (dY s_w as (O, M), dY rows, dW)"))
        self._patch(i2c, "_chw_rows", T("bwd: layouts (dY s_w as (O, M), dY rows, dW)"))
        self._patch(i2c, "_dw_layout", T("bwd: layouts (dY s_w as (O, M), dY rows, dW)"))
        self._patch(room, "planes_pass", T(lambda a: "bwd: dX pass (planes)" if a[1].flags.c_contiguous
                                           else "bwd: dW pass (planes)"))
        orig, prof = gt.table_grads, self

        def table_grads(qx, qw, g, dy, ga, gb, nt, gbt=None):     # the gathers' pass: dX and dW apart
            t0 = time.perf_counter()
            dx, _ = orig(qx, qw, g, None, ga, gb, nt, gbt)
            t1 = time.perf_counter()
            _, s = orig(qx, qw, None, dy, ga, gb, nt, gbt)
            t2 = time.perf_counter()
            prof.t[(stage_of(prof.layer), "bwd: dX pass (gathers)")] += t1 - t0
            prof.t[(stage_of(prof.layer), "bwd: dW pass (gathers)")] += t2 - t1
            return dx, s
        gt.table_grads = table_grads
        self._undo.append((gt, "table_grads", orig))
        return self

    def __exit__(self, *exc):
        for owner, name, orig in reversed(self._undo):
            setattr(owner, name, orig)


def print_profile(arm, step, steps):
    """Profile ``steps`` steps with the parts' wrappers and as many with the totals'; print the
    fastest step of each as a table (ms per stage): the parts, each layer's forward and backward
    beyond its parts ("rest": Python, dY's layouts, dW's reshape, the conversions between torch
    and numpy), and the step beyond lutcore's layers (torch's BatchNorm, ReLU, pooling, loss, SGD
    and autograd)."""
    got, t_step = {}, {}
    for totals in (False, True):
        with Profile(totals) as p:
            best = None
            for _ in range(steps):
                p.t.clear()
                t0 = time.perf_counter()
                step()
                dt = time.perf_counter() - t0
                if best is None or dt < best:
                    best, got[totals] = dt, dict(p.t)
        t_step[totals] = best
    parts, whole = got[False], got[True]
    names = sorted({k[1] for k in parts}, key=lambda n: (not n.startswith("fwd"), n))
    rows = [(n, {s: parts.get((s, n), 0.0) for s in STAGES}) for n in names]
    for ph in ("fwd", "bwd"):
        rest = {s: whole.get((s, f"{ph}: whole layer"), 0.0)
                - sum(v for (st, n), v in parts.items() if st == s and n.startswith(ph)) for s in STAGES}
        rows.append((f"{ph}: rest of the layer (Python, layouts, conversions)", rest))
    lut = {s: whole.get((s, "fwd: whole layer"), 0.0) + whole.get((s, "bwd: whole layer"), 0.0)
           + parts.get((s, "weight check / re-quantize (before the forward)"), 0.0) for s in STAGES}
    rows.append(("lutcore layers: weight check + forward + backward", lut))
    step_t = t_step[True]
    print(f"\n### Where the time goes: arm {arm!r}, fastest of {steps} profiled steps, per stage (ms)\n")
    print("| part | " + " | ".join(STAGES) + " | total | share of step |")
    print("|---|" + "--:|" * (len(STAGES) + 2))
    for n, per in rows:
        tot = sum(per.values())
        print(f"| {n} | " + " | ".join(f"{per[s] * 1e3:.1f}" for s in STAGES) + f" | {tot * 1e3:.1f} | "
              f"{tot / step_t:.1%} |")
    rest = step_t - sum(lut.values())
    print(f"| torch (BatchNorm, ReLU, add, pool, loss, SGD) + autograd | | | | | | | {rest * 1e3:.1f} | "
          f"{rest / step_t:.1%} |")
    print(f"\nstep (the fastest; with the parts' timers / with the layers' timers): {t_step[False] * 1e3:.1f} / "
          f"{t_step[True] * 1e3:.1f} ms; shares are of the latter (the parts come from other steps)")
    return got, t_step


def main():
    use_threads(A.threads)
    arms = [a.strip() for a in A.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ("float",) + BACKWARDS + tuple(f"table-{v}" for v in VARIANTS)]
    if bad:
        raise SystemExit(f"--arms: unknown {bad}")
    steps, x = build(A.batch, arms, A.threads)
    n_macs = macs(ResNet18(), x)
    print(f"# {cpu_name()}; SIMD path {lutcore.get_simd()}; {A.threads} threads (torch {torch.get_num_threads()}); "
          f"torch {torch.__version__}; lutcore from {Path(lutcore.__file__).parent}")
    print(f"# ResNet-18 CIFAR, batch {A.batch}: {n_macs / 1e9:.2f} GMAC forward; units {UNITS}")
    for arm in arms:
        loss, gn = check(arm, steps[arm])
        print(f"# {arm}: loss {loss:.4f}, gradient norm {gn:.4g} (finite)")
    if A.profile:
        print_profile(A.profile, steps[A.profile], A.profile_steps)
        return 0
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]
    c0 = cpu_counters()
    res = alternate([steps[a] for a in arms], A.rounds, A.budget)
    c1 = cpu_counters()
    with open("/proc/loadavg") as f:
        load1 = f.read().split()[:3]
    share = other_cpu_share(c0, c1)
    print(f"# {A.rounds} rounds; load average {' '.join(load0)} before, {' '.join(load1)} after; other processes "
          f"used {share:.0%} of the CPUs during the run" if share is not None else "")
    t_float = dict(zip(arms, res)).get("float")
    print("\n| arm | step min (ms) | step median (ms) | images/s (min) | images/s (median) | "
          "time / torch float (min) | (median) |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for arm, (mn, med) in zip(arms, res):
        label = "torch float32" if arm == "float" else f"lutcore `{arm}`"
        if "-" in arm:
            label = f"lutcore `table`, {VARIANTS[arm.split('-', 1)[1]]}"
        r = "" if t_float is None else f"{mn / t_float[0]:.2f}x | {med / t_float[1]:.2f}x"
        print(f"| {label} | {mn * 1e3:.0f} | {med * 1e3:.0f} | {A.batch / mn:.1f} | {A.batch / med:.1f} | {r} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
