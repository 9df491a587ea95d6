"""Bad input across the public API (models, sampling, optimizer, trainer, configs,
files, CLI): each call below raises ValueError/TypeError naming the argument, where
it had crashed, hung, raised another exception type or silently done something else."""
import json
import os

import numpy as np
import pytest

import lutcore
from lutcore.cli import main
from lutcore.models import MambaConfig, MambaLM
from lutcore.models.gpt import GPTConfig
from lutcore.pipeline.arch import ArchSpec
from lutcore.sampling import pick_token
from lutcore.train import Trainer
from lutcore.train.amp import DynamicLossScaler
from lutcore.train.optim import AdamW, clip_grad_norm


def tiny():
    return MambaLM(MambaConfig(d_model=16, n_layer=2, vocab_size=256, d_state=4))


def raises(exc, match, fn, *a, **k):
    with pytest.raises(exc, match=match):
        fn(*a, **k)


def test_models_decoding_and_losses():
    m = tiny()
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    raises(ValueError, "state", m.step, np.array([1]), m.init_state(1)[:1])          # one layer short
    raises(ValueError, "state", m.step, np.array([1]), m.init_state(2))              # batch 2 for 1 token
    raises(ValueError, "state", m.step, np.array([1]), [(1, 2)] * 2)
    raises(ValueError, "targets", m.loss, ids, ids.T)
    raises(ValueError, "targets", m.loss, ids, ids[:, :2])
    raises(ValueError, "no.*tokens|none", m.loss, np.zeros((0, 3), np.int64), np.zeros((0, 3), np.int64))
    raises(ValueError, "none", m.loss_and_grads, np.zeros((2, 0), np.int64), np.zeros((2, 0), np.int64))
    raises(ValueError, "grads", m.loss_and_grads, ids, ids, grads={})
    raises(TypeError, "grads", m.loss_and_grads, ids, ids, grads=[1])
    for kw, exc in (({"max_new_tokens": -1}, ValueError), ({"max_new_tokens": 2.7}, TypeError),
                    ({"max_new_tokens": 2, "temperature": -1.0}, ValueError),
                    ({"max_new_tokens": 2, "temperature": float("nan")}, ValueError),
                    ({"max_new_tokens": 2, "top_k": 1.7}, TypeError), ({"max_new_tokens": 2, "top_p": 0}, ValueError),
                    ({"max_new_tokens": 2, "seed": -1}, ValueError), ({"max_new_tokens": 2, "seed": 1.5}, TypeError)):
        name = [k for k in kw if k != "max_new_tokens"] or ["max_new_tokens"]
        raises(exc, name[0], m.generate, [1, 2], **kw)
    assert m.generate([1, 2], 0).tolist() == [1, 2]


def test_pick_token():
    raises(ValueError, "logits", pick_token, np.zeros((2, 5)))
    raises(ValueError, "logits", pick_token, np.array([0.0, np.nan]))
    raises(ValueError, "logits", pick_token, np.array([0.0, np.inf]))
    raises(ValueError, "logits", pick_token, np.full(3, -np.inf))
    raises(TypeError, "rng", pick_token, np.zeros(3), 1.0, rng=42)
    raises(TypeError, "temperature", pick_token, np.zeros(3), "hot")
    assert pick_token(np.array([0.0, -np.inf, 1.0])) == 2


