"""The Ray transport: one actor per stage, bits equal to the local pipeline.

Few and cheap (Ray start-up is slow): one module-scoped ``ray.init(num_cpus=2)``
(a real local cluster, no local mode), shut down at the end.

* logits and tokens over Ray are bit-identical to the local pipeline — float32
  (llama-style, 3 stages) and through the exact units (gpt2-style, 2 stages);
  each actor loaded exactly its own stage's tensors;
* a corrupted hop (checksum, dtype) is refused on arrival, naming the stages;
* an actor killed mid-generation raises StageFailure naming the stage; a
  rebuilt pipeline resumes from the tokens so far with identical output.
"""
import os
import sys
import threading

import numpy as np
import pytest

import ray

from lutcore.pipeline import HopChecksumError, Pipeline, StageFailure, stage_tensor_names  # noqa: E402
from lutcore.pipeline._ray import _hop  # noqa: E402

from test_pipeline_models import hf_model, save  # noqa: E402
from reference.asserts import bits_equal

PROMPT = [5, 11, 42, 7]
N_NEW = 8


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return {k: str(save(hf_model(k), tmp_path_factory.mktemp(k))) for k in ("llama", "gpt2")}


@pytest.mark.parametrize("arch,splits,units", [("llama", [2, 2, 2], None), ("gpt2", [3, 3], "exact")])
def test_ray_bits_equal_local(cluster, ckpt, arch, splits, units):
    with Pipeline.from_pretrained(ckpt[arch], splits=splits, units=units) as loc:
        want_tokens = loc.generate(PROMPT, N_NEW)
        want_logits = loc.logits(want_tokens)
    with Pipeline.from_pretrained(ckpt[arch], splits=splits, units=units, transport="ray") as p:
        assert p.transport == "ray" and p.stages is None                     # the driver holds no stage
        got = p.generate(PROMPT, N_NEW)
        assert got.tolist() == want_tokens.tolist()
        assert bits_equal(p.logits(got), want_logits), "Ray changed logit bits"
        info = p._ring.info()
        assert len({i["pid"] for i in info}) == len(splits)                 # one process per stage
        for plan, i in zip(p.plans, info):
            assert i["tensors"] == sorted(stage_tensor_names(p.spec, plan)), f"stage {plan.index} holds others"
            assert i["nice"] == 0 or not i["reniced"], "a stage that may run at nice 0 does not"
        # the stages take turns: each runs its host's CPUs unless told otherwise, and says so
        from lutcore._threads import host_cpus
        assert [i["threads"] for i in info] == [host_cpus()] * len(splits)
        text = p.describe()
        for i in info:
            assert f"stage {i['index']}: pid {i['pid']}, {i['threads']} threads" in text


def test_ray_hop_checksum_is_checked_on_arrival(cluster, ckpt):
    with Pipeline.from_pretrained(ckpt["llama"], splits=[3, 3], transport="ray") as p:
        a1 = p._ring.actors[1]
        x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
        good = _hop(x, 0)
        assert ray.get(a1.run.remote(good, False)).__len__() == 3
        bad = (x, good[1] ^ 1, 0)
        with pytest.raises(HopChecksumError, match="stage 1: hidden state from stage 0 failed its checksum"):
            ray.get(a1.run.remote(bad, False))
        with pytest.raises(HopChecksumError, match="checksum"):             # through the ring's error mapping
            p._ring._call(lambda: a1.run.remote(bad, False), "test")
        with pytest.raises(HopChecksumError, match="not float32"):
            ray.get(a1.run.remote((x.astype(np.float64), good[1], 0), False))
        flipped = x.copy()
        flipped.view(np.uint32)[0, 0] ^= 1                                   # one bit
        with pytest.raises(HopChecksumError):
            ray.get(a1.run.remote((flipped, good[1], 0), False))
        assert p.generate(PROMPT, 2).size == 6                               # the actor is still fine


