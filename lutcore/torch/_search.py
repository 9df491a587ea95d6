"""Which unit where, for a PyTorch model: product counts, sensitivity, compensation and the search.

Design: the model-free part (energy, the sensitivity table, NSGA-II, the cache, the
result files) is ``lutcore.search``; this module supplies what depends on the model.
It converts a deep copy of the model once (``approximate(model, "exact")``, the caller's
model is never touched), counts every approximate layer's products on ``example_input``
with a dry run (forward hooks record ``out.numel() * K`` per call: the multiplications the
layer actually performs, padding included), and evaluates an assignment by setting each
layer's ``units`` attribute (no re-quantization: a layer's quantized weight is keyed on the
weight, not on the units) and calling ``evaluate(model)``.

Compensation without retraining (``compensation=``), computed once per (layer, unit) on
``calibration`` inputs (default: ``example_input``) captured at each layer's input while
the model runs exact:

* ``"weights"`` — ALWANN's weight tuning: each weight code w becomes the w' that minimises
  ``sum_i h(i) |i*w - f(i, w')|`` over the activation codes i, h being the layer's observed
  histogram of activation codes (ties: the w' nearest w).  Applied as a derived unit whose
  table is ``f(a, map[b])`` — the same products as tuning the codes, with the unit's cost
  and no change to the layer's weights or its quantization.
* ``"bias"`` — a per-output-channel bias correction: the mean over the calibration data of
  (the layer's output through the unit) - (its output through the exact table), subtracted
  from the layer's bias (a zero bias is added to a layer that has none).

Both together: the bias correction is measured with the tuned unit.

What the points measure (search.json's ``measured_on``, checked by a resume before any
evaluation): a fingerprint of the model's state dict (parameters and buffers) and class, of
``example_input`` and ``calibration``, the units of the layers not searched, the
compensation, ``evaluate``'s qualified name and ``metric_name`` — ``evaluate``'s own data
(what it closes over) is not seen: a changed test set under the same function is named by
``metric_name`` or an ``out`` of its own.

Arguments are checked before the model is copied (``budget``, ``seed``, ``pop_size``,
``workers``, the flags, ``evaluate``), and the products before any evaluation: an input on
which the searched layers perform no product (an empty batch) is a ValueError.
"""
from __future__ import annotations

import copy
import os

import numpy as np
import torch
from torch import nn

from lutcore import search as _core
from lutcore.units import Units, resolve as resolve_units

__all__ = ["count_products", "sensitivity", "search", "tuned_unit", "COMPENSATIONS"]

COMPENSATIONS = ("weights", "bias")


# ----------------------------------------------------------------------------- layers

def _approx_layers(model):
    from lutcore.torch.layers import ApproxLayer
    return [(n, m) for n, m in model.named_modules() if isinstance(m, ApproxLayer)]


def _products_per_output(m) -> int:
    """K: the products behind each output value of approximate layer ``m``."""
    w = m.weight
    if isinstance(m, nn.Linear):
        return int(w.shape[1])
    if isinstance(m, (nn.Conv1d, nn.Conv2d)):
        return int(np.prod(w.shape[1:]))
    return int(w.shape[0])                            # HF Conv1D: weight (nx, nf), K = nx


def _run(model, batch):
    from lutcore.torch.convert import _run as run
    return run(model, batch)


