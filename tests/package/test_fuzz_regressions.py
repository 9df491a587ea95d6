"""Regression tests for what a fuzzer, kill -9 and a full disk found (issue 16).

Each test fails on the code before the fix.  A case that crashed the process
(segfault, libgomp's exit) runs in a subprocess, so a crash is a test failure
and not a dead test run: ``_survives(code)`` runs ``code`` in a fresh
interpreter and requires exit 0 with "OK" printed.  (The Ray items — a stalled
stage, a malformed checkpoint — are in test_pipeline_ray.py; killed saves in
test_crash_safety.py.)
"""
from _paths import ROOT  # noqa: F401
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lutcore
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.ops import scan
from lutcore.train.optim import AdamW
from lutcore.train.trainer import Trainer
from lutcore.units import Units
from reference.quant_ref import qmatmul_ref, quantize_ref
from reference.scan_ref import causal_conv1d_ref

TINY = dict(d_model=8, n_layer=1, vocab_size=256, d_state=4, d_conv=4, expand=2)
TEXT = "the quick brown fox jumps over the lazy dog. " * 12


def _env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _survives(code, **kw):
    """Run ``code`` in a fresh interpreter; it must end normally and print OK."""
    kw.setdefault("env", _env())
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=120, **kw)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stdout[-1500:], r.stderr[-3000:])
    return r


def _small_file_limit(nbytes):
    """For a child: files may grow to ``nbytes`` (a full disk, as the kernel reports a
    file too large: EFBIG rather than SIGXFSZ)."""
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return f


# ---------------------------------------------------------------- crashes

ADAMW_PRELUDE = """
    import numpy as np
    from lutcore.train.optim import AdamW
    def refused(fn, kind, *words):
        try:
            fn()
        except kind as e:
            assert all(w in str(e) for w in words), str(e)
            return
        raise AssertionError("not refused")
"""


def test_adamw_checks_a_rebound_parameter_each_step():
    _survives(ADAMW_PRELUDE + """
    p = {"w": np.ones(4, np.float32), "b": np.ones(3, np.float32)}
    opt = AdamW(p)
    opt.step({"w": np.ones(4, np.float32), "b": np.ones(3, np.float32)})
    p["w"] = np.ones(1 << 20, np.float32)                 # larger than its moments
    refused(lambda: opt.step({"w": np.ones(1 << 20, np.float32)}), ValueError, "params['w']", "moment")
    p["w"] = np.ones(4, np.float64)
    refused(lambda: opt.step({"w": np.ones(4, np.float32)}), TypeError, "params['w']", "float32")
    p["w"] = np.ones(8, np.float32)[::2]                  # strided view
    refused(lambda: opt.step({"w": np.ones(4, np.float32)}), ValueError, "params['w']", "contiguous")
    p["w"] = np.ones(4, np.float16)
    refused(lambda: opt.step({"w": np.ones(4, np.float32)}), TypeError, "params['w']")
    print("OK")
    """)


def test_adamw_refuses_read_only_parameters(tmp_path):
    np.save(tmp_path / "w.npy", np.ones(64, np.float32))
    _survives(ADAMW_PRELUDE + f"""
    mm = np.load({str(tmp_path / "w.npy")!r}, mmap_mode="r")
    opt = AdamW({{"w": mm}})
    refused(lambda: opt.step({{"w": np.ones(64, np.float32)}}), ValueError, "params['w']", "read-only")
    raw = bytes(np.ones(64, np.float32).tobytes())
    opt = AdamW({{"w": np.frombuffer(raw, np.float32)}})
    refused(lambda: opt.step({{"w": np.ones(64, np.float32)}}), ValueError, "params['w']", "read-only")
    assert raw == np.ones(64, np.float32).tobytes()      # immutable bytes stay so
    print("OK")
    """)


def test_trained_model_with_memory_mapped_weights_is_refused_not_written_through(tmp_path):
    m = MambaLM(MambaConfig(**TINY))
    for k, v in m.parameters().items():
        np.save(tmp_path / f"{k}.npy", v)
    _survives(f"""
    import os, numpy as np
    from lutcore.models.mamba import MambaConfig, MambaLM
    from lutcore.train.trainer import Trainer
    d = {str(tmp_path)!r}
    params = {{f[:-4]: np.load(os.path.join(d, f), mmap_mode="r") for f in os.listdir(d)}}
    m = MambaLM(MambaConfig(**{TINY!r}), params=params)
    ro = [k for k, v in m.parameters().items() if not v.flags.writeable]
    try:
        Trainer(m).train({TEXT!r}, seq_len=8, batch_size=2, max_steps=1)
    except ValueError as e:
        assert ro and "read-only" in str(e) and any(k in str(e) for k in ro), str(e)
    else:
        assert not ro                    # the model copied its weights: training them is fine
    print("OK")
    """)


