"""Data-parallel training on Ray (lutcore.train.dp): parameters after a few steps are the
same bits for 1, 2, 3 and 4 workers and equal the single-process Trainer with the same
micro-batch size (MambaLM and GPT); a killed worker is named; a restart resumes
bit-identically; a 3-worker checkpoint resumes with 2; bad input.  One module-scoped Ray
(``cluster``), tiny models, few steps."""
from _paths import TESTS  # noqa: F401
import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

import ray  # the test extra installs it: a missing ray is an error, not a skip

from lutcore.models.gpt import GPT, GPTConfig
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.train import Trainer
from lutcore.train.dp import RayWorkers, WorkerFailure, check_ray_address, fit

TEXT = ("the quick brown fox jumps over the lazy dog; " * 12)
RUN = dict(seq_len=12, batch_size=4, grad_accum=2, micro_batch=1, max_steps=3)


def mamba():
    return MambaLM(MambaConfig(d_model=16, n_layer=2, vocab_size=256, d_state=4, seed=3))


def gpt():
    return GPT(GPTConfig(vocab=256, dim=16, context=16, layers=1, heads=2, seed=3))


def raw(tr):
    return {k: v.copy().view(np.uint32) for k, v in tr.model.parameters().items()}


def same(a, b):
    return sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def local_run(make, **kw):
    tr = Trainer(make(), lr=3e-3, threads=1)
    tr.train(TEXT, **{**RUN, **kw})
    return tr


@pytest.mark.parametrize("make", [mamba, gpt], ids=["mamba", "gpt"])
def test_same_bits_for_1_to_4_workers_and_single_process(cluster, make):
    want = raw(local_run(make))
    for n in (1, 2, 3, 4):
        with RayWorkers(n, threads=1) as w:
            tr = Trainer(make(), lr=3e-3, threads=1)
            tr.train(TEXT, workers=w, **RUN)
            assert same(raw(tr), want), n
            assert w.bytes_sent and len(w.bytes_sent[0]["accumulator"]) == n


def test_mixed_precision_scaler_decided_from_the_reduced_gradient(cluster):
    want = local_run(mamba, mixed_precision=True)
    with RayWorkers(3, threads=1) as w:
        tr = Trainer(mamba(), lr=3e-3, threads=1)
        tr.train(TEXT, workers=w, mixed_precision=True, **RUN)
    assert same(raw(tr), raw(want))
    assert tr.scaler.state_dict() == want.scaler.state_dict()
    assert [r["grad_norm"] for r in tr.history] == [r["grad_norm"] for r in want.history]


def test_killed_worker_is_named_then_restart_resumes_bit_identically(cluster, tmp_path):
    run = {**RUN, "max_steps": 4}
    want = raw(local_run(mamba, max_steps=4))
    with RayWorkers(2, threads=1, step_timeout=60) as w:
        tr = Trainer(mamba(), lr=3e-3, threads=1)
        pid = w.infos[1]["pid"]

        def kill_at_step(rec):
            if rec["step"] == 2:
                os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(WorkerFailure, match=r"worker 1 \(pid %d\) died" % pid) as ei:
            fit(tr, TEXT, workers=w, checkpoint=tmp_path / "a", on_step=kill_at_step, **run)
        assert ei.value.worker == 1 and time.monotonic() - t0 < 60       # stated: within step_timeout
        restarts = []
        w.restart()
        tr = Trainer(mamba(), lr=3e-3, threads=1)
        pid = w.infos[0]["pid"]
        done = fit(tr, TEXT, workers=w, checkpoint=tmp_path / "b", max_restarts=1,
                   on_step=lambda rec: rec["step"] == 3 and not restarts and os.kill(pid, signal.SIGKILL),
                   on_restart=lambda e, k: restarts.append(e.worker), **run)
    assert restarts == [0] and done.global_step == 4
    assert same(raw(done), want)


def test_checkpoint_saved_with_3_workers_resumes_with_2(cluster, tmp_path):
    want = raw(local_run(mamba, max_steps=4))
    with RayWorkers(3, threads=1) as w:
        tr = Trainer(mamba(), lr=3e-3, threads=1)
        tr.train(TEXT, workers=w, **{**RUN, "max_steps": 2})
        tr.save_checkpoint(tmp_path / "ck")
    with RayWorkers(2, threads=1) as w:
        tr2 = Trainer.resume(tmp_path / "ck", threads=1)
        tr2.train(TEXT, workers=w, **{**RUN, "max_steps": 4})
    assert same(raw(tr2), want)