def test_optimizer_and_scaler():
    p = {"w": np.ones(4, np.float32)}
    g = {"w": np.ones(4, np.float32)}
    for kw, name in (({"lr": float("nan")}, "lr"), ({"lr": float("inf")}, "lr"), ({"eps": float("nan")}, "eps"),
                     ({"weight_decay": -1}, "weight_decay"), ({"weight_decay": float("nan")}, "weight_decay"),
                     ({"max_delta": float("nan")}, "max_delta"), ({"betas": (0.9, 0.99, 0.5)}, "betas"),
                     ({"betas": 0.9}, "betas"), ({"betas": (2, 2)}, "betas")):
        raises((ValueError, TypeError), name, AdamW, p, **kw)
    opt = AdamW(p)
    raises(ValueError, "max_grad_norm", opt.step, g, max_grad_norm=-1)
    raises(ValueError, "max_grad_norm", opt.step, g, max_grad_norm=float("nan"))
    raises(ValueError, "grad_scale", opt.step, g, grad_scale=-1)
    raises(TypeError, "grads", opt.step, [g["w"]])
    assert np.all(p["w"] == 1) and opt.t == 0                     # nothing was applied
    sd = opt.state_dict()
    raises(ValueError, "lr", opt.load_state_dict, {**sd, "lr": float("nan")})
    raises(ValueError, "betas", opt.load_state_dict, {**sd, "betas": [2, 2]})
    raises(ValueError, "t", opt.load_state_dict, {**sd, "t": -1})
    raises(ValueError, "missing", opt.load_state_dict, {"m": {}, "v": {}})
    raises(ValueError, "max_norm", clip_grad_norm, g, -1.0)
    raises(TypeError, "grads", clip_grad_norm, {"a": np.ones(3, np.int64)}, 1.0)
    for kw, name in (({"init_scale": float("nan")}, "init_scale"), ({"init_scale": float("inf")}, "init_scale"),
                     ({"min_scale": 2.0 ** 20}, "min_scale"), ({"growth_interval": 0}, "growth_interval")):
        raises(ValueError, name, DynamicLossScaler, **kw)
    sc = DynamicLossScaler()
    raises(ValueError, "factor", sc.unscale, g, factor=0)
    raises(ValueError, "state_dict", sc.load_state_dict, {})


def test_trainer_arguments_and_resume(tmp_path):
    m = tiny()
    raises(TypeError, "seed", Trainer, m, seed=1.9)
    raises(ValueError, "seed", Trainer, m, seed=-1)
    raises(TypeError, "tokenizer", Trainer, m, tokenizer="bytes")
    raises(TypeError, "optimizer", Trainer, m, optimizer=object())
    tr = Trainer(m, seed=0)
    text = "hello world, " * 20
    raises(ValueError, "max_grad_norm", tr.train, text, seq_len=8, batch_size=2, max_grad_norm=-1)
    raises(ValueError, "max_steps", tr.train, text, seq_len=8, batch_size=2, max_steps=-1)
    raises(TypeError, "max_steps", tr.train, text, seq_len=8, batch_size=2, max_steps=0.5)
    raises(ValueError, "batch_size", tr.evaluate, text, seq_len=8, batch_size=-1)
    raises(TypeError, "seq_len", tr.evaluate, text, seq_len=2.9)
    tr.train(text, seq_len=8, batch_size=2, max_steps=1)
    tr.save_checkpoint(tmp_path / "ck")
    raises(ValueError, "float32", Trainer.resume, tmp_path / "ck", units="mitchell")
    meta = json.loads((tmp_path / "ck" / "trainer.json").read_text())
    del meta["model_class"]
    (tmp_path / "ck" / "trainer.json").write_text(json.dumps(meta))
    raises(ValueError, "model_class", Trainer.resume, tmp_path / "ck")
    (tmp_path / "ck" / "trainer.json").write_text("[1, 2")
    raises(ValueError, "trainer.json.*JSON", Trainer.resume, tmp_path / "ck")