def test_q8_built_by_hand_is_validated():
    _survives("""
    import numpy as np, lutcore
    b = np.ones((64, 4), np.float32)
    good = lutcore.quantize(b, axis=0)
    a = np.ones((3, 64), np.float32)
    cases = [
        (good.q, good.scale[:1], "scale"),                          # too few scale rows
        (good.q, np.ones((9, 4), np.float32), "scale"),             # extra rows
        (good.q[:40], good.scale, "q"),                             # short q
        (good.q.astype(np.int16), good.scale, "q"),                 # wrong dtype
    ]
    for q, s, name in cases:
        try:
            lutcore.qmatmul(a, lutcore.Q8(q, s, 32, 0, (64, 4)))
        except (ValueError, TypeError) as e:
            assert str(e).startswith(name), str(e)
        else:
            raise AssertionError(name)
    try:
        lutcore.Q8(good.q, good.scale, 32, 0, (64, 9))
    except ValueError as e:
        assert "shape" in str(e) or str(e).startswith(("q", "scale")), str(e)
    y = lutcore.qmatmul(a, lutcore.Q8(good.q.copy(), good.scale.copy(), 32, 0, (64, 4)))
    assert np.array_equal(y, lutcore.qmatmul(a, b))
    print("OK")
    """)


def test_threads_beyond_the_cap_are_a_value_error():
    _survives("""
    import numpy as np, lutcore
    from lutcore._threads import MAX_THREADS
    a = np.ones((4, 4), np.int8)
    for t in (4096, MAX_THREADS + 1):
        try:
            lutcore.lut_gemm(a, a, threads=t)
        except ValueError as e:
            assert "threads" in str(e) and str(MAX_THREADS) in str(e), str(e)
        else:
            raise AssertionError(t)
    lutcore.lut_gemm(a, a, threads=MAX_THREADS)                      # the cap itself runs
    print("OK")
    """)


def test_openmp_default_above_the_cap_is_capped():
    _survives("""
    import lutcore
    from lutcore._threads import MAX_THREADS
    assert lutcore.get_num_threads() == MAX_THREADS
    print("OK")
    """, env={**_env(), "OMP_NUM_THREADS": "4096"})


# ---------------------------------------------------------------- lost data

def test_units_save_on_a_full_disk_leaves_nothing(tmp_path):
    d = tmp_path / "units"
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from lutcore.units import approx
        try:
            approx.mitchell().save({str(d)!r})
        except OSError as e:
            assert {str(d)!r} in str(e), str(e)
            print("OK")
        """)], capture_output=True, text=True, env=_env(), timeout=120, preexec_fn=_small_file_limit(1000))
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]
    assert not d.exists()                          # the directory it created went too
    with pytest.raises(FileNotFoundError):
        Units.load(d)                              # not "the exact multiplier"


def test_units_save_on_a_full_disk_keeps_the_previous_tables(tmp_path):
    d = tmp_path / "units"
    from lutcore.units import approx
    approx.mitchell().save(d)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import lutcore
        try:
            lutcore.Units.exact().save({str(d)!r})
        except OSError:
            print("OK")
        """)], capture_output=True, text=True, env=_env(), timeout=120, preexec_fn=_small_file_limit(1000))
    assert "OK" in r.stdout, r.stderr[-2000:]
    assert Units.load(d) == approx.mitchell()
    assert sorted(os.listdir(d)) == ["mul_lut.bin", "relu_lut.bin", "requant_lut.bin"]


@pytest.mark.parametrize("kind", ["dangling", "loop", "directory"])
def test_units_table_that_cannot_be_read_is_an_error(tmp_path, kind):
    d = tmp_path / "u"
    Units.exact().save(d)
    f = d / "mul_lut.bin"
    f.unlink()
    if kind == "dangling":
        os.symlink(d / "nowhere.bin", f)          # inside the directory (one out is refused: test_worksafe)
    elif kind == "loop":
        os.symlink(f, f)
    else:
        f.mkdir()
    with pytest.raises(ValueError, match=r"mul_lut\.bin: cannot read this table"):
        Units.load(d)


def test_cli_train_on_a_full_disk_is_exit_2_naming_the_path(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text(TEXT * 3)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "lutcore.cli", "train", "--data", str(data), "--steps", "1",
                        "--d-model", "8", "--layers", "1", "--d-state", "4", "--seq-len", "8", "--batch-size", "2",
                        "--sample-tokens", "0", "--out", str(out)],
                       capture_output=True, text=True, env=_env(), timeout=300,
                       preexec_fn=_small_file_limit(4096))
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr and "SafetensorError" not in r.stderr
    assert "cannot save into" in r.stderr and str(out) in r.stderr


