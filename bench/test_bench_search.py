"""The per-layer search on the digits example: one evaluation, switching a layer's units, and
where an evaluation's time goes.

One search evaluation = set every layer's units (an assignment) + the example's metric (the
held-out split, 359 images, through the approximate CNN).  Its peer is the same metric on the
float model (torch), on the same images in the same run; "switch" is the assignment alone
(no re-quantization: it must cost far less than one forward).  ``share_products`` in the
extra info: the part of an evaluation spent inside lutcore.lut_gemm (the products), the rest
being quantization, im2col, the float layers and Python.

    group                         lutcore                       peer
    search eval digits            set assignment + metric       torch float metric
    search switch digits          set assignment                one float forward
"""
from __future__ import annotations

import time

import pytest

from lutbench import requires_torch_nn, torch

pytestmark = requires_torch_nn

ASSIGN = {"features.0": "reduced:3", "features.2": "mitchell", "features.5": "truncated:10",
          "classifier": "exact"}


@pytest.fixture(scope="module")
def digits_case():
    import lutcore.torch as lt
    from lutcore.torch import digits
    from lutcore.units import resolve
    torch.manual_seed(0)
    xtr, ytr, xte, yte = digits.load()
    net = digits.train(digits.DigitsCNN(), xtr, ytr, epochs=3)
    model = lt.approximate(net, "exact")
    units = {n: resolve(s) for n, s in ASSIGN.items()}
    layers = dict(model.named_modules())

    def assign():
        for n, u in units.items():
            layers[n].units = u

    def evaluate(m):
        return 1.0 - digits.accuracy(m, xte, yte)
    assign()
    return net, model, assign, evaluate, xte


def _share_in_products(model, evaluate, rounds=5):
    """Seconds in lut_gemm over seconds of the whole evaluation (the smallest of ``rounds``)."""
    import lutcore.torch.functional as fn
    inner = fn.lut_gemm
    spent = [0.0]

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t
    best = None
    fn.lut_gemm = timed
    try:
        for _ in range(rounds):
            spent[0] = 0.0
            t = time.perf_counter()
            evaluate(model)
            whole = time.perf_counter() - t
            if best is None or whole < best[1]:
                best = (spent[0], whole)
    finally:
        fn.lut_gemm = inner
    return best[0] / best[1]


@pytest.mark.benchmark(group="search eval digits")
@pytest.mark.parametrize("impl", ["lutcore", "torch float"])
def test_search_eval(benchmark, record, digits_case, impl):
    net, model, assign, evaluate, xte = digits_case
    if impl == "lutcore":
        want = evaluate(model)
        got = benchmark(lambda: (assign(), evaluate(model))[1])
        assert got == want
        record("search eval", "digits 359 images", impl, share_products=round(_share_in_products(model, evaluate), 3))
    else:
        benchmark(evaluate, net)
        record("search eval", "digits 359 images", impl)


@pytest.mark.benchmark(group="search switch digits")
@pytest.mark.parametrize("impl", ["lutcore switch", "torch float forward"])
def test_search_switch(benchmark, record, digits_case, impl):
    net, model, assign, evaluate, xte = digits_case
    if impl == "lutcore switch":
        benchmark(assign)
    else:
        with torch.no_grad():
            benchmark(net, xte)
    record("search switch", "4 layers", impl)