def test_configs():
    raises(ValueError, "rms_eps", MambaConfig, rms_eps=-1)
    raises(ValueError, "rms_eps", MambaConfig, rms_eps=float("nan"))
    raises(TypeError, "rms_eps", MambaConfig, rms_eps="a")
    raises(TypeError, "conv_bias", MambaConfig, conv_bias="no")
    raises(ValueError, "dt_rank", MambaConfig, dt_rank=True)
    base = MambaConfig().to_hf()
    raises(ValueError, "hidden_size", MambaConfig.from_hf, {**base, "hidden_size": 0})
    raises(TypeError, "use_bias", MambaConfig.from_hf, {**base, "use_bias": "false"})
    raises(TypeError, "hidden_size", MambaConfig.from_hf, {**base, "hidden_size": 7.9})
    raises(TypeError, "config", MambaConfig.from_hf, [1])
    assert GPTConfig(ln_eps=np.float32(1e-5)).ln_eps == pytest.approx(1e-5)
    raises(ValueError, "ln_eps", GPTConfig, ln_eps=float("inf"))
    llama = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "vocab_size": 50}
    ArchSpec.from_config(llama)
    for extra, name in (({"rms_norm_eps": -1}, "rms_norm_eps"), ({"rms_norm_eps": float("nan")}, "rms_norm_eps"),
                        ({"rope_theta": float("inf")}, "rope_theta"), ({"num_key_value_heads": 0}, "num_key_value_heads"),
                        ({"rope_scaling": {"rope_type": "linear", "factor": 0}}, "factor")):
        raises(ValueError, name, ArchSpec.from_config, {**llama, **extra})


def test_numbers_that_overflowed_or_were_truncated():
    x = np.ones((2, 3), np.float32)
    raises(ValueError, "threads", lutcore.ops.exp, x, threads=2 ** 40)
    raises(ValueError, "n", lutcore.set_num_threads, 2 ** 40)
    raises(ValueError, "block", lutcore.quantize, x, block=2 ** 40)
    raises(TypeError, "axis", lutcore.quantize, x, axis=1.0)
    raises(TypeError, "axis", lutcore.quantize, x, axis=True)
    raises(TypeError, "nbytes", lutcore.set_cache_limit, 1.5)
    raises(ValueError, "nbytes", lutcore.set_cache_limit, 2 ** 70)
    for f in (lutcore.ops.exp, lutcore.ops.silu, lutcore.fp16_round):
        assert f(np.array(0.5, np.float32)).shape == ()                        # 0-d stays 0-d
    assert lutcore.requant(np.array(300, np.int32), 2).shape == ()