def test_ray_dead_actor_names_its_stage_and_the_run_resumes(cluster, ckpt):
    with Pipeline.from_pretrained(ckpt["llama"], splits=[2, 2, 2]) as loc:
        want = loc.generate(PROMPT, N_NEW).tolist()
    p = Pipeline.from_pretrained(ckpt["llama"], splits=[2, 2, 2], transport="ray")

    def kill_stage_1(n, tok):
        if n == len(PROMPT) + 2:                                             # after the third new token
            ray.kill(p._ring.actors[1])

    with pytest.raises(StageFailure, match=r"stage 1 \(stage1\): layers 2\.\.3 died") as e:
        p.generate(PROMPT, N_NEW, on_token=kill_stage_1)
    p.close()
    err = e.value
    assert err.stage == 1 and err.plan.lo == 2 and err.prompt_len == len(PROMPT)
    assert err.tokens.tolist() == want[:len(PROMPT) + 3]
    with Pipeline.from_pretrained(ckpt["llama"], splits=[2, 2, 2], transport="ray") as p2:
        done = len(err.tokens) - err.prompt_len
        out = p2.generate(err.tokens, N_NEW - done, prompt_len=err.prompt_len)
    assert out.tolist() == want


def test_cli_generate_over_ray(cluster, ckpt, capsys):
    from lutcore.cli import main
    from lutcore.tokenizer import Tokenizer
    assert main(["generate", "--model", ckpt["gpt2"], "--prompt", "Hi there", "--stages", "2", "--ray",
                 "--max-new-tokens", "5", "--tokenizer", "bytes"]) == 0
    out = capsys.readouterr()
    assert "transport: ray" in out.err
    tok = Tokenizer.bytes()
    with Pipeline.from_pretrained(ckpt["gpt2"], splits=[3, 3]) as p:
        want = tok.decode(p.generate(tok.encode("Hi there"), 5, stop_ids=0))
    assert out.out == want + "\n"


def test_ray_bad_input_keeps_its_type_and_names_the_stage(cluster, ckpt):
    with Pipeline.from_pretrained(ckpt["gpt2"], splits=[3, 3], transport="ray") as p:
        with pytest.raises(ValueError, match="stage 0: .*learned positions"):
            p.generate(np.zeros(60, np.int64), 8)                            # gpt2 has 64 positions
        assert p.logits(PROMPT).shape == (4, 128)
        assert p.logits(np.zeros(65, np.int64)).shape == (65, 128)          # longer text is windowed


def test_ray_compiled_graph_bits_errors_and_death(cluster, ckpt):
    """compile_after=2: the first passes go as plain actor calls, the rest through a Ray
    compiled graph — same tokens as local, bad input still named, a killed actor still
    raises StageFailure naming its stage, and a plain call (info) tears the graph down."""
    with Pipeline.from_pretrained(ckpt["llama"], splits=[2, 2, 2]) as loc:
        want = loc.generate(PROMPT, N_NEW).tolist()
        want_logits = loc.logits(want)
    p = Pipeline.from_pretrained(ckpt["llama"], splits=[2, 2, 2], transport="ray", compile_after=2,
                                 decode_chunk=3)
    try:
        assert p.generate(PROMPT, N_NEW).tolist() == want
        assert p._ring._graph is not None                                    # compiled by now
        lengths = list(range(1, len(want) + 1)) * 2                          # more than the channel's buffers
        kept = [p.logits(want[:k]) for k in lengths]                          # results held by the caller
        assert all(k.flags.writeable and k.shape == (n, want_logits.shape[1]) for n, k in zip(lengths, kept))
        assert bits_equal(p.logits(want), want_logits)
        with pytest.raises(ValueError, match="stage 0: ids"):               # past the driver's checks
            p._ring.forward(np.array([10 ** 6], np.int64), 0, False, False)
        assert p.generate(PROMPT, 2).tolist() == want[:len(PROMPT) + 2]      # the graph survives
        info = p._ring.info()
        assert p._ring._graph is None and len(info) == 3                     # plain calls drop it
        assert p.generate(PROMPT, N_NEW).tolist() == want                    # and it comes back

        def kill_stage_2(n, tok):
            if n == len(PROMPT) + 1:
                ray.kill(p._ring.actors[2])

        # token 4 comes from the prefill, 5..7 from one graph execution (decode_chunk=3):
        # on_token hears of 5 after that chunk, so the next chunk meets the dead actor
        with pytest.raises(StageFailure, match=r"stage 2 \(stage2\): layers 4\.\.5 died") as e:
            p.generate(PROMPT, N_NEW, on_token=kill_stage_2)
        assert e.value.stage == 2 and e.value.tokens.tolist() == want[:len(PROMPT) + 4]
    finally:
        p.close()
    with pytest.raises(ValueError, match="compile_after"):
        Pipeline.from_pretrained(ckpt["llama"], splits=[3, 3], transport="ray", compile_after=-1)
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="decode_chunk"):
            Pipeline.from_pretrained(ckpt["llama"], splits=[3, 3], transport="ray", decode_chunk=bad)


