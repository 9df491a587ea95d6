"""Work must not be thrown away; loaders stay inside their directory (issue 24).

* ``lutcore eval`` / ``train --out PATH``: PATH is checked (creatable, writable, not a
  file, not under a file, not /proc) before any work: exit 2 with a message naming --out.
* Ctrl-C (SIGINT) during ``lutcore eval``: the rows finished so far are written
  atomically (eval.json ``"partial": true`` with the ``remaining`` specs), one line says
  so, exit 130, no traceback.  During ``lutcore train``: a checkpoint of the last whole
  step is saved and resumes to the same weights as a run that was never interrupted.
  The signal cases run the CLI in a child process whose stderr is a pseudo-terminal (the
  live progress bar shows when the work is under way) and send it SIGINT.
* ``lutcore._io.contained``: a sharded index's weight_map entry outside the checkpoint
  directory (``../elsewhere/x.safetensors``, an absolute path) is refused by every loader,
  a ValueError naming the entry; a symlink in a units or checkpoint directory is followed
  only when it resolves inside the directory (a Hugging Face hub cache snapshot's links
  into its blobs/ excepted).
"""
from _paths import ROOT  # noqa: F401
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import warnings

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import lutcore
from lutcore.cli import main
from lutcore.evaluate import EvalInterrupted, evaluate_units, write_report
from lutcore.train.data import builtin_corpus

TEXT = builtin_corpus()[:200_000].encode("ascii", "ignore").decode()
TINY = ["--d-model", "16", "--layers", "1", "--d-state", "4", "--seq-len", "32", "--batch-size", "2",
        "--sample-tokens", "0", "--eval-units", "none", "--threads", "1"]


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    p = tmp_path_factory.mktemp("data") / "train.txt"
    p.write_text(TEXT, encoding="utf-8")
    return str(p)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, data):
    out = tmp_path_factory.mktemp("run")
    assert main(["train", "--data", data, "--steps", "3", "--out", str(out), *TINY]) == 0
    return str(out / "checkpoint")


# ------------------------------------------------------------------ --out before any work
@pytest.mark.parametrize("kind", ["file", "under_file", "proc_missing", "proc_dir"])
def test_eval_out_is_checked_before_any_work(tmp_path, ckpt, data, monkeypatch, capsys, kind):
    import lutcore.evaluate as ev
    f = tmp_path / "a_file"
    f.write_text("x")
    out = {"file": str(f), "under_file": str(f / "sub"), "proc_missing": "/proc/lutcore-no-such-dir",
           "proc_dir": "/proc/self"}[kind]

    def no_work(*a, **k):
        raise AssertionError("the evaluation started before --out was checked")
    monkeypatch.setattr(ev, "_open", no_work)
    rc = main(["eval", "--checkpoint", ckpt, "--data", data, "--units", "none", "mitchell", "--out", out])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "--out" in err and out in err and len(err.strip().splitlines()) == 1
    assert f.read_text() == "x" and not os.path.exists("/proc/lutcore-no-such-dir")


def test_train_and_compare_out_are_checked_before_training(tmp_path, data, monkeypatch, capsys):
    import lutcore.experiment as ex
    from lutcore.train import Trainer
    f = tmp_path / "a_file"
    f.write_text("x")

    def no_work(*a, **k):
        raise AssertionError("training started before --out was checked")
    monkeypatch.setattr(Trainer, "train", no_work)
    monkeypatch.setattr(ex, "compare", no_work)
    assert main(["train", "--data", data, "--steps", "2", "--out", str(f), *TINY]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["compare", "--steps", "2", "--out", str(f / "sub")]) == 2
    assert "--out" in capsys.readouterr().err


def test_out_probe_leaves_nothing_behind(tmp_path, ckpt, monkeypatch):
    """The probe creates the directory (and parents) to try a write, then removes them again;
    a bad units spec after it leaves no empty directory."""
    from lutcore._io import writable_dir
    d = tmp_path / "a" / "b" / "c"
    assert writable_dir(str(d), "--out") == str(d)
    assert not (tmp_path / "a").exists()
    assert main(["eval", "--checkpoint", ckpt, "--units", "no-such-units", "--out", str(d)]) == 2
    assert not (tmp_path / "a").exists()
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "old.txt").write_text("mine")
    writable_dir(str(tmp_path / "keep"))
    assert os.listdir(tmp_path / "keep") == ["old.txt"]