def _fingerprint_data(x):
    """``x`` (tensors, arrays, dicts, lists / tuples, numbers, str) in the terms of
    ``lutcore.search.fingerprint``; any other object by its type only."""
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        return [str(t.dtype), list(t.shape), t.reshape(-1).view(torch.uint8).numpy()]
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, dict):
        return {str(k): _fingerprint_data(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_fingerprint_data(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return f"<{type(x).__module__}.{type(x).__qualname__}>"


def _batches(data, what):
    if isinstance(data, (torch.Tensor, dict)):
        return [data]
    if isinstance(data, tuple) and data and isinstance(data[0], torch.Tensor) and \
            not all(isinstance(d, torch.Tensor) and d.shape == data[0].shape for d in data[1:]):
        return [data]                                 # one (inputs, targets) pair
    try:
        out = list(data)
    except TypeError:
        raise TypeError(f"{what}: expected a tensor, a dict of model inputs or an iterable of batches, got "
                        f"{type(data).__name__}") from None
    if not out:
        raise ValueError(f"{what}: no batch given")
    return out


def count_products(model: nn.Module, example_input) -> dict:
    """{layer name: products} of every approximate layer of ``model`` for ``example_input``
    (a tensor, a dict of keyword inputs, or an iterable of such batches): a dry run with
    forward hooks, so a layer called twice counts twice and a layer never called counts 0."""
    layers = _approx_layers(model)
    if not layers:
        raise ValueError("model: no approximate layers (convert it with lutcore.torch.approximate first)")
    counts = {n: 0 for n, _ in layers}

    def hook(n, m):
        k = _products_per_output(m)

        def count(mod, inp, out):
            counts[n] += int(out.numel()) * k
        return m.register_forward_hook(count)
    _run_hooked(model, layers, hook, example_input, "example_input")
    return counts


def _run_hooked(model, layers, make_hook, data, what):
    """Run ``model`` (no grad) over the batches of ``data`` with ``make_hook(name, module)``
    registered on each layer (it returns the hook handle), removed afterwards."""
    hooks = [make_hook(n, m) for n, m in layers]
    try:
        with torch.no_grad():
            for b in _batches(data, what):
                _run(model, b)
    finally:
        for h in hooks:
            h.remove()


# ----------------------------------------------------------------------------- compensation

def _code_histograms(model, layers, data) -> dict:
    """{layer: int64[256]} counts of the activation codes each layer quantizes its input to
    (per tensor, as the layers do: s = max|x| / 127, q = round_half_even(x / s))."""
    hist = {n: np.zeros(256, np.int64) for n, _ in layers}

    def hook(n, m):
        def pre(mod, args):
            x = args[0].detach()
            s = mod._lc_input_scale()                 # static: the calibrated scale
            s = x.abs().max() / 127.0 if s is None else torch.tensor(float(s), dtype=torch.float32)
            if float(s) == 0.0 or x.numel() == 0:
                hist[n][0] += x.numel()
                return
            q = torch.clamp(torch.round(x / s), -127, 127).to(torch.int64)
            hist[n] += np.bincount((q.reshape(-1).numpy() & 0xff), minlength=256)
        return m.register_forward_pre_hook(pre)
    _run_hooked(model, layers, hook, data, "calibration")
    return hist


def tuned_unit(units, hist) -> Units:
    """ALWANN's weight tuning of ``units`` for activation-code histogram ``hist`` (int[256],
    indexed by the code's byte): the unit whose table is ``f(a, map[b])`` with
    ``map[w] = argmin_w' sum_i hist[i] |i*w - f(i, w')|`` (ties: the w' nearest w, then the
    smaller); it keeps the unit's cost."""
    u = resolve_units(units)
    h = np.asarray(hist, dtype=np.float64).reshape(256)
    f = u.table().astype(np.int64)                     # [a byte, b byte]
    codes = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)     # byte -> value
    used = h > 0
    mp = np.arange(256)
    if used.any() and not u.is_exact:
        i = codes[used]                                # (n,)
        hu = h[used]
        fu = f[used, :]                                # (n, 256): f(i, w') for every w' byte
        dist = np.abs(codes[None, :] - codes[:, None])   # [w byte, w' byte]
        for wb in range(256):
            w = codes[wb]
            if w == -128:
                continue                               # never produced by the quantizer
            cost = (hu[:, None] * np.abs(i[:, None] * w - fu)).sum(axis=0)          # (256,) over w'
            cost[codes == -128] = np.inf
            best = np.flatnonzero(cost == cost.min())
            mp[wb] = best[np.lexsort((codes[best], dist[wb, best]))][0]
    t = f[:, mp]
    name = f"{u.name}+wt"
    out = Units(t.astype(np.int16), u.requant_lut, u.relu_lut, name=name)
    cost = _core.unit_cost(u)
    if cost and hasattr(out, "with_cost"):
        out = out.with_cost(**cost)
    elif cost:
        out.cost = cost
    return out


def _bias_corrections(model, layers, per_layer_units, data) -> dict:
    """{(layer, unit name): float32 (O,)} mean output error of the layer through each unit,
    against the exact table, on the layer inputs the exact model sees for ``data``."""
    inputs = {n: [] for n, _ in layers}

    def hook(n, m):
        return m.register_forward_pre_hook(lambda mod, args: inputs[n].append(args[0].detach().clone()))
    _run_hooked(model, layers, hook, data, "calibration")
    exact = resolve_units("exact")
    out = {}
    with torch.no_grad():
        for n, m in layers:
            keep = m.units
            try:
                m.units = exact
                ref = [m(x) for x in inputs[n]]
                for name, u in per_layer_units[n].items():
                    m.units = u
                    tot, cnt = None, 0
                    for x, r in zip(inputs[n], ref):
                        d = (m(x) - r).to(torch.float64)
                        d = d.movedim(-1, 0) if _channels_last_out(m) else d.movedim(1, 0)
                        d = d.reshape(d.shape[0], -1)
                        tot = d.sum(1) if tot is None else tot + d.sum(1)
                        cnt += d.shape[1]
                    out[(n, name)] = (tot / max(cnt, 1)).to(torch.float32)
            finally:
                m.units = keep
    return out


def _channels_last_out(m) -> bool:
    return not isinstance(m, (nn.Conv1d, nn.Conv2d))      # Linear / Conv1D: channels on the last axis


# ----------------------------------------------------------------------------- the working model

class _Space:
    """A converted deep copy of the model and what each (layer, unit) pair runs as."""

    def __init__(self, model, units, example_input, layers, reference, compensation, calibration, threads,
                 need_products=False):
        from lutcore.torch.convert import approximate
        if not isinstance(model, nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if compensation is None or isinstance(compensation, str):
            comp = () if compensation is None else (compensation,)
        else:
            try:
                comp = tuple(compensation)
            except TypeError:
                raise TypeError(f"compensation: expected None or some of {COMPENSATIONS}, got "
                                f"{type(compensation).__name__} {compensation!r}") from None
        bad = [c for c in comp if c not in COMPENSATIONS]
        if bad:
            raise ValueError(f"compensation: expected None or some of {COMPENSATIONS}, got {bad}")
        self.compensation = comp
        self.threads = threads                           # None: the Ray workers take their host's share
        if need_products and example_input is None:
            raise TypeError("example_input: expected a tensor, a dict of model inputs or an iterable of batches "
                            "(the products are counted on it), got None")
        # each an iterable walked once (a generator too): listed here, used for every pass
        example_input = None if example_input is None else _batches(example_input, "example_input")
        calibration = None if calibration is None else _batches(calibration, "calibration")
        fp = _core.fingerprint                           # (kept as fingerprints: a space goes to Ray workers)
        self.data_fp = {"example_input": None if example_input is None else fp(_fingerprint_data(example_input)),
                        "calibration": None if calibration is None or not comp else
                        fp(_fingerprint_data(calibration))}
        work = copy.deepcopy(model)
        if not _approx_layers(work):
            work = approximate(work, "exact", inplace=True, threads=threads)
        all_layers = _approx_layers(work)
        names = _core.select_layers([n for n, _ in all_layers], layers)
        self.model = work
        self.layers = [(n, m) for n, m in all_layers if n in names]
        cands, ref = _core.candidates_and_reference(units, reference)
        odd = [u for u in cands if not u.plain]
        if comp and odd:
            raise ValueError(f"compensation: {list(comp)} models signed 8 x 8 codes (-127..127); units "
                             f"{odd[0].name!r} have format {odd[0].format}: search without compensation, or "
                             f"with signed 8 x 8 units only")
        self.fixed_units = {n: getattr(m.units, "digest", None) for n, m in all_layers
                            if n not in names}            # the layers not searched keep theirs
        exact = resolve_units("exact")
        for _, m in self.layers:
            m.units = exact
        macs_all = count_products(work, example_input) if example_input is not None else \
            {n: 0 for n, _ in all_layers}                  # sensitivity: no energy figures
        macs = {n: macs_all[n] for n, _ in self.layers}
        if need_products and not sum(macs.values()):
            raise ValueError(f"example_input: the dry run counted no products in the searched layers ({macs}): "
                             f"an empty batch? The energy of an assignment is weighted by these counts; give an "
                             f"input the model runs on")
        self.cand = _core.Candidates(cands, macs, reference=ref)
        # what each layer runs for each candidate name
        self.run_units = {n: dict(self.cand.by_name) for n, _ in self.layers}
        self.bias0 = {n: (None if m.bias is None else m.bias.detach().clone()) for n, m in self.layers}
        self.bias_corr = {}
        if comp:
            data = example_input if calibration is None else calibration
            if "weights" in comp:
                hist = _code_histograms(work, self.layers, data)
                for n, _ in self.layers:
                    self.run_units[n] = {k: (u if u.is_exact else tuned_unit(u, hist[n]))
                                         for k, u in self.cand.by_name.items()}
            if "bias" in comp:
                self.bias_corr = _bias_corrections(work, self.layers, self.run_units, data)
                for n, m in self.layers:
                    if m.bias is None:
                        m.bias = nn.Parameter(torch.zeros(m.weight.shape[1] if not isinstance(
                            m, (nn.Linear, nn.Conv1d, nn.Conv2d)) else m.weight.shape[0]), requires_grad=False)
                        self.bias0[n] = None

    def measured_on(self, model, evaluate, metric_name) -> dict:
        """What the points measure (search.json's ``measured_on``): fingerprints of ``model``'s
        state dict and class, of the example input and the calibration data, the units of the
        layers not searched, the compensation, ``evaluate``'s qualified name, the metric's name."""
        return {"model": _core.fingerprint(f"{type(model).__module__}.{type(model).__qualname__}",
                                           _fingerprint_data(dict(model.state_dict()))),
                **self.data_fp, "compensation": list(self.compensation), "fixed_units": self.fixed_units,
                "evaluate": f"{getattr(evaluate, '__module__', None)}."
                            f"{getattr(evaluate, '__qualname__', type(evaluate).__qualname__)}",
                "metric_name": metric_name}

    def apply(self, assignment: dict):
        """Set every searched layer to its unit (and its bias correction); returns the model."""
        with torch.no_grad():
            for n, m in self.layers:
                name = assignment[n]
                m.units = self.run_units[n][name]
                if self.bias_corr:
                    b0 = self.bias0[n]
                    corr = self.bias_corr[(n, name)]
                    m.bias.copy_((torch.zeros_like(corr) if b0 is None else b0) - corr)
        return self.model


def _evaluator(space, evaluate, workers):
    """(evaluate_many, close): evaluate_many yields each metric as it finishes (the cache
    records it then, so Ctrl-C mid-batch keeps the finished ones)."""
    if not callable(evaluate):
        raise TypeError(f"evaluate: expected a callable evaluate(model) -> float, got {type(evaluate).__name__}")
    if workers is None:
        def many(assignments):
            for a in assignments:
                yield float(evaluate(space.apply(a)))
        return many, (lambda: None)
    return _ray_evaluator(space, evaluate, workers)


def _workers_arg(workers):
    """None (in process) or a positive int (that many Ray actors); not a bool, a float or a str."""
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)):
        raise TypeError(f"workers: expected a positive int (Ray actors) or None (in process), got "
                        f"{type(workers).__name__} {workers!r}")
    if workers < 1:
        raise ValueError(f"workers: expected a positive int (Ray actors) or None (in process), got {workers!r}")
    return int(workers)


def _ray_evaluator(space, evaluate, workers):
    """Evaluations on ``workers`` Ray actors, each holding a copy of the working model: the
    batch's assignment i is a call on actor i % n (an actor runs its calls in order), and each
    metric is yielded as ``Finished(i, metric)`` when it arrives — on Ctrl-C, also every one
    already finished.  Each is computed exactly as in process: same model, same bits.  Without
    ``threads``, the actors on one host share its cores: each runs lutcore's kernels on the
    host's CPUs divided by the actors there (``lutcore.train.dp.share_of_host``)."""
    import ray
    n = _workers_arg(workers)
    started = not ray.is_initialized()
    if started:                  # a local Ray of our own: its workers import what this process imports
        import sys
        path = os.pathsep.join(p for p in [os.getcwd()] + sys.path if p)
        ray.init(num_cpus=max(n, 1), include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})

    @ray.remote(num_cpus=1)
    class _Worker:
        def __init__(self, space, evaluate):
            torch.set_num_threads(1)
            self.space, self.evaluate = space, evaluate

        def run(self, assignment):
            return float(self.evaluate(self.space.apply(assignment)))

        def info(self):
            import socket
            from lutcore.train.dp import _host_cpus
            return {"node": socket.gethostname(), "cpus": _host_cpus()}

        def set_threads(self, t):
            import lutcore
            lutcore.set_num_threads(t)
            return t

    refs = ray.put(space), ray.put(evaluate)
    actors = [_Worker.remote(*refs) for _ in range(n)]
    if getattr(space, "threads", None) is None:           # the host's cores, shared among its actors
        from lutcore.train.dp import _host_cpus, share_of_host
        if started:                                       # our own local Ray: every actor on this host
            shares = [max(1, _host_cpus() // n)] * n
        else:
            shares = share_of_host(ray.get([a.info.remote() for a in actors]))
        for a, t in zip(actors, shares):                  # an actor runs its calls in order: before any run
            a.set_threads.remote(t)

    def many(assignments):
        calls = [actors[i % n].run.remote(a) for i, a in enumerate(assignments)]
        at = {r: i for i, r in enumerate(calls)}
        todo = list(calls)
        try:
            while todo:
                ready, todo = ray.wait(todo, num_returns=1)
                for r in ready:
                    yield _core.Finished(at[r], ray.get(r))
        except KeyboardInterrupt:                 # Ctrl-C: the evaluations finished by now are kept too
            ready, _ = ray.wait(todo, num_returns=len(todo), timeout=0) if todo else ([], [])
            for r in ready:
                try:
                    m = ray.get(r, timeout=0)
                except Exception:                 # a failed one: the interrupt is what is reported
                    continue
                yield _core.Finished(at[r], m)
            raise

    def close():
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()
    return many, close


# ----------------------------------------------------------------------------- public

def sensitivity(model: nn.Module, units, evaluate, example_input=None, *, layers=None, maximize=False,
                reference=None, metric_name="metric", progress=True, out=None, threads=None):
    """The task metric with one layer at a time through each unit, the rest exact.

    ``units``: specs or Units (or a units library); ``evaluate(model) -> float``;
    ``example_input``: when given, the products are counted too (not needed for the table);
    ``layers``: names, prefixes or globs of the layers to probe (default every layer).
    Returns a ``lutcore.search.Sensitivity`` (``format_table()``, ``save(dir)`` writes
    sensitivity.json and the heatmap sensitivity.png)."""
    space = _Space(model, units, example_input, layers, reference, None, None, threads)
    many, close = _evaluator(space, evaluate, None)
    bar = _core.tqdm_bar(progress, 1 + len(space.layers) * len(space.cand.names), "sensitivity")
    try:
        cache = _core._Cache(space.cand, many, progress=bar.update if bar else None)
        res = _core.run_sensitivity(space.cand, many, maximize=maximize, metric_name=metric_name, cache=cache)
    finally:
        close()
        if bar:
            bar.close()
    if out is not None:
        res.save(out)
    return res


def search(model: nn.Module, units, evaluate, example_input, *, budget: int = 200, maximize: bool = False,
           layers=None, reference=None, compensation=None, calibration=None, greedy: bool = True,
           pop_size: int | None = None, seed: int = 0, workers: int | None = None, out=None,
           resume: bool = False, progress=True, metric_name: str = "metric", threads=None):
    """A multi-objective search over per-layer units: minimise the relative multiplier energy
    and ``evaluate(model)`` (lower is better; ``maximize=True`` for an accuracy).

    ``units``: a list of specs / Units or a units library (each with a power figure in its
    ``cost``); ``example_input``: what the products are counted on (a dry run);
    ``layers``: the layers to search (names, prefixes, globs; default all — the rest keep
    the exact unit); ``reference``: the unit energy is relative to (default the exact
    candidate; named by a spec, it is the candidate with that table and its cost);
    ``compensation``: None, "weights", "bias" or both (see the module);
    ``budget``: the most distinct assignments evaluated, the seeds included (every uniform
    assignment, the one-layer sensitivity and a greedy path built from it); ``workers``: None
    (in process) or a positive int, run the evaluations on that many Ray actors; ``out``: a
    directory where search.json is kept current after every batch and front.png drawn at the
    end (Ctrl-C leaves every point evaluated so far there, those of the batch in flight
    included, and the front drawn); ``resume=True`` continues from ``out``'s search.json — a
    ValueError naming the difference when its points were measured on another model, input,
    units or metric (see the module).

    Returns a ``lutcore.search.SearchResult``: ``points`` (each with ``assignment``,
    ``energy``, ``metric``, ``seed``), ``front``, ``save(dir)``, ``model_at(point)`` (the
    working model configured at a point: evaluating it again gives the point's metric bit
    for bit)."""
    a = _core.check_args(budget=budget, maximize=maximize, greedy=greedy, pop_size=pop_size, seed=seed,
                         progress=progress)
    workers = _workers_arg(workers)
    if not callable(evaluate):
        raise TypeError(f"evaluate: expected a callable evaluate(model) -> float, got {type(evaluate).__name__}")
    if not isinstance(metric_name, str):
        raise TypeError(f"metric_name: expected a str, got {type(metric_name).__name__} {metric_name!r}")
    if threads is not None:
        from lutcore._threads import resolve_threads
        resolve_threads(threads)                      # the TypeError / ValueError naming threads
    prior = _core.prior_result(out, resume)
    space = _Space(model, units, example_input, layers, reference, compensation, calibration, threads,
                   need_products=True)
    measured = space.measured_on(model, evaluate, metric_name)
    config = {"metric_name": metric_name, "compensation": list(space.compensation), "measured_on": measured}
    if prior is not None:                             # refused before any worker starts or evaluation runs
        _core.check_resume(prior, _core.measured_on(space.cand, a["maximize"], measured))
    many, close = _evaluator(space, evaluate, workers)
    bar = _core.tqdm_bar(a["progress"], a["budget"], "search", initial=len(prior.points) if prior else 0)
    try:
        res = _core.search_files(space.cand, many, budget=a["budget"], maximize=a["maximize"], greedy=a["greedy"],
                                 pop_size=a["pop_size"], seed=a["seed"], prior=prior, out=out,
                                 progress=bar.update if bar else None, config=config)
    finally:
        close()
        if bar:
            bar.close()
    res._model_at = lambda p: space.apply(p.assignment if hasattr(p, "assignment") else p)
    res._evaluate_at = lambda p: evaluate(res._model_at(p))
    return res
