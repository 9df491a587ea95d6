"""The ``lutcore`` command.  The only module that parses argv or prints."""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np


def _units_arg(s):
    from lutcore.units import resolve
    return resolve(s, mx=True)


def _runtime(units=None, threads=None, mixed_precision=None) -> str:
    """What runs, for a banner: units (name + digest, or float32), mixed precision, threads, SIMD."""
    import lutcore
    if isinstance(units, dict):                  # per layer
        from lutcore.units import assign
        units, u = None, f"per layer: {assign.describe(units)}"
    else:
        u = "float32 (no units)" if units is None else f"{units.name} (digest {units.digest[:16]})"
    if units is not None and getattr(units, "defaulted", ()):
        u += f", default {'+'.join(units.defaulted)}"
    mp = "" if mixed_precision is None else f"; mixed precision: {'fp16' if mixed_precision else 'off'}"
    nt = lutcore.get_num_threads() if threads is None else threads
    return f"units: {u}{mp}; threads: {nt}; SIMD: {lutcore.get_simd()}"


def _cost_lines(units):
    """The cost and published figures of a Units, for `lutcore units`."""
    c, lines = units.cost, []
    if c:
        figs = [f"{k} {c[k]:g}" for k in ("power_mw", "area_um2", "delay_ns", "cells", "transistors") if k in c]
        lines.append(f"  cost: {', '.join(figs) or 'none'} ({c.get('source', 'source not stated')})")
    if units.published:
        lines.append("  published: " + "  ".join(f"{k} {v:g}" for k, v in units.published.items()))
    return lines


def cmd_units_table(args) -> int:
    """`lutcore units DIR --table`: every circuit under DIR with metrics and costs, and the PNG."""
    import warnings
    from lutcore.units import library
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = library(args.path)
    for w in caught:
        print(f"lutcore units: warning: {w.message}", file=sys.stderr)
    print(lib.format_table())
    png = args.png or "units-library.png"
    lib.plot(png)
    print(f"chart (power against mae_pct): {png}")
    return 0


def _adder_circuit(path):
    """(file, module or function) when PATH is a circuit named as an EvoApproxLib adder is
    (``add8se_72D.v``, ``add16u_00G.c``, ``adders.c:add8u_006``), else None."""
    import re
    from lutcore.units.adders import evoapprox_adder_name
    m = re.fullmatch(r"(?s)(.+\.(?:s?v|c))(?::([A-Za-z_][\w$]*))?", path, re.I)
    if not m or not os.path.isfile(m.group(1)):
        return None
    name = m.group(2) or os.path.splitext(os.path.basename(m.group(1)))[0]
    return (m.group(1), m.group(2)) if evoapprox_adder_name(name) is not None else None


def cmd_units_adder(args, file, part) -> int:
    """`lutcore units add8se_72D.v --verify`: an adder circuit, its metrics and cost."""
    from lutcore.units.adders import Adder
    adder = Adder.from_c(file, part) if file.lower().endswith(".c") else Adder.from_verilog(file, part)
    print(repr(adder))
    if args.verify:
        rep = adder.verify()
        print(rep)
        if args.strict and not rep.ok:
            return 1
    elif adder.source:
        print(f"  from {adder.source}")
    if args.save:
        adder.save(args.save)
        print(f"saved to {args.save}")
    return 0


def cmd_units(args) -> int:
    from lutcore.units import resolve
    if args.table:
        return cmd_units_table(args)
    if args.png:
        raise ValueError("--png: goes with --table (a library directory's chart)")
    adder = _adder_circuit(args.path)
    if adder is not None:
        return cmd_units_adder(args, *adder)
    if os.path.isdir(args.path) and not os.path.exists(os.path.join(args.path, "mul_lut.bin")) and \
            any(n.lower().endswith((".v", ".sv", ".c")) for _, _, fs in os.walk(args.path) for n in fs):
        raise ValueError(f"{args.path}: a directory of circuits, not a units directory (no mul_lut.bin): "
                         f"list them with --table, or name one file")
    units = resolve(args.path, mx=True)
    print(repr(units))
    if getattr(units, "kind", None) == "mx":
        return _mx_units_report(units, args)
    acc = getattr(units, "accumulator", None)
    if acc is not None:
        print(f"  accumulator: {acc.bits}-bit {'signed' if acc.signed else 'unsigned'}, {acc.overflow}, "
              f"{'one product a step' if acc.order == 'sequential' else f'chunks of {acc.chunk}'}, "
              f"{'exact adder' if acc.adder is None else repr(acc.adder)}")
    if units.source:
        print(f"  from {units.source}")
    if args.verify:
        print("\n".join(_cost_lines(units)) or "  cost: none (units.with_cost(power_mw=...) states one)")
        rep = units.verify()
        print(rep)
        if args.strict and not rep.ok:
            return 1
    if args.save:
        units.save(args.save)
        print(f"saved to {args.save}")
    return 0


def _mx_units_report(units, args) -> int:
    """``lutcore units mx...``: what the MX units compute, the multiplier's metrics (--verify), --save."""
    from lutcore.units.fpmul import fp_report
    print(f"  {units.describe()}\n  multiplier: {units.mul.source or units.mul.name}")
    if args.verify:
        print("\n".join(_cost_lines(units)) or "  cost: none (units.with_cost(power_mw=...) states one)")
        print(fp_report(units.mul))
    if args.save:
        units.save(args.save)
        print(f"saved to {args.save}")
    return 0


def cmd_demo(args) -> int:
    """LUT GEMM and block-scaled matmul through the exact table and an approximate one."""
    import lutcore
    from lutcore.units import approx

    rng = np.random.default_rng(0)
    M = K = N = args.size
    a8 = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b8 = rng.integers(-128, 128, (K, N), dtype=np.int8)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    wq = lutcore.quantize(w, axis=0)
    ref = x @ w
    lutcore.show_config()
    print(f"\nshape (M, K, N) = ({M}, {K}, {N})")
    print(f"{'units':<14}{'lut_gemm GOP/s':>16}{'qmatmul GOP/s':>16}{'qmatmul rel. RMSE':>20}")
    for units in (lutcore.Units.exact(), approx.mitchell(), approx.truncated(6)):
        lutcore.lut_gemm(a8, b8, units)
        t0 = time.perf_counter()
        lutcore.lut_gemm(a8, b8, units)
        t1 = time.perf_counter()
        y = lutcore.qmatmul(x, wq, units)
        t2 = time.perf_counter()
        y = lutcore.qmatmul(x, wq, units)
        t3 = time.perf_counter()
        err = float(np.sqrt(np.mean((y - ref) ** 2) / np.mean(ref ** 2)))
        ops = 2.0 * M * N * K
        print(f"{units.name:<14}{ops / (t1 - t0) / 1e9:>16.1f}{ops / (t3 - t2) / 1e9:>16.1f}{err:>20.4f}")
    return 0