# ------------------------------------------------------------------ evaluate_units, interrupted
def _model():
    from lutcore.models import GPT, GPTConfig
    return GPT(GPTConfig(vocab=256, dim=16, context=16, layers=1, heads=2, seed=1))


IDS = lutcore.tokenizer.Tokenizer.bytes().encode(TEXT[:1200])


@pytest.mark.parametrize("stop_in", [0, 2])          # during the float row; during the third units row
def test_evaluate_units_interrupted_returns_the_finished_rows(tmp_path, stop_in):
    specs = ["none", "exact", "mitchell", "truncated:6"]
    full = evaluate_units(_model(), IDS, units=specs, batch_size=4)
    seen = []

    def on_window(done, total, spec):
        seen.append(spec)
        if len(set(seen)) - 1 == stop_in and seen.count(spec) == 3:
            raise KeyboardInterrupt
    with pytest.raises(EvalInterrupted) as ei:
        evaluate_units(_model(), IDS, units=specs, batch_size=4, on_window=on_window)
    assert isinstance(ei.value, KeyboardInterrupt)
    r = ei.value.result
    assert r.partial and [x["units"] for x in r.rows] == specs[:stop_in]
    assert r.remaining == specs[stop_in:]
    for a, b in zip(r.rows, full.rows):
        assert a == {**b, "seconds": a["seconds"]}
    assert r.config["interrupted_in"]["units"] == specs[stop_in] and r.config["interrupted_in"]["windows_done"] == 12
    assert (r.reference is None) == (stop_in == 0)
    paths = write_report(r, tmp_path / "e")
    rep = json.load(open(paths["json"]))
    assert rep["partial"] is True and rep["remaining"] == specs[stop_in:] and len(rep["results"]) == stop_in
    assert json.load(open(write_report(full, tmp_path / "f")["json"]))["partial"] is False


# ------------------------------------------------------------------ Trainer, interrupted
def _trainer(seed=0):
    from lutcore.models import MambaConfig, MambaLM
    from lutcore.train import Trainer
    m = MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=256, d_state=4, seed=seed))
    return Trainer(m, lr=3e-3, seed=seed)


TRAIN_IDS = lutcore.tokenizer.Tokenizer.bytes().encode(TEXT[:6000])
KW = dict(epochs=2, seq_len=32, batch_size=2, grad_accum=2)


def _same_params(a, b):
    pa, pb = a.model.parameters(), b.model.parameters()
    assert sorted(pa) == sorted(pb)
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k], err_msg=k)


@pytest.mark.parametrize("where", ["micro", "optimizer"])
def test_trainer_interrupted_resumes_to_the_same_weights(tmp_path, monkeypatch, where):
    """Ctrl-C in the middle of a step (between its micro-batches) gives the step back; one
    inside the optimizer step is held until the step is whole.  Either way the checkpoint
    saved then resumes to exactly the weights of an uninterrupted run."""
    from lutcore.train import Trainer
    ref = _trainer()
    ref.train(TRAIN_IDS, max_steps=14, **KW)
    tr = _trainer()
    calls = {"n": 0}
    if where == "micro":
        real = type(tr.model).loss_and_grads

        def lg(self, *a):
            calls["n"] += 1
            if calls["n"] == 2 * 6 + 2:                  # the 2nd micro-batch of step 7
                raise KeyboardInterrupt
            return real(self, *a)
        monkeypatch.setattr(type(tr.model), "loss_and_grads", lg)
    else:
        real = type(tr.optimizer).step

        def step(self, *a, **k):
            calls["n"] += 1
            if calls["n"] == 7:
                os.kill(os.getpid(), signal.SIGINT)       # arrives inside the step
                time.sleep(0.05)
            return real(self, *a, **k)
        monkeypatch.setattr(type(tr.optimizer), "step", step)
    with pytest.raises(KeyboardInterrupt):
        tr.train(TRAIN_IDS, max_steps=14, **KW)
    monkeypatch.undo()
    assert tr.global_step == (6 if where == "micro" else 7) == len(tr.history)
    assert tr.position["batch"] == 2 * tr.global_step
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    tr.save_checkpoint(tmp_path / "ck")
    back = Trainer.resume(tmp_path / "ck")
    back.train(TRAIN_IDS, max_steps=14, **KW)
    _same_params(back, ref)
    assert [h["loss"] for h in back.history] == [h["loss"] for h in ref.history]