def test_every_save_maps_write_failures_to_one_oserror(tmp_path, monkeypatch):
    from safetensors import SafetensorError
    import safetensors.numpy as stn

    def full(*a, **k):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(stn, "save_file", full)
    m = MambaLM(MambaConfig(**TINY))
    for save, where in ((m.save_pretrained, tmp_path / "hf"), (Trainer(m).save_checkpoint, tmp_path / "ck")):
        with pytest.raises(OSError, match="cannot save into .*No space left"):
            save(where)
        assert not where.exists()


# ---------------------------------------------------------------- silent wrong answers

@pytest.mark.parametrize("bsz,view", [(1, 0), (1, 2), (1, -1), (3, "flat")])
def test_conv1d_step_with_x_t_aliasing_the_state(rng, bsz, view):
    K, D = 4, 5
    w = rng.standard_normal((D, K)).astype(np.float32)
    b = rng.standard_normal(D).astype(np.float32)
    state = rng.standard_normal((bsz, K - 1, D)).astype(np.float32)
    # x_t a contiguous view of the state: one batch's row, or rows across batches
    x_view = state.reshape(bsz * (K - 1), D)[:bsz] if view == "flat" else state[:, view]
    assert x_view.flags.c_contiguous and np.shares_memory(x_view, state)
    ref_state, x_t = state.copy(), x_view.copy()
    want = causal_conv1d_ref(np.concatenate([ref_state, x_t[:, None]], axis=1), w, b)[:, -1]
    want_state = np.concatenate([ref_state[:, 1:], x_t[:, None]], axis=1)
    y = scan.causal_conv1d_step(x_view, state, w, b)
    assert np.allclose(y, want, rtol=1e-5, atol=1e-6)
    assert np.array_equal(state, want_state)


def test_scaled_gradient_overflow_is_a_skipped_step():
    p = {"w": np.ones(3, np.float32)}
    opt = AdamW(p, lr=0.1)
    info = opt.step({"w": np.full(3, 1e30, np.float32)}, grad_scale=1e20)
    assert info["skipped"] and opt.skipped == 1 and opt.t == 0
    assert np.array_equal(p["w"], np.ones(3, np.float32))
    assert all(np.isfinite(v).all() for v in list(opt.m.values()) + list(opt.v.values()))
    opt.step({"w": np.ones(3, np.float32)})                    # and the parameter moves again
    assert np.isfinite(p["w"]).all() and not np.array_equal(p["w"], np.ones(3, np.float32))
    # g = 2e19 does not overflow m, but g**2 overflows v: skipped too
    assert opt.step({"w": np.full(3, 2e19, np.float32)})["skipped"]
    assert np.isfinite(opt.v["w"]).all()
    # a large gradient that stays finite is taken
    assert not opt.step({"w": np.full(3, 1e18, np.float32)})["skipped"]


@pytest.mark.parametrize("bad", ["no", 1, 0.0, None])
def test_scan_flags_are_booleans(rng, bad):
    u = rng.standard_normal((1, 3, 2)).astype(np.float32)
    A = -np.ones((2, 2), np.float32)
    B = C = rng.standard_normal((1, 3, 2)).astype(np.float32)
    with pytest.raises(TypeError, match="delta_softplus: expected True or False"):
        scan.selective_scan(u, u, A, B, C, delta_softplus=bad)
    with pytest.raises(TypeError, match="return_last_state"):
        scan.selective_scan(u, u, A, B, C, return_last_state=bad)
    y = scan.selective_scan(u, u, A, B, C, delta_softplus=np.bool_(False))
    assert np.array_equal(y, scan.selective_scan(u, u, A, B, C, delta_softplus=False))


def _checkpoint(tmp_path):
    tr = Trainer(MambaLM(MambaConfig(**TINY)))
    tr.train(TEXT, seq_len=8, batch_size=2, max_steps=2)
    d = tmp_path / "ck"
    tr.save_checkpoint(d)
    return d


def _edit(d, fn):
    f = d / "trainer.json"
    meta = json.loads(f.read_text())
    fn(meta)
    f.write_text(json.dumps(meta))


CORRUPT = [
    ("position.batch", lambda m: m["position"].update(batch=-3)),
    ("position.epoch", lambda m: m["position"].update(epoch="1")),
    ("optimizer", lambda m: m["optimizer"].pop("betas")),
    ("optimizer", lambda m: m.update(optimizer=3)),
    ("optimizer", lambda m: m["optimizer"].update(betas=[0.9])),
    ("files", lambda m: m.update(files=[1])),
    ("files.model.safetensors", lambda m: m["files"].update({"model.safetensors": 3})),
    ("model_config", lambda m: m.update(model_config=[1, 2])),
    ("model_config", lambda m: m["model_config"].update(d_modl=3)),
    ("dtype", lambda m: m.update(dtype="float99")),
    ("global_step", lambda m: m.update(global_step=-1)),
    ("history", lambda m: m.update(history={"a": 1})),
    ("scaler", lambda m: m.update(scaler=[1])),
    ("tokenizer", lambda m: m.update(tokenizer="bytes")),
    ("tokenizer", lambda m: m.update(tokenizer={"kind": "nope"})),
    ("unit_backward", lambda m: m.update(unit_backward="no")),
    ("model_class", lambda m: m.update(model_class=["MambaLM"])),
]