def _load_text(path, encoding="utf-8"):
    from lutcore.train.data import builtin_corpus, read_text
    if path is None:
        return builtin_corpus(), "built-in corpus (pydoc_data.topics)"
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--data: no such file {path!r}")
    text = read_text(path, encoding)
    if not text:
        raise ValueError(f"--data: {path!r} is empty")
    return text, path


def _tokenizer(path):
    from lutcore.tokenizer import Tokenizer
    return Tokenizer.from_file(path) if path and path != "bytes" else Tokenizer.bytes()


def _plot_losses(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [r["step"] for r in history]
    losses = [r["loss"] for r in history]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, losses, lw=1, label="train loss")
    if len(losses) >= 10:
        k = max(1, len(losses) // 20)
        sm = np.convolve(losses, np.ones(k) / k, mode="valid")
        ax.plot(steps[k - 1:], sm, lw=2, label=f"mean of {k}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title("lutcore train")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bar_opts():
    """A terminal gets a live bar; a log file or pipe gets a line every 10 s, not thousands."""
    return {} if sys.stderr.isatty() else {"mininterval": 10.0, "maxinterval": 60.0}


# What decides the bits of a training run besides the checkpoint's weights and optimizer: the
# flags `train` takes for them, their defaults, and where a checkpoint records each one
# (Trainer.train_config, the optimizer, the model's config).  A resume restores them; a flag
# given with another value is refused (``_resume_settings``).
TRAIN_DEFAULTS = {"seq_len": 128, "batch_size": 8, "grad_accum": 1, "clip": 1.0, "mixed_precision": False,
                  "micro_batch": None, "lr": 3e-3, "weight_decay": 0.01, "seed": 0, "d_model": 128, "layers": 3,
                  "d_state": 16, "unit_backward": False}


def _recorded_settings(trainer) -> dict:
    """{train flag (dest): its value in a resumed trainer}; flags an older checkpoint did not
    record are absent."""
    tc = trainer.train_config or {}
    cfg, o = trainer.model.config, trainer.optimizer
    rec = {"lr": o.lr, "weight_decay": o.weight_decay, "seed": trainer.seed,
           "unit_backward": bool(getattr(trainer.model, "unit_backward", False))}
    for flag, field in (("d_model", "d_model"), ("layers", "n_layer"), ("d_state", "d_state")):
        if hasattr(cfg, field):
            rec[flag] = getattr(cfg, field)
    for flag, field in (("seq_len", "seq_len"), ("batch_size", "batch_size"), ("grad_accum", "grad_accum"),
                        ("clip", "max_grad_norm"), ("mixed_precision", "mixed_precision"),
                        ("micro_batch", "micro_batch")):
        if field in tc:
            rec[flag] = tc[field]
    return rec


def _resume_settings(args, trainer) -> None:
    """Fill ``args``' bit-deciding flags: on --resume from the checkpoint (a flag given with
    another value is a ValueError naming it), else from TRAIN_DEFAULTS."""
    rec = _recorded_settings(trainer) if trainer is not None else {}
    for dest, default in TRAIN_DEFAULTS.items():
        given = getattr(args, dest)
        if dest not in rec:
            setattr(args, dest, default if given is None else given)
        elif given is None:
            setattr(args, dest, rec[dest])
        elif given != rec[dest]:
            flag = "--" + dest.replace("_", "-")
            was = "not given" if rec[dest] is None else rec[dest]
            raise ValueError(f"{flag}: the checkpoint {args.resume!r} was trained with {flag} {was}, got "
                             f"{given}: a resume continues the same run and keeps every setting that decides its "
                             f"bits (leave {flag} out, or start a new run without --resume)")


def _save_every(s: str):
    """--save-every: N steps ("200"), or a wall-clock interval ("90s", "5m", "1h"); 0: only at the
    end and on Ctrl-C.  Returns ("steps" | "seconds", amount) or None."""
    t = s.strip().lower()
    unit = {"s": 1, "m": 60, "h": 3600}.get(t[-1:]) if t else None
    num = t[:-1] if unit else t
    try:
        v = float(num) if unit else int(num)
    except ValueError:
        v = -1
    if not (v >= 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"expected N steps (e.g. 200), or a time such as 90s, 5m or 1h "
                                         f"(0: only at the end), got {s!r}")
    return None if v == 0 else (("seconds", v * unit) if unit else ("steps", v))


def _flag_units(flag, spec):
    """lutcore.units.resolve(spec), its error naming the flag (a typo is found before any work)."""
    from lutcore.units import resolve
    try:
        return resolve(spec, mx=True)
    except (ValueError, TypeError, FileNotFoundError) as e:
        raise ValueError(f"{flag}: {spec!r}: {e}") from None


def cmd_train(args) -> int:
    from tqdm import tqdm
    import lutcore
    from lutcore.models import MambaConfig, MambaLM
    from lutcore.train import Trainer
    from lutcore.train import data as _data
    from lutcore.train.dp import WorkerFailure

    from lutcore._io import writable_dir
    out = os.path.abspath(writable_dir(args.out, "--out"))       # before any work
    for spec in args.eval_units:
        if spec != "none":
            _flag_units("--eval-units", spec)
    if args.resume:
        from lutcore.evaluate import checkpoint_units
        units = (checkpoint_units(args.resume) if args.units is None
                 else None if args.units == "none" else args.units)
        trainer = Trainer.resume(args.resume, units=units, threads=args.threads)
        _resume_settings(args, trainer)
        tok = trainer.tokenizer
        model = trainer.model
        if args.tokenizer:
            print("note: --tokenizer is ignored with --resume (the checkpoint holds its tokenizer)")
        if args.data is None:                  # the text the checkpoint was trained on
            args.data = _saved_data(args.resume)
    else:
        _resume_settings(args, None)
        try:
            tok = _tokenizer(args.tokenizer)
        except (ValueError, FileNotFoundError) as e:
            raise ValueError(f"--tokenizer: {e}") from None
        units = None if args.units in (None, "none") else _flag_units("--units", args.units)
        cfg = MambaConfig(d_model=args.d_model, n_layer=args.layers, vocab_size=tok.vocab_size,
                          d_state=args.d_state, seed=args.seed)
        model = MambaLM(cfg, units=units, unit_backward=args.unit_backward, threads=args.threads)
        trainer = Trainer(model, tokenizer=tok, lr=args.lr, weight_decay=args.weight_decay, seed=args.seed,
                          threads=args.threads)
    text, source = _load_text(args.data, args.encoding)
    ids = _data.load_tokens(text, tok)
    n_hold = _data.held_out_size(len(ids), args.seq_len)
    if len(ids) < n_hold + 2:
        raise ValueError(f"--data: {len(ids)} tokens is too short (need more than {n_hold + 2} for a "
                         f"training window and a held-out window)")
    train_ids, held = ids[:-n_hold], ids[-n_hold:]
    fp = trainer.position.get("fingerprint")
    if args.resume and fp is not None and fp != _data.fingerprint(train_ids, args.seq_len, args.batch_size):
        raise ValueError(f"--data: the checkpoint {args.resume!r} stands in other training text than {source} "
                         f"(its data position would restart): give the --data it was trained on")
    per_epoch = -(-(len(train_ids) - 1) // args.seq_len)
    per_epoch = -(-per_epoch // args.batch_size)
    if args.epochs:
        epochs, max_steps = args.epochs, None
        total = epochs * per_epoch
    else:
        max_steps = trainer.global_step + args.steps if args.resume else args.steps
        epochs = -(-max_steps // per_epoch)
        total = max_steps
    workers = None
    micro = args.micro_batch
    if micro is not None and args.batch_size % micro:
        raise ValueError(f"--micro-batch: expected a divisor of --batch-size {args.batch_size}, got {micro}")
    if args.workers or args.ray_address:
        from lutcore.train.dp import check_ray_address
        if args.ray_address:
            check_ray_address(args.ray_address)
        if micro is None and args.resume and "micro_batch" in _recorded_settings(trainer):
            raise ValueError(f"--workers: the checkpoint {args.resume!r} was trained without --micro-batch, whose "
                             f"exact reduction is what gives workers the run's bits; resume it without --workers")
        micro = micro or 1
        n = args.workers or 1
        if n > args.grad_accum * args.batch_size // micro:
            raise ValueError(f"--workers: expected at most {args.grad_accum * args.batch_size // micro} (the "
                             f"micro-batches of a step: --grad-accum {args.grad_accum} x --batch-size "
                             f"{args.batch_size} / --micro-batch {micro}), got {n}")
    print(f"lutcore train: {type(model).__name__} {model.num_parameters():,} params "
          f"(d_model {model.config.d_model}, {model.config.n_layer} layers), {tok.name}, "
          f"{len(train_ids):,} training tokens from {source}\n  "
          + _runtime(getattr(model, "units", None), args.threads, args.mixed_precision)
          + ("; backward through the units" if getattr(model, "unit_backward", False) else ""))
    if args.workers or args.ray_address:
        from lutcore.train.dp import RayWorkers
        workers = RayWorkers(args.workers or 1, address=args.ray_address, threads=args.threads)
        print(f"  data-parallel: {workers.describe()}; micro-batches of {micro} row(s), exact reduction "
              f"(same bits for any worker count)")
    elif micro:
        print(f"  micro-batches of {micro} row(s), exact reduction (the bits of any --workers count)")
    ckpt = os.path.join(out, "checkpoint")

    def save():
        os.makedirs(out, exist_ok=True)
        trainer.save_checkpoint(ckpt)
        _write_held_out(ckpt, args.data, len(ids), n_hold, args.seq_len)

    every = args.save_every
    if every:
        print(f"  checkpoint every {every[1]:g} {'step(s)' if every[0] == 'steps' else 's'} to {ckpt}")
    bar = tqdm(total=total, initial=trainer.global_step, unit="step", dynamic_ncols=True, **_bar_opts())
    tok_s = []
    last_save = [time.monotonic()]

    def on_step(rec):
        tok_s.append(rec["tokens"] / max(rec["seconds"], 1e-9))
        bar.set_postfix(loss=f"{rec['loss']:.3f}", tok_s=f"{np.mean(tok_s[-20:]):,.0f}",
                        refresh=False)          # printed by update(), at its interval
        bar.update(1)
        if every and (rec["step"] % every[1] == 0 if every[0] == "steps"
                      else time.monotonic() - last_save[0] >= every[1]):
            save()                             # atomic: a kill during it leaves the previous save
            last_save[0] = time.monotonic()

    try:
        trainer.train(train_ids, epochs=epochs, seq_len=args.seq_len, batch_size=args.batch_size,
                      grad_accum=args.grad_accum, max_grad_norm=args.clip, mixed_precision=args.mixed_precision,
                      on_step=on_step, max_steps=max_steps, micro_batch=micro, workers=workers)
    except (KeyboardInterrupt, WorkerFailure) as e:   # the trainer stands at its last whole step
        bar.close()
        if workers is not None:
            workers.close()
        save()
        left = (f"--steps {max_steps - trainer.global_step}" if max_steps is not None
                else f"--epochs {epochs}")
        cont = " ".join([f"--resume {ckpt}", left] + [f"--{k.replace('_', '-')} {getattr(args, k)}"
                                                      for k in ("workers", "ray_address") if getattr(args, k)])
        what = "interrupted" if isinstance(e, KeyboardInterrupt) else "stopped"
        why = "" if isinstance(e, KeyboardInterrupt) else f" ({e})"
        print(f"lutcore train: {what} at step {trainer.global_step} of {total}{why}: checkpoint saved to {ckpt} "
              f"(continue with: lutcore train {cont})", file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    finally:
        if workers is not None:
            workers.close()
    bar.close()
    save()                            # before anything else can be interrupted
    try:
        return _after_train(args, trainer, model, tok, held, out, ckpt, lutcore)
    except KeyboardInterrupt:
        print(f"lutcore train: interrupted after training; checkpoint saved to {ckpt}", file=sys.stderr)
        return 130


def _after_train(args, trainer, model, tok, held, out, ckpt, lutcore) -> int:
    """What train does once the checkpoint is saved: held-out score, loss curve, a sample, the
    damage table."""
    ev = trainer.evaluate(held, seq_len=args.seq_len, batch_size=args.batch_size)
    print(f"held-out: loss {ev['loss']:.4f}  perplexity {ev['perplexity']:.3f}  "
          f"bits/token {ev['bits_per_token']:.3f}  top-1 {ev['accuracy']:.3f}  ({ev['tokens']:,} tokens)")
    png = os.path.join(out, "loss.png")
    _plot_losses(trainer.history, png)
    print(f"checkpoint: {ckpt}\nloss curve: {png}")
    prompt = args.prompt if args.prompt is not None else tok.decode(held[:24])
    pids = tok.encode(prompt)
    if len(pids):
        gen = model.generate(pids, args.sample_tokens, temperature=0.0)
        print(f"greedy sample:\n{tok.decode(gen)}")
    if args.eval_units != ["none"]:
        # what the units do to the model just trained: the same held-out windows through each
        specs = ["none"] + [u for u in args.eval_units if u != "none"]
        if getattr(model, "units", None) is not None and model.units.digest not in \
                {lutcore.units.resolve(s, mx=True).digest for s in specs[1:]}:
            specs.append(model.units)                   # and the units it was trained through
        res = _damage_or_partial(model, held, specs, args.seq_len, tok, os.path.join(out, "eval"),
                                 threads=args.threads, batch_size=args.batch_size, cmd="train")
        if res is None:
            return 130
        print(_eval_report(res, os.path.join(out, "eval")))
    return 0


HELD_OUT_FILE = "heldout.json"


def _write_held_out(ckpt, data, n_tokens, n_hold, seq_len):
    """Which tokens ``train`` held out, so ``eval`` without --data scores the same split."""
    import json
    from lutcore._io import atomic_file
    rec = {"data": None if data is None else os.path.abspath(data), "tokens": int(n_tokens),
           "held_out": int(n_hold), "seq_len": int(seq_len)}
    with atomic_file(os.path.join(ckpt, HELD_OUT_FILE)) as tmp, open(tmp, "w") as f:
        json.dump(rec, f, indent=1)


def _saved_data(ckpt):
    """The --data a checkpoint ``train`` wrote was trained on (None: the built-in corpus)."""
    from lutcore._io import contained, load_json
    f = contained(ckpt, HELD_OUT_FILE)
    return load_json(f).get("data") if os.path.isfile(f) else None


def _held_out(ckpt, tok):
    """(held-out token ids, description, the seq_len train used) of a checkpoint ``train`` wrote."""
    from lutcore._io import contained, load_json
    from lutcore.train.data import held_out_size, load_tokens
    f = contained(ckpt, HELD_OUT_FILE)
    rec = load_json(f) if os.path.isfile(f) else {"data": None, "held_out": None, "seq_len": 128}
    text, source = _load_text(rec.get("data"))
    ids = load_tokens(text, tok)
    if rec.get("tokens") not in (None, len(ids)):
        raise ValueError(f"{f}: train saw {rec['tokens']} tokens of {source}, now it has {len(ids)} (the file "
                         f"changed?): pass --data")
    n = rec.get("held_out") or held_out_size(len(ids), rec.get("seq_len") or 128)
    return ids[-n:], f"held-out split of {source} (last {n:,} tokens)", rec.get("seq_len")


def _damage(model, data, specs, seq_len, tok, threads=None, batch_size=8, attention=False):
    """evaluate_units with a progress bar over units x windows."""
    from tqdm import tqdm
    from lutcore.evaluate import evaluate_units
    bar = None                        # made at the first window, when the total is known

    def on_window(done, total, spec):
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="window", dynamic_ncols=True, desc=f"eval {spec}", **_bar_opts())
        bar.total = total
        bar.set_description(f"eval {spec}", refresh=False)
        bar.update(done - bar.n)

    try:
        return evaluate_units(model, data, units=specs, seq_len=seq_len, tokenizer=tok, threads=threads,
                              on_window=on_window, batch_size=batch_size, attention=attention)
    finally:
        if bar is not None:
            bar.close()


def _damage_or_partial(model, data, specs, seq_len, tok, out, cmd="eval", **kw):
    """``_damage``; on Ctrl-C the rows finished so far are written to ``out`` (eval.json
    marked partial), one line says so, and the result is None (the caller exits 130)."""
    from lutcore.evaluate import EvalInterrupted, write_report
    try:
        return _damage(model, data, specs, seq_len, tok, **kw)
    except EvalInterrupted as e:
        r = e.result
        paths = write_report(r, out)
        print(f"lutcore {cmd}: interrupted: {len(r.rows)} of {len(r.rows) + len(r.remaining)} row(s) finished, "
              f"written to {paths['json']} (marked partial; not scored: {' '.join(map(str, r.remaining))})",
              file=sys.stderr)
        return None


def _eval_report(res, out):
    from lutcore.evaluate import format_table, write_report
    paths = write_report(res, out)
    return f"{format_table(res)}\ntable: {paths['json']}\nchart: {paths['png']}"


def _trainer_from(path, units=None):
    """A checkpoint to sample or score: through ``units``, else the units it was trained with."""
    from lutcore.evaluate import load_checkpoint
    return load_checkpoint(path, units=units)


def cmd_generate(args) -> int:
    import lutcore
    from lutcore.evaluate import load_checkpoint
    if not args.checkpoint:
        raise ValueError("generate: --checkpoint DIR (a lutcore checkpoint) or --model DIR (a Hugging Face "
                         "directory) is required")
    if args.stages != 1 or args.ray or args.allow_empty_stages:
        raise ValueError("--stages, --ray, --allow-empty-stages: pipeline stages are for --model (a Hugging Face "
                         "directory), not --checkpoint")
    if args.tokenizer:
        raise ValueError("--tokenizer: a --checkpoint holds its tokenizer; --tokenizer is for --model")
    tr = load_checkpoint(args.checkpoint, units=args.units, threads=args.threads)
    model, tok = tr.model, tr.tokenizer
    units = getattr(model, "units", None)
    origin = ("the checkpoint's" if args.units is None else "--units") if units is not None else (
        "the checkpoint was trained in float32" if args.units is None else "--units none")
    print(f"lutcore generate: {type(model).__name__} {model.num_parameters():,} params from {args.checkpoint}, "
          f"{tok.name}\n  {_runtime(units, args.threads)} ({origin})", file=sys.stderr)
    pids = tok.encode(args.prompt)
    if len(pids) == 0:
        raise ValueError("--prompt: empty after tokenization")
    gen = model.generate(pids, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                         top_p=args.top_p, seed=args.seed)
    print(tok.decode(gen))
    return 0


def _model_data(args):
    """--checkpoint / --model and --data of eval and search -> (path, data, description,
    seq_len, tokenizer or None, the checkpoint's trained units or None); a checkpoint is opened
    here, once, and its OpenCheckpoint is the "path" evaluate_units / search_lm take."""
    from lutcore.evaluate import open_checkpoint
    seq_len, trained = args.seq_len, None
    if args.checkpoint:
        ck = open_checkpoint(args.checkpoint, threads=args.threads)       # the one read of its files
        path, trained, tok = ck, ck.trained, ck.tokenizer
        if args.data is None:
            data, source, train_len = _held_out(ck.path, tok)
            seq_len = seq_len or train_len
        else:
            data, source = _load_text(args.data)
    else:
        if args.data is None:
            raise ValueError("--data: required with --model (a text file to score)")
        path, tok = args.model, None
        data, source = _load_text(args.data)
    return path, data, source, seq_len, tok, trained


def _search_units(specs, powers, reference=None):
    """--units and --reference of search: specs, units directories and library directories
    (every circuit under them, with their costs), with --power NAME=MW stating a cost (of a
    candidate or of the reference) -> (units, the reference Units or None)."""
    import warnings
    from lutcore.units import resolve
    stated = {}
    for item in powers or ():
        name, sep, mw = item.partition("=")
        try:
            stated[name] = float(mw)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ValueError(f"--power: expected SPEC=MILLIWATTS (e.g. mitchell=0.12), got {item!r}")
        if not math.isfinite(stated[name]) or stated[name] < 0:
            raise ValueError(f"--power: expected a finite power >= 0 mW, got {item!r}")
    out, used = [], set()

    def resolve_flag(flag, spec):               # its ValueError / TypeError naming the flag and the spec
        try:
            return resolve(spec, mx=True)
        except (ValueError, TypeError) as e:
            raise type(e)(f"{flag} {spec}: {e}") from None

    def stated_cost(u, *keys):
        for k in keys:
            if k in stated:
                used.add(k)
                return u.with_cost(power_mw=stated[k], source="stated by --power")
        return u
    for spec in specs:
        if os.path.isdir(spec) and not os.path.exists(os.path.join(spec, "mul_lut.bin")):
            from lutcore.units import library
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                entries = library(spec)         # a broken circuit: named in a warning, the rest go on
            for w in caught:
                print(f"lutcore search: {w.message}", file=sys.stderr)
            out += [stated_cost(e.units, e.units.name) for e in entries if getattr(e, "units", None) is not None]
        else:
            u = resolve_flag("--units", spec)
            out.append(stated_cost(u, spec, u.name))
    ref = None
    if reference is not None:                    # its stated power, else the candidate's with its table
        ref = resolve_flag("--reference", reference)
        ref = stated_cost(ref, reference, ref.name)
    unknown = [n for n in stated if n not in used]
    if unknown:
        raise ValueError(f"--power: {', '.join(unknown)} names none of the --units or the --reference "
                         f"({', '.join(sorted({u.name for u in out + ([ref] if ref else [])}))})")
    return out, ref


def cmd_search(args) -> int:
    """The per-layer search of a language model: relative multiplier energy vs held-out loss."""
    from lutcore._io import writable_dir
    from lutcore.search_lm import search_lm
    if (args.model is None) == (args.checkpoint is None):
        raise ValueError("search: give --checkpoint DIR (lutcore's) or --model DIR (Hugging Face), one of them")
    writable_dir(args.out, "--out")
    units, reference = _search_units(args.units, args.power, args.reference)
    if args.adders:                              # every multiplier with every adder: (multiplier, adder) pairs
        from lutcore.search import pairs
        try:
            units = pairs(units, args.adders, args.accumulator)
        except (ValueError, TypeError) as e:
            raise type(e)(f"--adders: {e}") from None
    elif args.accumulator:
        raise ValueError("--accumulator: states the register of the --adders pairs; give --adders too (or name a "
                         "unit with its register: --units 'mitchell@16s:saturate')")
    path, data, source, seq_len, tok, _ = _model_data(args)
    print(f"lutcore search: {path}; data: {source}; {len(units)} units: "
          f"{', '.join(u.name for u in units)}; budget {args.budget}", file=sys.stderr)
    try:
        res = search_lm(path, data, units, budget=args.budget, seq_len=seq_len, tokenizer=tok,
                        threads=args.threads, layers=args.layers, reference=reference, seed=args.seed,
                        batch_size=args.batch_size, out=args.out, resume=args.resume,
                        progress=not args.no_progress, attention=args.attention)
    except KeyboardInterrupt:
        from lutcore.search import SEARCH_FILE
        f = os.path.join(args.out, SEARCH_FILE)
        print(f"lutcore search: interrupted: the points evaluated so far are in {f} (marked partial); "
              f"continue with --resume" if os.path.exists(f) else
              "lutcore search: interrupted before any point was evaluated", file=sys.stderr)
        return 130
    print(res.format_table(20))
    print(f"search: {os.path.join(args.out, 'search.json')}\nfront:  {os.path.join(args.out, 'front.png')}")
    return 0


def cmd_eval(args) -> int:
    """The damage table: one model and the same tokens through each --units spec."""
    from lutcore._io import writable_dir
    if (args.model is None) == (args.checkpoint is None):
        raise ValueError("eval: give --checkpoint DIR (lutcore's) or --model DIR (Hugging Face), one of them")
    writable_dir(args.out, "--out")                   # before any work: no rows computed to be discarded
    path, data, source, seq_len, tok, trained = _model_data(args)
    if args.checkpoint:
        specs = args.units or ["none" if trained is None else trained]
        print(f"lutcore eval: checkpoint {path}, trained through "
              f"{'float32' if trained is None else f'units {trained.name} ({trained.digest[:16]})'}; "
              f"data: {source}", file=sys.stderr)
    else:
        specs = args.units or ["none"]
        print(f"lutcore eval: {path}; data: {source}", file=sys.stderr)
    res = _damage_or_partial(path, data, specs, seq_len, tok, args.out, threads=args.threads,
                             batch_size=args.batch_size, attention=args.attention)
    if res is None:
        return 130
    print(_eval_report(res, args.out))
    return 0


def cmd_compare(args) -> int:
    """Float vs units-forward vs units-forward+backward training on identical seeds and batches."""
    from tqdm import tqdm
    import lutcore
    from lutcore.experiment import compare, format_table, write_report

    from lutcore._io import writable_dir
    writable_dir(args.out, "--out")                     # before any work
    tok = _tokenizer(args.tokenizer)
    if args.data is not None:
        _load_text(args.data, args.encoding)           # a missing or undecodable file fails before the bar
    from lutcore.units import resolve
    units = [] if args.units == ["none"] else [resolve(u, mx=True) for u in args.units]    # bad specs fail before the bar
    print(f"lutcore compare: {args.model}, float32 vs " + (", ".join(
        f"{u.name} (digest {u.digest[:16]}" + (f", default {'+'.join(u.defaulted)})" if u.defaulted else ")")
        for u in units) or "nothing (float only)") + f"; threads: {args.threads or lutcore.get_num_threads()}; "
          f"SIMD: {lutcore.get_simd()}", file=sys.stderr)
    bar = tqdm(total=args.steps * (1 + (3 if args.backward == "table" else 2) * len(units)), unit="step", dynamic_ncols=True, **_bar_opts())

    def on_step(rec):
        bar.set_description(rec["run"], refresh=False)
        bar.set_postfix(loss=f"{rec['loss']:.3f}", refresh=False)
        bar.update(1)

    try:
        res = compare(model=args.model, units=units, steps=args.steps, dim=args.dim, context=args.context,
                      batch=args.batch, layers=args.layers, heads=args.heads, lr=args.lr, seed=args.seed,
                      tokenizer=tok, data=args.data, on_step=on_step, weight_decay=args.weight_decay,
                      max_grad_norm=args.clip, two_pass=args.two_pass, threads=args.threads,
                      encoding=args.encoding, warmup=args.warmup, backward=args.backward)
    finally:
        bar.close()
    print(format_table(res))
    for w in res.warnings:
        print(f"lutcore compare: warning: {w}", file=sys.stderr)
    paths = write_report(res, args.out)
    print(f"\nreport: {paths['json']}\ncurves: {paths['png']}")
    return 0


def cmd_pipeline_generate(args) -> int:
    """``generate --model DIR``: a Hugging Face checkpoint split into --stages pipeline
    stages (local, or one Ray actor per stage with --ray); ``--checkpoint`` goes to cmd_generate."""
    if args.model is None:
        return cmd_generate(args)
    if args.checkpoint:
        raise ValueError("generate: give --checkpoint (a lutcore checkpoint) or --model (a Hugging Face "
                         "directory), not both")
    from lutcore._io import read_config
    from lutcore.pipeline import ArchSpec, Pipeline, StageFailure
    if args.stages < 1:
        raise ValueError(f"--stages: expected a positive int, got {args.stages}")
    cfg = read_config(args.model)
    spec = ArchSpec.from_config(cfg)
    if args.stages > spec.layers and not args.allow_empty_stages:
        raise ValueError(f"--stages: {args.stages} stages for a {spec.layers}-layer model would leave "
                         f"{args.stages - spec.layers} stage(s) without a layer; use at most {spec.layers} "
                         f"(or --allow-empty-stages)")
    tok = _model_tokenizer(args.model, args.tokenizer, spec.vocab)
    pids = tok.encode(args.prompt)
    if len(pids) == 0:
        raise ValueError("--prompt: empty after tokenization")
    eos = cfg.get("eos_token_id")
    units = None if args.units in (None, "none", "float") else args.units
    devices = [{"id": f"stage{i}", "capacity": 1} for i in range(args.stages)]
    if args.ray:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ValueError("--ray: Ray is not installed (pip install 'lutcore[ray]')") from None
    try:
        with Pipeline.from_pretrained(args.model, devices=devices, units=units,
                                      transport="ray" if args.ray else "local", threads=args.threads) as pipe:
            from lutcore.units import resolve
            per = units is not None and str(units).lower().endswith(".json")
            print(f"lutcore generate: {pipe.describe()}\n  tokenizer: {tok.name}\n  "
                  f"{_runtime(pipe.assignment() if per else None if units is None else resolve(units, mx=True), args.threads)}",
                  file=sys.stderr)
            gen = pipe.generate(pids, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                                top_p=args.top_p, seed=args.seed, stop_ids=eos)
    except StageFailure as e:
        print(f"lutcore generate: error: {e}", file=sys.stderr)
        return 2
    print(tok.decode(gen))
    return 0


def _model_tokenizer(model_dir, choice, vocab):
    """The tokenizer for a Hugging Face directory: --tokenizer FILE or 'bytes', else its
    tokenizer.json.  Without one, byte ids are used only for a byte-sized vocabulary (256) —
    other vocabularies need a tokenizer or an explicit --tokenizer bytes."""
    from lutcore.tokenizer import Tokenizer
    if choice == "bytes":
        return Tokenizer.bytes()
    if choice:
        return Tokenizer.from_file(choice)
    from lutcore._io import contained
    tj = contained(model_dir, "tokenizer.json")
    if os.path.isfile(tj):
        return Tokenizer.from_file(tj)
    if vocab != 256:
        raise ValueError(f"--model: no tokenizer.json in {model_dir!r}, and its vocabulary ({vocab:,} ids) is not "
                         f"byte-sized (256), so byte-level tokens would not be its tokens; pass --tokenizer FILE "
                         f"(a tokenizer.json), or --tokenizer bytes to feed byte ids anyway")
    print(f"lutcore generate: note: no tokenizer.json in {model_dir!r}: using byte-level tokens "
          f"(the vocabulary has 256 ids)", file=sys.stderr)
    return Tokenizer.bytes()


def cmd_inspect(args) -> int:
    """The architecture of a Hugging Face checkpoint directory, its tensors, and a stage plan."""
    from lutcore._io import read_config, safetensors_files
    from lutcore.pipeline import ArchSpec, plan_stages, stage_tensor_names, tensor_shapes

    spec = ArchSpec.from_config(read_config(args.path))
    print(spec.describe())
    want = tensor_shapes(spec)
    try:
        have = safetensors_files(args.path)
    except FileNotFoundError as e:
        print(f"tensors: {e}")
        have = None
    if have is not None:
        missing = [n for n in want if n not in have and n.replace("transformer.", "", 1) not in have]
        print(f"tensors: {len(want)} expected, {len(want) - len(missing)} present"
              + (f", missing: {missing[:8]}{' ...' if len(missing) > 8 else ''}" if missing else ""))
    devices = [{"id": f"stage{i}", "capacity": 1} for i in range(args.stages)]
    print(f"plan for {args.stages} equal stage(s) (float32 weight bytes):")
    if args.stages > spec.layers:
        print(f"  note: {args.stages} stages for {spec.layers} layers: {args.stages - spec.layers} stage(s) "
              f"would hold no layer")
    for st in plan_stages(spec, devices):
        nb = 4 * sum(int(np.prod(s)) for s in stage_tensor_names(spec, st).values())
        print(f"  {st}: {nb / 2**20:.2f} MiB")
    return 0


def _arg_type(kind, lo, lo_open=False, hi=None, hi_open=False):
    """An argparse type: an int or a finite float within the bounds (argparse names the flag)."""
    def parse(text):
        try:
            v = int(text) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an int' if kind is int else 'a number'}, got {text!r}")
        bad = (kind is float and not math.isfinite(v)) or (v <= lo if lo_open else v < lo)
        bad = bad or (hi is not None and (v >= hi if hi_open else v > hi))
        if bad:
            rng = f"{'>' if lo_open else '>='} {lo}" + (f" and {'<' if hi_open else '<='} {hi}" if hi is not None else "")
            raise argparse.ArgumentTypeError(f"expected a {'finite ' if kind is float else ''}value {rng}, got {text}")
        return v
    parse.__name__ = "int" if kind is int else "float"
    return parse


POS_INT, NONNEG_INT = _arg_type(int, 1), _arg_type(int, 0)
NONNEG_FLOAT, POS_FLOAT = _arg_type(float, 0.0), _arg_type(float, 0.0, lo_open=True)


def _show_defaults(parser) -> None:
    """Append "(default: X)" to the help of every option of ``parser`` and its subcommands
    that has a default and does not state it already (argparse's ArgumentDefaultsHelpFormatter
    skips options without a help text and repeats stated defaults)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                _show_defaults(sp)
        elif (a.option_strings and not any(a.default is v for v in (None, False, argparse.SUPPRESS))
              and a.help is not argparse.SUPPRESS and "default" not in (a.help or "")):
            shown = " ".join(map(str, a.default)) if isinstance(a.default, list) else a.default
            a.help = f"{a.help} (default: {shown})" if a.help else f"default: {shown}"


def _model_args(parser) -> None:
    """--checkpoint / --model / --data, as eval and search take them (``_model_data``)."""
    parser.add_argument("--checkpoint", metavar="DIR", help="a lutcore training checkpoint directory")
    parser.add_argument("--model", metavar="DIR", help="a Hugging Face checkpoint (llama, qwen2, mistral, gpt2, "
                                                       "mamba) with its tokenizer.json")
    parser.add_argument("--data", help="UTF-8 text file (default with --checkpoint: the held-out split train "
                                       "reported)")


def main(argv=None) -> int:
    from lutcore import __version__
    p = argparse.ArgumentParser(prog="lutcore", description="Neural networks on the CPU through declared 8-bit units.")
    p.add_argument("--version", action="version", version=f"lutcore {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    t = sub.add_parser("train", help="train a Mamba LM (defaults: built-in corpus, byte tokens, < 5 min)")
    t.add_argument("--data", help="UTF-8 text file (default: Python's bundled documentation topics)")
    t.add_argument("--tokenizer", help="a Hugging Face tokenizer.json (default: byte-level)")
    t.add_argument("--encoding", default="utf-8", help="the text encoding of --data (text that is not "
                                                       "valid in it is refused)")
    g = t.add_mutually_exclusive_group()
    g.add_argument("--steps", type=POS_INT, default=1000, help="optimizer steps (default 1000; with --resume: "
                                                                "steps more)")
    g.add_argument("--epochs", type=POS_INT, help="train whole epochs instead of --steps")

    def kept(dest, what=""):
        d = TRAIN_DEFAULTS[dest]
        return (f"{what} " if what else "") + ("(" if d is None or isinstance(d, bool) else f"(default {d}; ") \
            + "with --resume: the checkpoint's)"
    t.add_argument("--d-model", type=POS_INT, help=kept("d_model"))
    t.add_argument("--layers", type=POS_INT, help=kept("layers"))
    t.add_argument("--d-state", type=POS_INT, help=kept("d_state"))
    t.add_argument("--seq-len", type=POS_INT, help=kept("seq_len"))
    t.add_argument("--batch-size", type=POS_INT, help=kept("batch_size"))
    t.add_argument("--grad-accum", type=POS_INT, help=kept("grad_accum"))
    t.add_argument("--micro-batch", type=POS_INT, help="rows per micro-batch: the step's gradient is the exact "
                                                       "sum of the micro-batches' (same bits for any --workers; "
                                                       "default with --workers: 1) " + kept("micro_batch"))
    t.add_argument("--workers", type=POS_INT, help="data-parallel Ray workers (a local Ray unless --ray-address)")
    t.add_argument("--ray-address", metavar="ADDR", help="an existing Ray cluster (host:port, or auto)")
    t.add_argument("--lr", type=NONNEG_FLOAT, help=kept("lr"))
    t.add_argument("--weight-decay", type=NONNEG_FLOAT, help=kept("weight_decay"))
    t.add_argument("--clip", type=POS_FLOAT, help=kept("clip", "max global grad norm"))
    t.add_argument("--mixed-precision", action="store_true", default=None,
                   help=kept("mixed_precision", "fp16 compute view + dynamic loss scaling"))
    t.add_argument("--units", help="run matmuls through units: exact, a directory, or an approximate "
                                   "multiplier name (truncated:K, mitchell, reduced:BITS) (default: float32; "
                                   "with --resume the checkpoint's units)")
    t.add_argument("--unit-backward", action="store_true", default=None,
                   help=kept("unit_backward", "also run backward matmuls through the units"))
    t.add_argument("--out", default="lutcore-run", help="output directory (checkpoint/, loss.png)")
    t.add_argument("--resume", metavar="DIR", help="continue from a checkpoint directory: every setting that "
                                                   "decides the run's bits, and its --data, come from it")
    t.add_argument("--save-every", type=_save_every, default=_save_every("2m"), metavar="N|TIME",
                   help="also save the checkpoint (atomically) every N steps or every TIME (90s, 5m, 1h) of "
                        "training, so a killed run loses at most that; 0: only at the end and on Ctrl-C "
                        "(default 2m)")
    t.add_argument("--seed", type=NONNEG_INT, help=kept("seed"))
    t.add_argument("--threads", type=POS_INT, help="lutcore kernel threads (default: OpenMP's maximum)")
    t.add_argument("--prompt", help="prompt for the greedy sample (default: the start of the held-out text)")
    t.add_argument("--sample-tokens", type=NONNEG_INT, default=120)
    t.add_argument("--eval-units", nargs="+", default=["exact", "mitchell", "truncated:6"], metavar="SPEC",
                   help="after training, score the held-out text through float and these units (the damage "
                        "table; 'none' skips it; default: exact mitchell truncated:6)")
    t.set_defaults(fn=cmd_train)
    ge = sub.add_parser("generate", help="generate text from a checkpoint (--checkpoint) or a Hugging Face "
                                         "model split into pipeline stages (--model)")
    ge.add_argument("--checkpoint", help="a lutcore training checkpoint directory")
    ge.add_argument("--model", metavar="DIR", help="a Hugging Face checkpoint (llama, qwen2, mistral, gpt2, mamba)")
    ge.add_argument("--stages", type=POS_INT, default=1, help="with --model: pipeline stages (default 1)")
    ge.add_argument("--ray", action="store_true", help="with --model: one Ray actor per stage")
    ge.add_argument("--allow-empty-stages", action="store_true",
                    help="with --model: allow more --stages than the model has layers (the extra stages are empty)")
    ge.add_argument("--units", help="run matmuls through units (exact, a directory, or an approximate "
                                    "multiplier name: mitchell, truncated:K, reduced:BITS; 'none' = float32; with "
                                    "--model also per layer: an assignment FILE.json). "
                                    "Default: with --checkpoint the units it was trained through, with --model "
                                    "float32")
    ge.add_argument("--tokenizer", help="with --model: a tokenizer.json, or 'bytes' for byte-level tokens "
                                        "(default: the model directory's tokenizer.json)")
    ge.add_argument("--threads", type=POS_INT, help="lutcore kernel threads (default: OpenMP's maximum)")
    ge.add_argument("--prompt", required=True)
    ge.add_argument("--max-new-tokens", type=NONNEG_INT, default=200)
    ge.add_argument("--temperature", type=NONNEG_FLOAT, default=0.0)
    ge.add_argument("--top-k", type=POS_INT)
    ge.add_argument("--top-p", type=_arg_type(float, 0.0, lo_open=True, hi=1.0))
    ge.add_argument("--seed", type=NONNEG_INT)
    ge.set_defaults(fn=cmd_pipeline_generate)
    ins = sub.add_parser("inspect", help="architecture, tensors and a stage plan of a Hugging Face checkpoint")
    ins.add_argument("path", metavar="DIR")
    ins.add_argument("--stages", type=POS_INT, default=2, help="stages to plan for (default 2)")
    ins.set_defaults(fn=cmd_inspect)
    ev = sub.add_parser("eval", help="the damage table: loss, perplexity, bits/token, Δloss and top-1 agreement "
                                     "with float of one model through each units spec")
    _model_args(ev)
    ev.add_argument("--units", nargs="+", metavar="SPEC",
                    help="units specs, one row each: none (float32), exact, truncated:K, mitchell, reduced:BITS, "
                         "a directory, FILE.v or FILE.c:function, or per-layer units: an assignment FILE.json "
                         "(save_assignment's, or a {layer/prefix/glob: spec} object) (default: the units the "
                         "checkpoint was trained with; float for --model)")
    ev.add_argument("--seq-len", type=POS_INT, help="window length L (default: the model's context, at most 512; "
                                                    "the training seq_len for a checkpoint's held-out split)")
    ev.add_argument("--batch-size", type=POS_INT, default=8, help="windows per forward (lutcore checkpoints)")
    ev.add_argument("--attention", action="store_true", help="each --units spec also runs attention's own "
                                                             "products (q k^T, p v) through its unit")
    ev.add_argument("--threads", type=POS_INT)
    ev.add_argument("--out", default="lutcore-eval", help="output directory (eval.json, eval.png)")
    ev.set_defaults(fn=cmd_eval)
    se = sub.add_parser("search", help="which unit where: a per-layer search of a language model, relative "
                                       "multiplier energy against held-out loss (search.json, front.png)")
    _model_args(se)
    se.add_argument("--units", nargs="+", metavar="SPEC_OR_DIR", required=True,
                    help="candidate units: specs (exact, mitchell, truncated:K, reduced:BITS, FILE.v, "
                         "FILE.c:function, a units directory) or a library directory (every circuit under it); "
                         "each needs a power figure (a circuit header, meta.json, cost.json or --power)")
    se.add_argument("--power", nargs="+", metavar="SPEC=MW", help="state a unit's power in mW (e.g. exact=0.39 "
                                                                 "mitchell=0.12)")
    se.add_argument("--reference", metavar="SPEC", help="the unit energy is relative to (default: the exact one); "
                                                        "its power: --power SPEC=MW, else the candidate's with its "
                                                        "table")
    se.add_argument("--adders", nargs="+", metavar="FILE", help="adder circuits (add16se_X.c, add16u_Y.v, "
                                                               "FILE.c:function): a layer's choice is then a "
                                                               "(multiplier, adder) pair, its energy both")
    se.add_argument("--accumulator", metavar="SPEC", help="the pairs' register, e.g. 16s:saturate or "
                                                          "16s:wrap:chunks=8 (default: the adder's width, wrap)")
    se.add_argument("--attention", action="store_true", help="search attention's own products (q k^T, p v: "
                                                             "<attention module>.qk / .pv) as layers too")
    se.add_argument("--layers", nargs="+", metavar="KEY", help="layers to search: names, prefixes or globs "
                                                               "(default all; the rest stay exact)")
    se.add_argument("--budget", type=POS_INT, default=200, help="assignments evaluated at most (default 200)")
    se.add_argument("--seed", type=NONNEG_INT, default=0)
    se.add_argument("--seq-len", type=POS_INT, help="window length L (as eval)")
    se.add_argument("--batch-size", type=POS_INT, default=8, help="windows per forward (lutcore checkpoints)")
    se.add_argument("--threads", type=POS_INT)
    se.add_argument("--out", default="lutcore-search", help="output directory (search.json, front.png)")
    se.add_argument("--resume", action="store_true", help="continue from --out's search.json")
    se.add_argument("--no-progress", action="store_true", help="no progress bar")
    se.set_defaults(fn=cmd_search)
    c = sub.add_parser("compare", help="does training through the units hurt? float vs units fwd vs fwd+bwd")
    c.add_argument("--model", choices=("gpt", "mamba"), default="gpt")
    c.add_argument("--units", nargs="+", default=["exact"],
                   help="units specs: exact, truncated:K, mitchell, reduced:BITS or a directory "
                        "(default: exact; 'none' runs float only)")
    c.add_argument("--steps", type=POS_INT, default=600)
    c.add_argument("--warmup", type=NONNEG_INT, help="linear lr warmup steps, then a cosine decay to 0.1 x "
                                                     "--lr (default: min(100, steps / 10))")
    c.add_argument("--dim", type=POS_INT, default=32)
    c.add_argument("--context", type=POS_INT, default=32)
    c.add_argument("--batch", type=POS_INT, default=8)
    c.add_argument("--layers", type=POS_INT, default=2)
    c.add_argument("--heads", type=POS_INT, default=2, help="attention heads (gpt)")
    c.add_argument("--lr", type=NONNEG_FLOAT, default=0.01, help="peak learning rate")
    c.add_argument("--weight-decay", type=NONNEG_FLOAT, default=0.0)
    c.add_argument("--clip", type=POS_FLOAT, help="max global grad norm (default: no clipping)")
    c.add_argument("--two-pass", action="store_true", help="two-pass unit gradients (gpt)")
    c.add_argument("--backward", choices=("units", "table"), default="units",
                   help="'table' adds a third run per units spec: the backward through the unit's "
                        "gradient tables (fwd+table)")
    c.add_argument("--seed", type=NONNEG_INT, default=0)
    c.add_argument("--tokenizer", help="a Hugging Face tokenizer.json (default: byte-level)")
    c.add_argument("--data", help="UTF-8 text file (default: Python's bundled documentation topics)")
    c.add_argument("--encoding", default="utf-8", help="the text encoding of --data (text that is not "
                                                       "valid in it is refused)")
    c.add_argument("--threads", type=POS_INT, help="lutcore kernel threads (default: OpenMP's maximum)")
    c.add_argument("--out", default="lutcore-compare", help="output directory (compare.json, compare.png)")
    c.set_defaults(fn=cmd_compare)
    u = sub.add_parser("units", help="load, verify and fingerprint unit tables")
    u.add_argument("path", nargs="?", default="exact",
                   help="directory with mul_lut.bin/requant_lut.bin/relu_lut.bin, 'exact', "
                        "an approximate multiplier (truncated:K, mitchell, reduced:BITS), a Verilog "
                        "multiplier FILE.v (synthesised with Yosys) or a C model FILE.c[:function]; "
                        "a circuit named as EvoApproxLib's adders (add8se_72D.v, add16u_00G.c) is read "
                        "as an adder")
    u.add_argument("--verify", action="store_true", help="print the verification report")
    u.add_argument("--strict", action="store_true", help="exit 1 unless every table is exact")
    u.add_argument("--save", metavar="DIR", help="write the tables to DIR")
    u.add_argument("--table", action="store_true", help="PATH is a library directory: list every circuit "
                                                        "(.v, .c, units directory) under it with its error metrics "
                                                        "and cost, sorted by power, and draw power against mae_pct")
    u.add_argument("--png", metavar="FILE", help="with --table: the chart's file (default: units-library.png)")
    u.set_defaults(fn=cmd_units)
    d = sub.add_parser("demo", help="LUT GEMM / block-scaled matmul demo with throughput")
    d.add_argument("--size", type=POS_INT, default=512)
    d.set_defaults(fn=cmd_demo)
    sub.add_parser("config", help="print build and CPU configuration").set_defaults(
        fn=lambda a: (__import__("lutcore").show_config(), 0)[1])
    _show_defaults(p)
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:                          # a bare `lutcore`: what it can do, not an error
        p.print_help()
        return 0
    try:
        args = p.parse_args(argv)
    except SystemExit as e:               # --help (0) or a bad argument (2, already printed by argparse)
        return e.code if isinstance(e.code, int) else 2
    try:
        from lutcore import _threads
        with _threads.scope(getattr(args, "threads", None) or None):     # the command's count, resolved once
            return int(args.fn(args) or 0)
    except (ValueError, TypeError, KeyError, FileNotFoundError, OSError, ImportError) as e:
        print(f"lutcore {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:             # Ctrl-C where a command has nothing to save: no traceback
        print(f"lutcore {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