def test_bad_input(cluster):
    tr = Trainer(mamba(), lr=3e-3, threads=1)
    with pytest.raises(ValueError, match="micro_batch: expected a divisor of batch_size=4.*got 3"):
        tr.train(TEXT, **{**RUN, "micro_batch": 3})
    with RayWorkers(3, threads=1) as w:
        with pytest.raises(ValueError, match=r"workers: expected at most 2 .*got 3 workers"):
            tr.train(TEXT, workers=w, **{**RUN, "grad_accum": 1, "micro_batch": 2})
        with pytest.raises(ValueError, match="micro_batch: expected a micro-batch size"):
            tr.train(TEXT, workers=w, seq_len=12, batch_size=4)
    import lutcore
    from ray._private import ray_constants
    # the hook of tests/ray_fake_version.py, named in the variable Ray's worker runs at start and
    # found through PYTHONPATH (as tests/pipeline/test_ray_stall.py does)
    path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH"))
                           if p)
    env = {"env_vars": {ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR: "ray_fake_version.fake",
                        "PYTHONPATH": path, "LUTCORE_TEST_FAKE_VERSION": "0.0.0-fake",
                        "LUTCORE_TEST_ROOT": os.path.dirname(os.path.dirname(os.path.abspath(lutcore.__file__)))}}
    want = rf"expected lutcore {lutcore.__version__} .*got lutcore 0.0.0-fake on worker 0"
    with pytest.raises(ValueError, match=want):
        RayWorkers(1, actor_options={"runtime_env": env})