def test_damaged_files_name_themselves(tmp_path):
    m = tiny()
    m.save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    raises(ValueError, "model.safetensors", MambaLM.from_pretrained, tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("[]")
    raises(ValueError, "config.json.*object", MambaLM.from_pretrained, tmp_path / "m")
    (tmp_path / "st").write_bytes(b"garbage")
    raises(ValueError, "st", m.load_state, tmp_path / "st")


def test_cli_flags_are_checked(tmp_path, capsys):
    for flags, flag in ((["--epochs", "0"], "--epochs"), (["--steps", "0"], "--steps"), (["--lr", "nan"], "--lr"),
                        (["--clip", "-1"], "--clip"), (["--threads", "0"], "--threads"),
                        (["--seq-len", "0"], "--seq-len"), (["--batch-size", "-1"], "--batch-size"),
                        (["--seed", "-1"], "--seed"), (["--weight-decay", "nan"], "--weight-decay")):
        assert main(["train", "--out", str(tmp_path / "o")] + flags) == 2
        assert flag in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o")
    assert main(["eval", "--checkpoint", str(tmp_path), "--batch-size", "-1"]) == 2
    assert "--batch-size" in capsys.readouterr().err


def test_more_argument_checks():
    from lutcore.ops.matmul import matmul
    from lutcore.ops.scan import selective_scan_forward
    from lutcore.tokenizer import Tokenizer
    from lutcore.train.amp import fp16_view, has_overflow
    from lutcore.train.data import load_tokens, make_windows
    from lutcore.units import approx
    t = Tokenizer.bytes()
    raises(TypeError, "ids", t.decode, [65.9, 66.2])                       # was 'AB'
    raises(TypeError, "ids", t.decode, [[1], [1, 2]])
    raises(TypeError, "ids", t.decode, None)
    raises(ValueError, "tokenizer spec", Tokenizer.from_spec, {})
    raises(ValueError, "tokenizer spec", Tokenizer.from_spec, {"kind": "bogus"})
    raises(ValueError, "kind", Tokenizer, "bogus")
    raises(TypeError, "config", MambaLM, {"d_model": 8})
    raises(TypeError, "config", MambaLM, GPTConfig())
    raises(TypeError, "dtype", MambaLM, None, "foo")
    raises(TypeError, "params", MambaLM, None, np.float32, [1])
    raises(ValueError, "batch", tiny().init_state, -1)
    raises(TypeError, "batch", tiny().init_state, 1.5)
    raises(ValueError, "mode", lutcore.fp16_encode, np.ones(3, np.float32), mode=["x"])
    x = np.ones((1, 4, 2), np.float32)
    A = -np.ones((2, 3), np.float32)
    Bm = np.ones((1, 4, 3), np.float32)
    for chunk, exc in ((2.7, TypeError), ("4", TypeError), (True, TypeError), (0, ValueError), (2 ** 63, ValueError)):
        raises(exc, "chunk", selective_scan_forward, x, x, A, Bm, Bm, chunk=chunk)
    assert lutcore.Units.from_mul(lambda a, b: a * b).is_exact             # int8 inputs had wrapped
    raises(ValueError, "k", approx.truncated, True)
    f64 = np.ones((2, 3))
    raises(TypeError, "a, b", matmul, f64, np.ones((3, 2), np.int64))
    raises(ValueError, "a, b", matmul, np.ones(3), np.ones(3))
    raises(ValueError, "do not multiply", matmul, f64, f64)
    raises(ValueError, "out", matmul, f64, f64.T, accumulate=True)
    opt = AdamW({"w": np.ones(2, np.float32)})
    raises(ValueError, "zzz", opt.step, {"zzz": np.ones(2, np.float32)})
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    raises(ValueError, "read-only", clip_grad_norm, {"a": ro}, 0.5)
    raises(TypeError, "grads", has_overflow, ["x"])
    raises(TypeError, "params", fp16_view, [np.ones(2, np.float32)])
    raises(TypeError, "tokenizer", load_tokens, "text", None)
    raises(TypeError, "seq_len", make_windows, np.arange(10), 2.5)
    raises(TypeError, "on_step", Trainer(tiny()).train, "hello world " * 10, seq_len=8, batch_size=2,
           max_steps=1, on_step=3)


def test_names_in_messages_and_empty_prompts():
    from lutcore.ops import selective_scan
    from lutcore.ops.scan import causal_conv1d_step
    m = tiny()
    assert m.forward([]).shape == (1, 0, 256)
    raises(ValueError, "at least one token", m.generate, [], 1)
    x = np.ones((4, 8), np.float32)
    w = np.ones((8, 3), np.float32)
    w[0, 0] = np.nan
    raises(ValueError, "^b: ", lutcore.qmatmul, x, w)
    raises(ValueError, "^a: ", lutcore.qmatmul, w.T.copy(), x.T.copy())
    from lutcore.quant import QLinear
    raises(ValueError, "^w: ", QLinear, w)
    raises(ValueError, "weight", causal_conv1d_step, np.ones((2, 3), np.float32), np.ones((2, 0, 3), np.float32),
           np.ones((3, 0), np.float32))
    raises(TypeError, "path", lutcore.Units.load, None)
    from lutcore.tokenizer import Tokenizer
    raises(TypeError, "path", Tokenizer.from_file, None)
    raises(ValueError, "seed", GPTConfig, seed=-1)
    u = [[[1.0, 2.0]]]                                                    # a list, like numpy accepts
    assert selective_scan(np.asarray(u, np.float32), np.ones((1, 1, 2), np.float32), -np.ones((2, 3), np.float32),
                          np.ones((1, 1, 3), np.float32), np.ones((1, 1, 3), np.float32)).shape == (1, 1, 2)


def test_step_adapt_resume_and_stage_seed(tmp_path):
    from lutcore.pipeline.stage import Stage
    m = tiny()
    raises(ValueError, "token", m.step, [])
    raises(ValueError, "token", m.step, np.zeros((2, 2), np.int64))
    tr = Trainer(m)
    raises(ValueError, "rollback_tolerance", tr.adapt, "hello " * 20, rollback_tolerance=float("nan"))
    tr.train("hello world " * 20, seq_len=8, batch_size=2, max_steps=1)
    tr.save_checkpoint(tmp_path / "ck")
    meta = json.loads((tmp_path / "ck" / "trainer.json").read_text())
    (tmp_path / "ck" / "trainer.json").write_text(json.dumps({**meta, "position": 3}))
    raises(ValueError, "position", Trainer.resume, tmp_path / "ck")
    raises(ValueError, "seed", Stage.pick_token, np.zeros(4), 1.0, seed=-1)
    lg = np.array([0.0, 1.0, 0.5, 2.0])
    assert Stage.pick_token(lg, 1.0, seed=(3, 7)) == pick_token(lg, 1.0, rng=np.random.default_rng((3, 7)))


def test_second_audit_round(tmp_path, monkeypatch):
    from lutcore.ops.matmul import matmul
    from lutcore.quant import QLinear
    from lutcore.pipeline.shard import plan_stages
    # a folder named like a built-in multiplier does not replace it
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mitchell").mkdir()
    a = np.full((2, 3), 100, np.int8)
    b = np.full((3, 2), 90, np.int8)
    from lutcore.units import approx
    assert np.array_equal(lutcore.lut_gemm(a, b, units="mitchell"), lutcore.lut_gemm(a, b, units=approx.mitchell()))
    assert not np.array_equal(lutcore.lut_gemm(a, b, units="mitchell"), lutcore.lut_gemm(a, b))
    # K = 0 through a QLinear is zeros, also into an out
    for units in (None, "mitchell"):
        q = QLinear(np.zeros((0, 4), np.float32), units)
        assert np.array_equal(q(np.zeros((3, 0), np.float32)), np.zeros((3, 4), np.float32))
        o = np.full((3, 4), 7.5, np.float32)
        assert q(np.zeros((3, 0), np.float32), out=o) is o and np.all(o == 0)
    raises(TypeError, "threads", QLinear, np.ones((4, 4), np.float32), None, 32, "x")
    # float64 matmul checks out like float32
    f = np.ones((2, 2))
    raises(ValueError, "out", matmul, f, f, out=np.zeros((3, 2, 2)), accumulate=True)
    raises(TypeError, "out", matmul, f, f, out=[[0, 0], [0, 0]])
    raises(ValueError, "out", matmul, f, f, out=np.zeros((2, 2), np.int32))
    # an np.matrix out of the element-wise functions
    class Sub(np.ndarray):                                              # any subclass, as np.matrix
        pass
    mo = np.zeros((2, 2), np.float32).view(Sub)
    assert lutcore.fp16_round(np.ones((2, 2), np.float32), out=mo) is mo and np.all(mo == 1)
    # units names and tables
    raises(TypeError, "name", lutcore.Units, lutcore.Units.exact().mul, name=5)
    raises(TypeError, "table_or_fn", lutcore.Units.from_mul, lambda x, y: (x * y).astype(np.float64))
    # device plans refuse a misspelt key
    from lutcore.pipeline.arch import ArchSpec
    spec = ArchSpec.from_config({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
                                 "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 50})
    raises(ValueError, "memory", plan_stages, spec, [{"id": "a", "memory": 1}, {"id": "b"}])


def test_torn_checkpoint_is_found_on_resume(tmp_path):
    tr = Trainer(tiny())
    tr.train("hello world " * 20, seq_len=8, batch_size=2, max_steps=1)
    tr.save_checkpoint(tmp_path / "ck")
    w = tmp_path / "ck" / "model.safetensors"
    raw = bytearray(w.read_bytes())
    raw[-1] ^= 1                                                        # one weight changed after the save
    w.write_bytes(bytes(raw))
    raises(ValueError, "model.safetensors is not the file", Trainer.resume, tmp_path / "ck")