# ------------------------------------------------------------------ the CLI, SIGINT in a child
def _sigint_when(args, ready, cwd, timeout=240):
    """Run ``lutcore ARGS`` with stderr on a pseudo-terminal; once the stderr text so far
    matches ``ready`` (a callable), send SIGINT.  -> (exit status, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "COLUMNS": "100"}
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))    # a 100-column terminal
    p = subprocess.Popen([sys.executable, "-m", "lutcore", *args], stdout=subprocess.PIPE, stderr=slave,
                         stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    os.close(slave)
    buf, sent, t0 = b"", False, time.monotonic()
    try:
        while True:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:                      # EIO: the child closed its end
                    chunk = b""
                if not chunk and p.poll() is not None:
                    break
                buf += chunk
            elif p.poll() is not None:
                break
            if not sent and ready(buf.decode(errors="replace")):
                p.send_signal(signal.SIGINT)
                sent = True
            assert time.monotonic() - t0 < timeout, buf.decode(errors="replace")[-2000:]
        out = p.stdout.read().decode()
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    assert sent, f"the child ended before the work was under way: {buf.decode(errors='replace')[-2000:]}"
    return rc, out, buf.decode(errors="replace").replace("\r\n", "\n")


def _lines(err):
    """The stderr lines a reader sees: progress-bar redraws (\\r) collapsed to their last state."""
    return [ln.split("\r")[-1].strip() for ln in err.split("\n") if ln.split("\r")[-1].strip()]


def test_cli_eval_sigint_writes_the_finished_rows(tmp_path, ckpt, data):
    specs = ["none", "exact", "mitchell", "truncated:6", "truncated:4", "reduced:5", "reduced:3"]
    rc, out, err = _sigint_when(["eval", "--checkpoint", ckpt, "--data", data, "--units", *specs,
                                 "--seq-len", "32", "--threads", "1", "--out", str(tmp_path / "e")],
                                lambda e: "eval mitchell" in e, cwd=str(tmp_path))
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    said = [ln for ln in _lines(err) if "interrupted" in ln]
    assert len(said) == 1 and _lines(err)[-1] == said[0], err[-3000:]
    rep = json.load(open(tmp_path / "e" / "eval.json"))
    done = [r["units"] for r in rep["results"]]
    assert rep["partial"] is True and done == specs[:len(done)] and len(done) >= 2
    assert rep["remaining"] == specs[len(done):] and rep["remaining"]
    assert f"{len(done)} of {len(specs)} row(s) finished" in said[0] and str(tmp_path / "e" / "eval.json") in said[0]
    assert not [n for n in os.listdir(tmp_path / "e") if n.endswith(".lutcore-part")]
    assert out == ""                                  # no table printed for a partial run
    # the finished rows are the rows an uninterrupted run gives
    full = evaluate_units(ckpt, TEXT, units=specs[:len(done)], seq_len=32)
    for a, b in zip(rep["results"], full.rows):
        assert a["loss"] == b["loss"] and a["top1_agreement"] == b["top1_agreement"]


def _step_at_least(n):
    def ready(err):
        m = re.findall(r"\| *(\d+)/\d+ \[", err)
        return bool(m) and int(m[-1]) >= n
    return ready


def test_cli_train_sigint_saves_a_checkpoint_that_resumes(tmp_path, data):
    rc, out, err = _sigint_when(["train", "--data", data, "--steps", "100000", "--out", str(tmp_path / "run"),
                                 *TINY], _step_at_least(12), cwd=str(tmp_path))
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    said = [ln for ln in _lines(err) if "interrupted" in ln]
    assert len(said) == 1 and _lines(err)[-1] == said[0], err[-3000:]
    ck = str(tmp_path / "run" / "checkpoint")
    meta = json.load(open(os.path.join(ck, "trainer.json")))
    k = meta["global_step"]
    assert k >= 12 and f"interrupted at step {k} of 100000" in said[0] and ck in said[0]
    assert f"--resume {ck} --steps {100000 - k}" in said[0]
    assert os.path.isfile(os.path.join(ck, "heldout.json"))
    # resume for 3 more steps == an uninterrupted run of k + 3 steps
    assert main(["train", "--resume", ck, "--data", data, "--steps", "3", "--out", str(tmp_path / "run2"),
                 *TINY]) == 0
    assert main(["train", "--data", data, "--steps", str(k + 3), "--out", str(tmp_path / "ref"), *TINY]) == 0
    a = load_file(str(tmp_path / "run2" / "checkpoint" / "model.safetensors"))
    b = load_file(str(tmp_path / "ref" / "checkpoint" / "model.safetensors"))
    assert sorted(a) == sorted(b)
    for n in a:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    assert main(["eval", "--checkpoint", ck, "--out", str(tmp_path / "ev")]) == 0     # its held-out split


def _same_weights(d1, d2):
    a = load_file(os.path.join(d1, "model.safetensors"))
    b = load_file(os.path.join(d2, "model.safetensors"))
    return sorted(a) == sorted(b) and all(np.array_equal(a[n].view(np.uint32), b[n].view(np.uint32)) for n in a)


def test_cli_train_sigkill_keeps_the_last_periodic_checkpoint_and_resume_restores_the_run(tmp_path, data):
    """An out-of-memory kill or a scheduler's limit (SIGKILL: nothing runs after it) loses at most
    --save-every steps; `--resume CKPT --steps N` alone (no data or batch flags) continues the same
    run: the checkpoint holds every setting that decides the bits, --micro-batch included."""
    run = ["--data", data, "--micro-batch", "1", "--grad-accum", "2", "--clip", "0.5", "--lr", "0.002"]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    ck = tmp_path / "run" / "checkpoint"
    p = subprocess.Popen([sys.executable, "-m", "lutcore", "train", *run, "--steps", "100000", "--save-every", "4",
                          "--out", str(tmp_path / "run"), *TINY], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env, cwd=str(tmp_path))
    try:
        t0, k = time.monotonic(), 0
        while k < 8 and time.monotonic() - t0 < 240 and p.poll() is None:
            time.sleep(0.2)
            try:
                k = json.load(open(ck / "trainer.json"))["global_step"]
            except (OSError, ValueError):
                pass
        assert k >= 8, "no periodic checkpoint"
    finally:
        p.kill()
        p.wait()
    from lutcore._io import saved_dir
    meta = json.load(open(os.path.join(saved_dir(str(ck)), "trainer.json")))   # as resume reads it: a save
    k = meta["global_step"]                                       # killed mid-switch is read from its whole copy
    assert k % 4 == 0 and meta["train_config"]["micro_batch"] == 1 and meta["train_config"]["max_grad_norm"] == 0.5
    assert main(["train", "--resume", str(ck), "--steps", "3", "--out", str(tmp_path / "more"), "--sample-tokens",
                 "0", "--eval-units", "none", "--threads", "1"]) == 0
    assert main(["train", *run, "--steps", str(k + 3), "--out", str(tmp_path / "ref"), *TINY]) == 0
    assert _same_weights(tmp_path / "more" / "checkpoint", tmp_path / "ref" / "checkpoint")


@pytest.mark.parametrize("flag,value,recorded", [("--micro-batch", "2", "not given"), ("--batch-size", "4", "2"),
                                                 ("--lr", "0.01", "0.003"), ("--seq-len", "16", "32"),
                                                 ("--mixed-precision", None, "False")])
def test_cli_train_resume_refuses_a_flag_that_changes_the_run(tmp_path, ckpt, capsys, flag, value, recorded):
    given = [flag] + ([value] if value else [])
    assert main(["train", "--resume", ckpt, "--steps", "1", "--out", str(tmp_path / "r"), *given]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: the checkpoint {ckpt!r} was trained with {flag} {recorded}, got" in err
    assert not os.path.exists(tmp_path / "r" / "checkpoint")


def test_cli_train_resume_with_workers_needs_the_micro_batch_reduction(tmp_path, ckpt, capsys):
    assert main(["train", "--resume", ckpt, "--steps", "1", "--workers", "2", "--out", str(tmp_path / "r")]) == 2
    assert "--workers: the checkpoint" in capsys.readouterr().err


def test_cli_train_resume_refuses_other_text(tmp_path, ckpt, capsys):
    other = tmp_path / "other.txt"
    other.write_text(TEXT[::-1], encoding="utf-8")
    assert main(["train", "--resume", ckpt, "--steps", "1", "--data", str(other), "--out", str(tmp_path / "r")]) == 2
    assert "--data: the checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["mitchel", "truncated:99", "no/such/dir"])
def test_cli_train_eval_units_typo_is_refused_before_training(tmp_path, data, monkeypatch, capsys, bad):
    from lutcore.train import Trainer
    monkeypatch.setattr(Trainer, "train", lambda *a, **k: pytest.fail("trained before checking --eval-units"))
    assert main(["train", "--data", data, "--steps", "1", "--out", str(tmp_path / "r"),
                 *[a for a in TINY if a not in ("--eval-units", "none")], "--eval-units", "exact", bad]) == 2
    assert f"--eval-units: {bad!r}" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["-1", "x", "5q", "1.5", "nanm", ""])
def test_cli_train_save_every_is_checked(tmp_path, capsys, bad):
    assert main(["train", "--save-every", bad, "--out", str(tmp_path / "r")]) == 2
    assert "--save-every" in capsys.readouterr().err


# ------------------------------------------------------------------ loaders stay inside
@pytest.fixture(scope="module")
def hf_mamba(tmp_path_factory):
    from lutcore.models import MambaConfig, MambaLM
    d = tmp_path_factory.mktemp("hf") / "mamba"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=256, d_state=4, seed=2,
                            discretization="simplified")).save_pretrained(d)
    return str(d)


def _sharded(tmp_path, src, entry):
    """A copy of ``src`` whose weights live in one shard, named by the index as ``entry``
    (None: a plain name inside the directory)."""
    d = tmp_path / "ckpt"
    os.makedirs(d)
    shutil.copy(os.path.join(src, "config.json"), d / "config.json")
    t = load_file(os.path.join(src, "model.safetensors"))
    names = sorted(t)
    if entry is None:
        where, fname = d / "model-00001-of-00001.safetensors", "model-00001-of-00001.safetensors"
    elif entry == "abs":
        os.makedirs(tmp_path / "elsewhere")
        where = tmp_path / "elsewhere" / "x.safetensors"
        fname = str(where)
    else:
        os.makedirs(tmp_path / "elsewhere")
        where, fname = tmp_path / "elsewhere" / "x.safetensors", "../elsewhere/x.safetensors"
    save_file(t, str(where), metadata={"format": "pt"})
    wm = {n: fname for n in names}
    wm[names[0]] = "model-00001-of-00001.safetensors" if entry is None else fname
    json.dump({"metadata": {}, "weight_map": wm}, open(d / "model.safetensors.index.json", "w"))
    return str(d), names[0], fname


def _loaders(d):
    from lutcore._io import read_safetensors, safetensors_files
    from lutcore.models import MambaLM
    from lutcore.pipeline.arch import ArchSpec
    from lutcore._io import read_config
    from lutcore.pipeline.shard import load_stage_weights, plan_from_splits
    spec = ArchSpec.from_config(read_config(d))
    return {"safetensors_files": lambda: safetensors_files(d), "read_safetensors": lambda: read_safetensors(d),
            "from_pretrained": lambda: MambaLM.from_pretrained(d),
            "load_stage_weights": lambda: load_stage_weights(d, spec, plan_from_splits(spec, [spec.layers])[0]),
            "evaluate_units": lambda: evaluate_units(d, IDS[:200], units=["none"], seq_len=16)}


@pytest.mark.parametrize("entry", ["../elsewhere/x.safetensors", "abs"])
def test_weight_map_outside_the_directory_is_refused_by_every_loader(tmp_path, hf_mamba, capsys, entry):
    d, tensor, fname = _sharded(tmp_path, hf_mamba, entry)
    for name, load in _loaders(d).items():
        with pytest.raises(ValueError) as ei:
            load()
        msg = str(ei.value)
        assert "model.safetensors.index.json" in msg and "weight_map" in msg and fname in msg, (name, msg)
        assert "outside" in msg, (name, msg)
    assert main(["inspect", d]) == 2 and "weight_map" in capsys.readouterr().err
    assert main(["eval", "--model", d, "--data", os.path.join(d, "config.json"), "--out", str(tmp_path / "e")]) == 2
    assert "weight_map" in capsys.readouterr().err


def test_weight_map_inside_the_directory_still_loads(tmp_path, hf_mamba):
    from lutcore.models import MambaLM
    d, _, _ = _sharded(tmp_path, hf_mamba, None)
    for name, load in _loaders(d).items():
        load()
    a, b = MambaLM.from_pretrained(d).parameters(), MambaLM.from_pretrained(hf_mamba).parameters()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def _units_dir(path, target_of_link):
    """A units directory whose mul_lut.bin is a symlink to ``target_of_link``."""
    os.makedirs(path, exist_ok=True)
    os.symlink(target_of_link, os.path.join(path, "mul_lut.bin"))
    return str(path)


def test_units_symlink_rule(tmp_path):
    from lutcore.units import Units, approx
    m = approx.mitchell()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(m.mul.astype("<i2").tobytes())
    # a link out of the directory: refused, naming the file and its target
    bad = _units_dir(tmp_path / "u_out", str(outside))
    with pytest.raises(ValueError) as ei:
        Units.load(bad)
    assert os.path.join(bad, "mul_lut.bin") in str(ei.value) and str(outside) in str(ei.value)
    bad2 = _units_dir(tmp_path / "u_rel", "../outside.bin")          # relative, same
    with pytest.raises(ValueError, match="outside"):
        lutcore.units.resolve(bad2)
    # a link within the directory: followed
    ok = tmp_path / "u_in"
    os.makedirs(ok / ".tables")
    (ok / ".tables" / "mul.bin").write_bytes(m.mul.astype("<i2").tobytes())
    _units_dir(ok, ".tables/mul.bin")
    assert Units.load(str(ok)).digest == Units(m.mul).digest
    # the directory itself a link: its resolved directory is what counts
    os.symlink(ok, tmp_path / "u_link")
    assert Units.load(str(tmp_path / "u_link")).digest == Units(m.mul).digest
    # a Hugging Face hub cache snapshot links into its own blobs/
    snap = tmp_path / "models--x--y" / "snapshots" / "abc123"
    os.makedirs(tmp_path / "models--x--y" / "blobs")
    (tmp_path / "models--x--y" / "blobs" / "f00").write_bytes(m.mul.astype("<i2").tobytes())
    _units_dir(snap, "../../blobs/f00")
    assert Units.load(str(snap)).digest == Units(m.mul).digest


def test_checkpoint_symlink_out_is_refused(tmp_path, ckpt):
    from lutcore.evaluate import load_checkpoint
    from lutcore.train import Trainer
    for n in ("model.safetensors", "trainer.json"):
        d = tmp_path / n
        shutil.copytree(ckpt, d)
        elsewhere = tmp_path / f"elsewhere-{n}"
        shutil.move(str(d / n), elsewhere)
        os.symlink(elsewhere, d / n)
        for load in (Trainer.resume, load_checkpoint):
            with pytest.raises(ValueError) as ei:
                load(str(d))
            assert str(elsewhere) in str(ei.value) and n in str(ei.value)
        os.remove(d / n)                                              # a link inside: followed
        shutil.move(str(elsewhere), d / f".{n}")
        os.symlink(f".{n}", d / n)
        Trainer.resume(str(d))


def test_contained_rule():
    from lutcore._io import contained
    root = ROOT
    assert contained(root, "lutcore/_io.py") == os.path.join(root, "lutcore/_io.py")
    assert contained(root, "a/../b") == os.path.join(root, "a/../b")
    for bad in ("../x", "/etc/passwd", "a/../../x", ".."):
        with pytest.raises(ValueError, match="outside"):
            contained(root, bad, f"entry {bad!r}")
    with pytest.raises(ValueError):
        contained(root, "")