def test_ray_address_that_does_not_answer_is_refused_within_seconds():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                                        # a closed local port
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=rf"ray_address: expected a Ray cluster answering at '127.0.0.1:{port}'"):
        check_ray_address(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 5
    with pytest.raises(ValueError, match="ray_address: expected 'host:port'"):
        check_ray_address("nowhere")


def test_ray_address_where_something_else_listens_is_refused_within_seconds():
    """A silent listener and an HTTP server accept the TCP connection; ray.init would retry
    them for ever."""
    import http.server
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    web = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    web.RequestHandlerClass.log_message = lambda *a: None
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        for port, why in ((silent.getsockname()[1], "a connection but no answer within 1 s"),
                          (web.server_address[1], "an answer that is not gRPC's")):
            t0 = time.monotonic()
            with pytest.raises(ValueError, match=f"ray_address: expected a Ray cluster answering at "
                                                 f"'127.0.0.1:{port}', got {why}"):
                RayWorkers(1, address=f"127.0.0.1:{port}", connect_timeout=1.0)
            assert time.monotonic() - t0 < 10
    finally:
        web.shutdown()
        silent.close()


def test_ray_address_of_a_running_cluster_is_accepted(cluster):
    gcs = ray.get_runtime_context().gcs_address
    assert check_ray_address(gcs) == gcs


def test_cli_train_workers_banner_and_same_bits_as_one_process(cluster, tmp_path, capsys):
    from lutcore._io import load_tensors
    from lutcore.cli import main
    f = tmp_path / "t.txt"
    f.write_text(TEXT * 3)
    common = ["--data", str(f), "--steps", "2", "--d-model", "8", "--layers", "1", "--d-state", "2", "--seq-len",
              "16", "--batch-size", "4", "--micro-batch", "2", "--sample-tokens", "0", "--threads", "1",
              "--eval-units", "none"]
    assert main(["train", *common, "--out", str(tmp_path / "one")]) == 0
    assert main(["train", *common, "--workers", "2", "--out", str(tmp_path / "two")]) == 0
    out = capsys.readouterr().out
    assert "data-parallel: 2 Ray workers on local Ray: w0 pid" in out and "w1 pid" in out
    a, b = (load_tensors(str(tmp_path / d / "checkpoint" / "model.safetensors")) for d in ("one", "two"))
    assert same({k: v.view(np.uint32) for k, v in a.items()}, {k: v.view(np.uint32) for k, v in b.items()})
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    assert main(["train", *common, "--ray-address", f"127.0.0.1:{port}", "--out", str(tmp_path / "x")]) == 2
    assert f"ray_address: expected a Ray cluster answering at '127.0.0.1:{port}'" in capsys.readouterr().err


def test_cli_train_worker_death_saves_the_last_whole_step(cluster, tmp_path, capsys, monkeypatch):
    """A worker killed at step 3: one line naming it and its cause, exit 1, a checkpoint at step 2
    that resumes (without flags: the checkpoint holds them) to the uninterrupted run's bits."""
    from lutcore.cli import main
    f = tmp_path / "t.txt"
    f.write_text(TEXT * 3)
    common = ["--data", str(f), "--d-model", "8", "--layers", "1", "--d-state", "2", "--seq-len", "16",
              "--batch-size", "4", "--micro-batch", "2", "--sample-tokens", "0", "--threads", "1",
              "--eval-units", "none"]
    real = RayWorkers.gradients
    calls = []

    def dying(self, *a, **k):
        calls.append(1)
        if len(calls) == 3:
            os.kill(self.infos[1]["pid"], signal.SIGKILL)
        return real(self, *a, **k)
    monkeypatch.setattr(RayWorkers, "gradients", dying)
    assert main(["train", *common, "--steps", "4", "--workers", "2", "--out", str(tmp_path / "two")]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if "lutcore train" in ln]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert "stopped at step 2 of 4 (step: worker 1 (pid" in err[0] and "died" in err[0], err
    ck = tmp_path / "two" / "checkpoint"
    assert f"--resume {ck} --steps 2 --workers 2" in err[0]
    monkeypatch.setattr(RayWorkers, "gradients", real)
    assert main(["train", "--resume", str(ck), "--steps", "2", "--out", str(tmp_path / "more"), "--threads", "1",
                 "--sample-tokens", "0", "--eval-units", "none"]) == 0
    assert main(["train", *common, "--steps", "4", "--out", str(tmp_path / "one")]) == 0
    from lutcore._io import load_tensors
    a, b = (load_tensors(str(tmp_path / d / "checkpoint" / "model.safetensors")) for d in ("more", "one"))
    assert same({k: v.view(np.uint32) for k, v in a.items()}, {k: v.view(np.uint32) for k, v in b.items()})


def _torch_run(workers, steps=3, bn=False, switch_at=None):
    """The torch helper's run; ``bn``: a BatchNorm layer (running statistics are buffers);
    ``switch_at``: after that many steps, ``set_units(net, "mitchell")``."""
    import torch
    from lutcore.torch import approximate, set_units
    from lutcore.torch.dp import TorchDataParallel
    torch.manual_seed(0)
    mid = [torch.nn.BatchNorm1d(7)] if bn else []
    net = approximate(torch.nn.Sequential(torch.nn.Linear(5, 7), *mid, torch.nn.ReLU(), torch.nn.Linear(7, 3)),
                      "exact")
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(2)
    with TorchDataParallel(net, torch.nn.functional.cross_entropy, micro_batch=2 if bn else 1,
                           workers=workers) as dp:
        for i in range(steps):
            if i == switch_at:
                set_units(net, "mitchell")
            x = rng.standard_normal((6, 5)).astype(np.float32)
            y = rng.integers(0, 3, 6)
            dp.step(opt, x, y)
    return {k: v.detach().numpy().copy().view(np.uint32 if v.dtype == torch.float32 else v.numpy().dtype)
            for k, v in net.state_dict().items()}


def test_torch_helper_same_bits_for_any_worker_count(cluster):
    want = _torch_run(None)
    for n in (2, 3):
        assert same(_torch_run(n), want), n


def test_torch_helper_batchnorm_statistics_match_one_process(cluster):
    """The running statistics leave their initial values and are the single-process run's bits."""
    want = _torch_run(None, bn=True)
    assert not np.array_equal(want["1.running_mean"], np.zeros(7, np.float32).view(np.uint32))
    assert int(want["1.num_batches_tracked"]) == 9
    assert same(_torch_run(2, bn=True), want)


def test_torch_workers_follow_set_units(cluster):
    want = _torch_run(None, switch_at=1)
    assert not same(want, _torch_run(None))                 # the switch changes the run
    assert same(_torch_run(2, switch_at=1), want)


def test_workers_follow_set_units(cluster):
    """model.set_units between train calls: the workers compute through the new units."""
    def run(w):
        tr = Trainer(mamba(), lr=3e-3, threads=1)
        tr.train(TEXT, workers=w, **{**RUN, "max_steps": 2})
        tr.model.set_units("mitchell")
        tr.train(TEXT, workers=w, **{**RUN, "max_steps": 4})
        return raw(tr)
    want = run(None)
    with RayWorkers(2, threads=1) as w:
        assert same(run(w), want)


def test_workers_on_one_host_share_its_cores(cluster):
    from lutcore.train.dp import share_of_host
    infos = [{"node": "a", "cpus": 8}, {"node": "a", "cpus": 8}, {"node": "b", "cpus": 4}, {"node": "a", "cpus": 8}]
    assert share_of_host(infos) == [2, 2, 4, 2]
    assert share_of_host([{"node": "a", "cpus": 2}] * 3) == [1, 1, 1]          # never below one thread
    with RayWorkers(2) as w:                                                     # threads unset: the host's share
        cpus = w.infos[0]["cpus"]
        assert w.shares == [max(1, cpus // 2)] * 2
        assert "each host's cores / its workers" in w.describe()
        assert w.get([a.set_threads.remote(t) for a, t in zip(w.actors, w.shares)], "check") == w.shares
        tr = Trainer(mamba(), lr=3e-3, threads=1)
        tr.train(TEXT, workers=w, **RUN)                                        # the bits of any thread count
        assert same(raw(tr), raw(local_run(mamba)))
    with RayWorkers(1, threads=1) as w:
        assert w.shares is None and "1 thread each" in w.describe()