@pytest.mark.parametrize("chunk", [1, 3])
def test_ray_decode_chunks_sample_and_stop_as_the_driver_does(cluster, ckpt, chunk):
    """Decoding through the compiled graph (stage 0 picks each token and feeds it back):
    the same tokens as the local pipeline for greedy, for seeded draws with top-k/top-p,
    with a stop id met mid-chunk, and for budgets that are not multiples of the chunk."""
    runs = [dict(), dict(temperature=0.9, top_k=20, seed=3), dict(temperature=1.3, top_p=0.8, seed=11)]
    with Pipeline.from_pretrained(ckpt["gpt2"], splits=[3, 3]) as loc:
        want = [loc.generate(PROMPT, 7, **kw).tolist() for kw in runs]
        stop = want[1][len(PROMPT) + 2]                                       # met at the third new token
        want_stop = loc.generate(PROMPT, 7, stop_ids=[stop], **runs[1]).tolist()
    assert len(want_stop) < len(want[1])
    heard = []
    with Pipeline.from_pretrained(ckpt["gpt2"], splits=[3, 3], transport="ray", compile_after=0,
                                  decode_chunk=chunk) as p:
        for kw, w in zip(runs, want):
            assert p.generate(PROMPT, 7, **kw).tolist() == w, kw
        assert p._ring._graph is not None
        got = p.generate(PROMPT, 7, stop_ids=[stop], on_token=lambda n, t: heard.append((n, t)), **runs[1])
        assert got.tolist() == want_stop
        assert heard == [(n, want_stop[n]) for n in range(len(PROMPT), len(want_stop))]
        assert p.generate(PROMPT, 1).tolist() == want[0][:len(PROMPT) + 1]

def test_ray_stalled_stage_is_named_within_call_timeout(cluster, ckpt):
    """A stage that stops answering (SIGSTOP) — inside a compiled graph, whose teardown
    waits for it, and on plain calls — gives StageFailure naming it within about
    call_timeout (plus a few seconds of pings), not a hang."""
    import signal
    import time
    for compile_after in (1, None):
        # start-up (actors import lutcore and load weights) and the first generate (which
        # compiles the graph) may take longer than a decode call on a loaded machine: the
        # 3 s budget applies once the pipeline has run
        p = Pipeline.from_pretrained(ckpt["llama"], splits=[3, 3], transport="ray", compile_after=compile_after,
                                     call_timeout=120, decode_chunk=2)
        pid = None
        try:
            pid = p._ring.info()[1]["pid"]
            assert p.generate(PROMPT, 3).size == len(PROMPT) + 3
            assert (p._ring._graph is not None) == (compile_after is not None)
            p._ring.call_timeout = 3
            os.kill(pid, signal.SIGSTOP)
            t0 = time.monotonic()
            with pytest.raises(StageFailure, match=r"no answer within 3 s \(stage 1 .*does not answer\)") as e:
                p.generate(PROMPT, 4)
            took = time.monotonic() - t0
            assert e.value.stage == 1 and took < 20, (compile_after, took)
        finally:
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            p.close()


def test_ray_malformed_checkpoint_carries_the_stage_error(cluster, ckpt, tmp_path):
    """A stage that cannot load its weights (a truncated model.safetensors) dies in its
    creation task: StageFailure carries the stage's own message, the file named."""
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(ckpt["llama"], bad)
    f = bad / "model.safetensors"
    f.write_bytes(f.read_bytes()[:5000])
    with pytest.raises(ValueError, match="model.safetensors"):
        Pipeline.from_pretrained(str(bad), splits=[3, 3])                      # local transport names it
    with pytest.raises(StageFailure, match=r"died: ValueError: .*model\.safetensors.*not a readable safetensors"):
        Pipeline.from_pretrained(str(bad), splits=[3, 3], transport="ray")


