"""Circuits in, damage table out (issue 19): the two speeds the issue names.

    group                                          lutcore                          peers
    units from a gate-level 8x8 multiplier         from_verilog (Yosys + netlist    from_c on the C model of the
      (tests/circuits/array_mul.v)                 evaluation, after Yosys's first  same circuit (system compiler);
                                                   run); eval_netlist alone         a per-pair Python simulation of
                                                   (65,536 pairs, bit-parallel)     the netlist (1/64 of the pairs,
                                                                                    † throughput ratio)
    eval 4 units <model> <T> tokens                evaluate_units: none, exact,     transformers: the float forward
                                                   mitchell, truncated:6            and loss over the same windows

Model: a random-init 2-layer, 64-wide LlamaForCausalLM (4 heads / 2 KV heads,
SwiGLU 128, vocab 512, 512 positions), save_pretrained to a temporary directory;
T = 10,240 tokens (windows of 512).  Validation first: every circuit path gives the
exact table; the float row equals transformers' loss within 1e-4 relative.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from lutbench import SLOW, THREADS, dim, need_module, torch

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "circuits")
ARRAY_V, ARRAY_C = os.path.join(HERE, "array_mul.v"), os.path.join(HERE, "array_mul.c")
CIRCUIT = pytest.mark.benchmark(group="units from a gate-level 8x8 multiplier (array_mul.v)")
TOKENS, VOCAB = dim(10240), 512
EVAL_SHAPE = f"llama h64xL2 {TOKENS} tokens"
EVAL = pytest.mark.benchmark(group=f"eval 4 units {EVAL_SHAPE}")
SPECS = ["none", "exact", "mitchell", "truncated:6"]


@pytest.fixture(scope="module")
def netlist():
    from lutcore.units import hdl
    hdl.from_verilog(ARRAY_V)                   # Yosys's first run (WebAssembly compile) is not timed
    return hdl.synthesise(ARRAY_V)[1]


def _exact():
    import lutcore
    return lutcore.Units.exact().mul


@CIRCUIT
def test_from_verilog(benchmark, record):
    from lutcore.units import hdl
    hdl.from_verilog(ARRAY_V)

    def run():
        hdl._cache.clear()
        return hdl.from_verilog(ARRAY_V)
    u = run()
    assert np.array_equal(u.mul, _exact())
    record("from_verilog", "8x8 array", "lutcore from_verilog", threads=1, rows=65536)
    benchmark.pedantic(run, **SLOW)


@CIRCUIT
def test_eval_netlist(benchmark, record, netlist):
    from lutcore.units import hdl
    v, _ = hdl.eval_netlist(netlist)
    assert np.array_equal(v.astype(np.int16), _exact())
    record("eval_netlist", "8x8 array", f"lutcore eval_netlist ({len(netlist['cells'])} gates)", threads=1,
           rows=65536)
    benchmark(hdl.eval_netlist, netlist)


@CIRCUIT
def test_from_c_peer(benchmark, record):
    import lutcore
    assert np.array_equal(lutcore.Units.from_c(ARRAY_C, "mul8_exact").mul, _exact())
    record("from_c", "8x8 array", "from_c (C model, cc)", threads=1, rows=65536)
    benchmark.pedantic(lutcore.Units.from_c, args=(ARRAY_C, "mul8_exact"), **SLOW)


@CIRCUIT
def test_per_pair_simulation_peer(benchmark, record, netlist):
    """The netlist simulated one pair at a time in Python, on 1,024 of the 65,536 pairs."""
    from lutcore.units.hdl import _GATES
    ports, cells = netlist["ports"], list(netlist["cells"].values())
    order, known = [], set(ports["a"]["bits"] + ports["b"]["bits"] + ["0", "1"])
    todo = [c for c in cells if c["type"] in _GATES]
    while todo:                                  # topological order, once
        rest = []
        for c in todo:
            ins = [c["connections"][p][0] for p in _GATES[c["type"]][0]]
            (order if all(b in known for b in ins) else rest).append(c)
            if all(b in known for b in ins):
                known.add(c["connections"]["Y"][0])
        todo = rest
    prog = [([c["connections"][p][0] for p in _GATES[c["type"]][0]], c["connections"]["Y"][0],
             _GATES[c["type"]][1]) for c in order]

    def sim(n=1024):
        out = []
        for i in range(0, 65536, 65536 // n):
            val = {"0": 0, "1": 1}
            for j, bit in enumerate(ports["b"]["bits"]):
                val[bit] = (i >> j) & 1
            for j, bit in enumerate(ports["a"]["bits"]):
                val[bit] = (i >> (8 + j)) & 1
            for args, y, fn in prog:
                val[y] = fn(*[val[b] for b in args]) & 1
            p = sum(val[b] << j for j, b in enumerate(ports["p"]["bits"]))
            out.append(p - 65536 if p >= 32768 else p)
        return np.array(out)
    assert np.array_equal(sim(), _exact()[::64])
    record("per-pair simulation", "8x8 array", "Python per-pair simulation (1/64 of the pairs)", threads=1,
           rows=1024)
    benchmark.pedantic(sim, **SLOW)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    tf = need_module("transformers")
    cfg = tf.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=512)
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(cfg).eval()
    path = tmp_path_factory.mktemp("llama")
    model.save_pretrained(path)
    ids = np.random.default_rng(0).integers(0, VOCAB, TOKENS + 1)
    return str(path), model, ids


@EVAL
def test_evaluate_units(benchmark, record, llama):
    from lutcore.evaluate import evaluate_units
    path, model, ids = llama
    res = evaluate_units(path, ids, units=SPECS, threads=THREADS)
    assert [r["units"] for r in res.rows] == SPECS and res.config["tokens"] == TOKENS
    record("evaluate_units", EVAL_SHAPE, "lutcore eval (4 units)", tokens=4 * TOKENS)
    benchmark.pedantic(evaluate_units, args=(path, ids), kwargs=dict(units=SPECS, threads=THREADS), **SLOW)


@EVAL
def test_transformers_float_peer(benchmark, record, llama):
    from lutcore.evaluate import evaluate_units
    path, model, ids = llama
    torch.set_num_threads(THREADS)
    L = 512
    n = TOKENS // L
    x = torch.from_numpy(np.stack([ids[w * L: w * L + L] for w in range(n)]))
    y = torch.from_numpy(np.stack([ids[w * L + 1: w * L + L + 1] for w in range(n)]))

    def run():
        with torch.no_grad():
            lg = model(x).logits
            return float(model.loss_function(logits=lg, labels=None, vocab_size=VOCAB, shift_labels=y))
    want = evaluate_units(path, ids, units=["none"], threads=THREADS).rows[0]["loss"]
    assert abs(run() - want) <= 1e-4 * want
    record("evaluate_units", EVAL_SHAPE, "transformers float (1 unit)", tokens=TOKENS)
    benchmark.pedantic(run, **SLOW)
