"""Finite-difference gradient checks shared by the model tests (float64 models).

4th-order central differences; an analytic value passes when
|analytic - fd| <= FD_ATOL + FD_RTOL * max(|analytic|, |fd|)  (the FD noise
floor is ~1e-11 for losses ~2 at step FD_H).
"""
import numpy as np

FD_H = 1e-4
FD_ATOL = 1e-9
FD_RTOL = 1e-6


def fd4(f, h=FD_H):
    """4th-order central difference of a scalar function of a scalar offset at 0."""
    return (-f(2 * h) + 8 * f(h) - 8 * f(-h) + f(-2 * h)) / (12 * h)


def within(analytic, numeric):
    err = abs(analytic - numeric)
    bound = FD_ATOL + FD_RTOL * max(abs(analytic), abs(numeric))
    return err <= bound, err, bound


def check_elements(arrays, grads, loss_fn, picks):
    """Per-element FD of scalar ``loss_fn()`` w.r.t. arrays[name].flat[j] (mutated and restored).
    Returns [(name, flat index, analytic, fd, err, bound, ok)]."""
    out = []
    for name, idxs in picks.items():
        a = arrays[name]
        for j in idxs:
            old = a.flat[j]

            def f(d, a=a, j=j, old=old):
                a.flat[j] = old + d
                try:
                    return loss_fn()
                finally:
                    a.flat[j] = old
            num = fd4(f)
            ana = float(grads[name].flat[j])
            ok, err, bound = within(ana, num)
            out.append((name, int(j), ana, num, err, bound, ok))
    return out


def check_direction(arrays, grads, loss_fn, rng):
    """Directional derivative along one random unit direction over ALL arrays.
    Returns (analytic, fd, err, bound, ok)."""
    v = {n: rng.standard_normal(a.shape) for n, a in arrays.items()}
    norm = np.sqrt(sum(float(np.sum(x * x)) for x in v.values()))
    v = {n: x / norm for n, x in v.items()}
    base = {n: a.copy() for n, a in arrays.items()}

    def f(d):
        for n, a in arrays.items():
            a[...] = base[n] + d * v[n]
        try:
            return loss_fn()
        finally:
            for n, a in arrays.items():
                a[...] = base[n]
    num = fd4(f)
    ana = float(sum(np.sum(grads[n] * v[n], dtype=np.float64) for n in arrays))
    ok, err, bound = within(ana, num)
    return ana, num, err, bound, ok


def pick(arrays, rng, k=3):
    """{name: flat indices} — k random elements of every array."""
    return {n: rng.choice(a.size, size=min(k, a.size), replace=False) for n, a in arrays.items()}


def failures(records):
    """The records of check_elements that did not pass."""
    return [r for r in records if not r[-1]]


def fmt(records):
    return "\n".join(f"  {n}[{j}]: analytic {a:.12e} fd {f:.12e} err {e:.2e} > bound {b:.2e}"
                     for n, j, a, f, e, b, _ in records)


def assert_gradients(arrays, grads, loss_fn, picks, rng):
    """Every picked element and one random direction over all arrays pass the FD check
    (prints the worst element and the directional result)."""
    recs = check_elements(arrays, grads, loss_fn, picks)
    worst = max(recs, key=lambda r: r[4] / r[5])
    print(f"\nchecked {len(recs)} elements of {len(arrays)} tensors; worst err/bound = "
          f"{worst[4] / worst[5]:.3f} at {worst[0]}[{worst[1]}] (err {worst[4]:.2e})")
    bad = failures(recs)
    assert not bad, "gradient mismatch:\n" + fmt(bad)
    ana, num, err, bound, ok = check_direction(arrays, grads, loss_fn, rng)
    print(f"directional: analytic {ana:.12e} fd {num:.12e} err {err:.2e} (bound {bound:.2e})")
    assert ok, (ana, num, err, bound)


def assert_checks_catch(arrays, grads, loss_fn, picks, scaled, offset):
    """The checks are not vacuous: the clean gradients pass; ``scaled`` made 1 % too large
    fails both the per-element and the directional check (the clean ones still pass the
    direction); one element of ``offset`` moved by 1e-6 fails there, and only there."""
    assert not failures(check_elements(arrays, grads, loss_fn, picks))          # control: clean passes
    bad_g = {k: v.copy() for k, v in grads.items()}
    bad_g[scaled] *= 1.01
    fails = failures(check_elements(arrays, bad_g, loss_fn, {scaled: picks[scaled]}))
    assert fails and all(f[0] == scaled for f in fails), fails
    assert not check_direction(arrays, bad_g, loss_fn, np.random.default_rng(1))[-1]
    assert check_direction(arrays, grads, loss_fn, np.random.default_rng(1))[-1]
    j = int(picks[offset][0])
    bad_g = {k: v.copy() for k, v in grads.items()}
    bad_g[offset].flat[j] += 1e-6
    fails = failures(check_elements(arrays, bad_g, loss_fn, {offset: picks[offset]}))
    assert [(f[0], f[1]) for f in fails] == [(offset, j)], fails