@pytest.mark.parametrize("field,edit", CORRUPT, ids=[f"{c[0]}-{i}" for i, c in enumerate(CORRUPT)])
def test_corrupt_trainer_json_names_the_file_and_field(tmp_path, field, edit):
    d = _checkpoint(tmp_path)
    _edit(d, edit)
    with pytest.raises(ValueError) as e:
        Trainer.resume(d)
    msg = str(e.value)
    assert "trainer.json" in msg and field in msg, msg


# ---------------------------------------------------------------- unclear errors: memory sized by the data

def test_scan_chunk_larger_than_the_sequence(rng):
    u = rng.standard_normal((1, 2, 3)).astype(np.float32)
    A = -np.abs(rng.standard_normal((3, 4))).astype(np.float32)
    B = rng.standard_normal((1, 2, 4)).astype(np.float32)
    y, _, ctx = scan.selective_scan_forward(u, u, A, B, B, chunk=2 ** 30)
    y0, _, ctx0 = scan.selective_scan_forward(u, u, A, B, B)
    assert np.array_equal(y, y0) and ctx.chunk == 2
    g = scan.selective_scan_backward(np.ones_like(u), ctx=ctx)            # was ~2.7 TB of scratch per thread
    g0 = scan.selective_scan_backward(np.ones_like(u), ctx=ctx0)
    assert all(np.array_equal(g[k], g0[k]) for k in g0)


def test_quantize_padding_beyond_memory_is_refused_up_front():
    x = np.ones((100000, 1), np.float32)
    with pytest.raises(ValueError, match=r"block=1048576 .* needs 97\.\d GiB"):
        lutcore.quantize(x, block=2 ** 20)


def test_qmatmul_block_longer_than_k_is_sized_by_k(rng):
    a = rng.standard_normal((50000, 1)).astype(np.float32)
    b = rng.standard_normal((1, 3)).astype(np.float32)
    y = lutcore.qmatmul(a, b, block=131071)                   # was 33 s, then 12 GiB asked
    R = 20                                                      # the padded oracle on a few rows
    qa, sa = quantize_ref(a[:R], 131071)
    qb, sb = quantize_ref(b.T, 131071)
    assert qa.shape == (R, 131071)                              # the contract's padding
    want = qmatmul_ref(qa, sa, qb.T, sb.T, Units.exact().mul, 131071)
    assert np.array_equal(y[:R], want)
    assert np.array_equal(y, lutcore.qmatmul(a, b, block=1))   # one block either way


@pytest.mark.parametrize("call", [
    lambda: MambaLM(MambaConfig(**TINY), unit_backward="no"),
    lambda: MambaLM(MambaConfig(**TINY), checkpoint_activations="no"),
    lambda: Trainer(MambaLM(MambaConfig(**TINY))).train(TEXT, seq_len=8, batch_size=2, max_steps=1, wsla="no"),
    lambda: Trainer(MambaLM(MambaConfig(**TINY))).train(TEXT, seq_len=8, batch_size=2, max_steps=1,
                                                       mixed_precision=1),
    lambda: ops_matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), out=np.zeros((2, 2), np.float32),
                       accumulate="no"),
], ids=["unit_backward", "checkpoint_activations", "wsla", "mixed_precision", "accumulate"])
def test_boolean_options_are_booleans(call):
    with pytest.raises(TypeError, match="expected True or False"):
        call()


def ops_matmul(*a, **k):
    from lutcore.ops import matmul
    return matmul(*a, **k)


def test_a_failed_save_state_keeps_the_previous_file(tmp_path, monkeypatch):
    from safetensors import SafetensorError
    import safetensors.numpy as stn
    m = MambaLM(MambaConfig(**TINY))
    _, state = m.step(np.array([3]), None)
    f = tmp_path / "state.safetensors"
    m.save_state(state, f)
    before = f.read_bytes()
    _, state2 = m.step(np.array([4]), state)

    def full(tensors, fname, *a, **k):
        open(fname, "wb").write(b"partial")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(stn, "save_file", full)
    with pytest.raises(OSError, match="cannot save into .*state.safetensors"):
        m.save_state(state2, f)
    assert f.read_bytes() == before and os.listdir(tmp_path) == ["state.safetensors"]
    monkeypatch.undo()
    got = m.load_state(f)
    assert all(np.array_equal(a, b) for (c1, h1), (c2, h2) in zip(got, state) for a, b in ((c1, c2), (h1, h2)))