def test_driver_waits_on_a_low_priority_thread_and_gets_its_errors():
    """The driver's compiled-graph calls (execute and read) run on a helper thread at nice
    19 (Ray's reader polls while the stages compute); the caller blocks, errors reach it
    unchanged, and it waits no longer than the call's deadline (plus a second), even
    where Ray's wait does not return.  (Per-thread nice values, and so the priority
    check, are Linux's.)"""
    import time
    from lutcore.pipeline._ray import _Stuck, _Waiter

    release = threading.Event()

    class FakeRay:
        def get(self, refs, timeout=None):
            if refs == "boom":
                raise ValueError("boom")
            if refs == "hang":                      # a Ray wait that ignores its timeout
                release.wait(30)
            return refs, timeout, threading.get_native_id()

    w = _Waiter(FakeRay())
    try:
        refs, timeout, tid = w.get(lambda: "x", time.monotonic() + 5)
        assert refs == "x" and 4 < timeout <= 5 and tid != threading.get_native_id()
        if sys.platform.startswith("linux"):
            assert os.getpriority(os.PRIO_PROCESS, tid) == 19
        with pytest.raises(ValueError, match="boom"):
            w.get(lambda: "boom", None)
        assert w.get(lambda: "y", None)[:2] == ("y", -1)                     # still serving; no limit
        with pytest.raises(ZeroDivisionError):                              # make_refs runs there too
            w.get(lambda: 1 / 0, None)
        t0 = time.monotonic()
        with pytest.raises(_Stuck):
            w.get(lambda: "hang", time.monotonic() + 0.5)
        assert time.monotonic() - t0 < 0.5 + w.GRACE + 1 and w.stuck
    finally:
        release.set()
        w.close()


def _workers(stages):
    """Stage actors' bodies over local stages, in this process (no Ray, no priorities)."""
    from lutcore.pipeline._ray import _StageWorker
    out = []
    for st in stages:
        w = object.__new__(_StageWorker)
        w.renice, w.index, w.stage, w.cache, w.result = False, st.plan.index, st, None, None
        out.append(w)
    return out


@pytest.mark.parametrize("chunk", [1, 2, 4])
def test_unrolled_graph_protocol_in_process(ckpt, chunk):
    """The compiled graph's steps run in the graph's order by plain calls: reset, a pass,
    decode chunks with budgets, a stop id and non-finite logits met mid-chunk."""
    from lutcore.pipeline._ray import graph_chain
    greedy = (0.0, None, None, None)
    with Pipeline.from_pretrained(ckpt["llama"], splits=[2, 2, 2]) as loc:
        want = loc.generate(PROMPT, N_NEW).tolist()
        want_logits = loc.logits(PROMPT)
        ws = _workers(loc.stages)

        def run(msg):
            return graph_chain(ws, chunk, msg, lambda w, step, x: getattr(w, step)(x))

        assert run(("reset",)) is None and all(w.cache is not None for w in ws)
        assert bits_equal(run(("pass", np.array(PROMPT, np.int64), 0, False, False)), want_logits)
        run(("reset",))
        first = run(("pass", np.array(PROMPT, np.int64), 0, True, True))
        assert bits_equal(first, want_logits[-1:])
        toks = [int(np.argmax(first[-1]))]
        while len(toks) < N_NEW:
            budget = N_NEW - len(toks)
            new, bad = run(("step", toks[-1], len(PROMPT) + len(toks) - 1, budget, greedy, frozenset()))
            assert not bad and len(new) == min(chunk, budget)
            toks += new
        assert PROMPT + toks == want
        # a stop id met in the chunk ends it there
        run(("reset",))
        run(("pass", np.array(want[:5], np.int64), 0, True, True))
        new, bad = run(("step", want[5], 5, 8, greedy, frozenset({want[6]})))
        assert (new, bad) == ([want[6]], False)
        # non-finite logits at the second pick: the first token stands, the chunk says so
        if chunk >= 2:
            run(("reset",))
            run(("pass", np.array(want[:5], np.int64), 0, True, True))
            real, calls = ws[0].last, []

            def poisoned(hop, last_only):
                calls.append(1)
                out = real(hop, last_only)
                return out * np.float32(np.nan) if len(calls) == 2 else out
            ws[0].last = poisoned
            assert run(("step", want[5], 5, 8, greedy, frozenset())) == ([want[6]], True)


def test_non_finite_logits_from_a_decode_chunk_raise_after_its_tokens(ckpt):
    """Pipeline.generate with a ring whose chunk ends on non-finite logits: the tokens
    before them are emitted, then the position is named."""
    with Pipeline.from_pretrained(ckpt["llama"], splits=[3, 3]) as p:
        want = p.generate(PROMPT, 4).tolist()
        ring = p._ring

        def decode(tok, pos, budget, sampling, stop):
            return [want[pos + 1]], pos + 1 == len(PROMPT) + 1
        ring.decode = decode
        heard = []
        with pytest.raises(ValueError, match=f"non-finite values predicting position {len(PROMPT) + 2}"):
            p.generate(PROMPT, 4, on_token=lambda n, t: heard.append(t))
        assert heard == want[len(PROMPT):len(PROMPT) + 2]
