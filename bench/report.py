#!/usr/bin/env python
"""Turn pytest-benchmark's ``--benchmark-json`` output into BENCHMARKS.md.

    python bench/report.py results.json [-o BENCHMARKS.md] [--stat min|median]

One markdown table per benchmark group (one kernel at one shape): a row per
(lutcore SIMD path, peer) pair with both times, their throughput (GOP/s from
``ops``, GB/s from ``bytes`` in extra_info) and the ratio peer / lutcore, so
> 1 means lutcore is faster.  When the two did different amounts of work
(different ``ops``/``bytes``, e.g. a peer timed on a row slice) the ratio is
of throughputs instead and is marked †.  Groups without a peer (or without a
lutcore entry) get dashes.  Groups whose entries record ``tokens`` (tokens one
call processes) get tokens/s columns, and groups whose entries record
``peak_mb`` (peak MiB of one call, lutbench.peak_rss) get peak-memory columns
and their ratio peer / lutcore; other groups keep the plain table.  The header records the date, the CPU model (from
/proc/cpuinfo), lutcore's config and the commands that produced the file.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys

DASH = "—"


def cpu_model() -> str:
    """'model name' from /proc/cpuinfo and the logical CPU count, or what platform knows."""
    model, n = None, 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "processor":
                    n += 1
                elif key in ("model name", "Model", "cpu model") and model is None:
                    model = val.strip()
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    return f"{model} ({n} logical CPUs)" if n else model


def fmt(v) -> str:
    if v is None:
        return DASH
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


class Entry:
    """One benchmark: impl, its time (s) under the chosen statistic, its work."""

    def __init__(self, bench: dict, stat: str):
        info = bench.get("extra_info") or {}
        self.info = info
        self.impl = str(info.get("impl") or bench.get("name") or "?")
        self.kernel = info.get("kernel")
        self.shape = info.get("shape")
        self.threads = info.get("threads")
        self.simd = info.get("simd")
        stats = bench.get("stats") or {}
        t = stats.get(stat)
        self.time = float(t) if isinstance(t, (int, float)) and t > 0 else None
        self.rounds = stats.get("rounds")
        self.tokens = info.get("tokens")
        self.peak_mb = info.get("peak_mb")
        if info.get("ops") is not None:
            self.work, self.unit = float(info["ops"]), "GOP/s"
        elif info.get("bytes") is not None:
            self.work, self.unit = float(info["bytes"]), "GB/s"
        else:
            self.work, self.unit = None, None

    @property
    def is_lutcore(self) -> bool:
        return self.impl == "lutcore"

    @property
    def ms(self):
        return None if self.time is None else self.time * 1e3

    @property
    def rate(self):
        """Throughput in G<unit>/s, or None."""
        if self.work is None or self.time is None:
            return None
        return self.work / self.time / 1e9

    def rate_str(self) -> str:
        r = self.rate
        return DASH if r is None else f"{fmt(r)} {self.unit}"

    @property
    def tokens_per_s(self):
        if not isinstance(self.tokens, (int, float)) or self.time is None:
            return None
        return self.tokens / self.time

    @property
    def peak(self):
        return float(self.peak_mb) if isinstance(self.peak_mb, (int, float)) else None


def ratio(lc: Entry | None, peer: Entry | None):
    """(ratio, is_throughput_ratio): peer time / lutcore time, or lutcore rate / peer rate
    when the two did different work.  (None, False) when it cannot be formed."""
    if lc is None or peer is None or lc.time is None or peer.time is None:
        return None, False
    if (lc.work is not None and peer.work is not None and lc.unit == peer.unit
            and lc.work != peer.work):
        return lc.rate / peer.rate, True
    return peer.time / lc.time, False


def _tok(e: Entry | None) -> str:
    v = None if e is None else e.tokens_per_s
    return DASH if v is None else fmt(v)


def _peak(e: Entry | None) -> str:
    v = None if e is None else e.peak
    return DASH if v is None else fmt(v)


def peak_ratio(lc: Entry | None, peer: Entry | None) -> str:
    if lc is None or peer is None or lc.peak is None or peer.peak is None or lc.peak <= 0:
        return DASH
    return f"{fmt(peer.peak / lc.peak)}×"


def group_table(name: str, entries: list[Entry]) -> list[str]:
    lcs = [e for e in entries if e.is_lutcore]
    peers = [e for e in entries if not e.is_lutcore]
    first = entries[0]
    kernel = first.kernel or name
    shape = first.shape or DASH
    has_tok = any(e.tokens_per_s is not None for e in entries)
    has_mem = any(e.peak is not None for e in entries)
    lc_extra = (["lutcore tokens/s"] if has_tok else []) + (["lutcore peak (MiB)"] if has_mem else [])
    peer_extra = (["peer tokens/s"] if has_tok else []) + (["peer peak (MiB)"] if has_mem else [])
    head = (["kernel", "shape", "threads", "SIMD path", "lutcore (ms)", "lutcore throughput"] + lc_extra
            + ["peer", "peer threads", "peer (ms)", "peer throughput"] + peer_extra + ["ratio"]
            + (["peak ratio"] if has_mem else []))
    align = (["---", "---", "--:", "---", "--:", "--:"] + ["--:"] * len(lc_extra)
             + ["---", "--:", "--:", "--:"] + ["--:"] * len(peer_extra) + ["--:"]
             + (["--:"] if has_mem else []))
    lines = [f"### {name}", "", "| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for lc in (lcs or [None]):
        for peer in (peers or [None]):
            r, thr = ratio(lc, peer)
            rs = DASH if r is None else f"{fmt(r)}×" + ("†" if thr else "")
            lc_threads = lc.threads if lc is not None and lc.threads is not None else DASH
            lc_cols = ([_tok(lc)] if has_tok else []) + ([_peak(lc)] if has_mem else [])
            peer_cols = ([_tok(peer)] if has_tok else []) + ([_peak(peer)] if has_mem else [])
            lines.append(
                "| " + " | ".join(str(x) for x in [
                    (lc.kernel if lc is not None and lc.kernel else kernel),
                    (lc.shape if lc is not None and lc.shape else shape),
                    lc_threads,
                    (lc.simd if lc is not None and lc.simd else DASH),
                    fmt(lc.ms) if lc is not None else DASH,
                    lc.rate_str() if lc is not None else DASH,
                    *lc_cols,
                    peer.impl if peer is not None else DASH,
                    (peer.threads if peer is not None and peer.threads is not None else DASH),
                    fmt(peer.ms) if peer is not None else DASH,
                    peer.rate_str() if peer is not None else DASH,
                    *peer_cols,
                    rs,
                    *([peak_ratio(lc, peer)] if has_mem else []),
                ]) + " |")
    lines.append("")
    calls, notes = [], []
    seen_calls = set()
    for e in lcs[:1] + peers:
        c = e.info.get("call")
        if c and (e.impl, c) not in seen_calls:
            seen_calls.add((e.impl, c))
            calls.append(f"{e.impl}: `{c}`")
        n = e.info.get("note")
        if n and n not in notes:
            notes.append(n)
    if calls:
        lines += ["Calls: " + " · ".join(calls), ""]
    for n in notes:
        lines += [f"Note: {n}", ""]
    return lines


# Issue 28's targets, read from the groups of one run: (row, target text, groups, lutcore impl,
# peer impl (None: lutcore's own throughput), test).  A test is ("ratio", x): peer time / lutcore
# time >= x over every group; ("rate", x): lutcore GOP/s >= x; ("slower", x): lutcore time /
# peer time <= x.  Rows whose groups are missing from the run are left out.
_B8 = ("conv 8192x27x64", "conv 8192x576x64", "conv 2048x1152x128", "conv 512x2304x256",
       "conv 128x4608x512", "linear 256x768x3072")
_B1 = ("conv 1024x27x64", "conv 1024x576x64", "conv 256x1152x128", "conv 64x2304x256",
       "conv 16x4608x512", "linear 1x768x3072")
TARGETS = [
    ("exact lut_gemm 1024³ vs torch._int_mm", "≥ 1.0×", ["lut_gemm[exact] 1024x1024x1024"], "lutcore", "torch",
     ("ratio", 1.0)),
    ("any-table (Mitchell) GEMM 256×1024×256", "≥ 200 GOP/s", ["lut_gemm[mitchell] 256x1024x256"], "lutcore", None,
     ("rate", 200.0)),
    ("Mitchell layers vs TorchApprox algorithm, batch 8", "≥ 25×", [f"torch layer[mitchell] {g}" for g in _B8],
     "lutcore", "torchapprox-algorithm", ("ratio", 25.0)),
    ("Mitchell layers vs TorchApprox algorithm, batch 1", "≥ 10×", [f"torch layer[mitchell] {g}" for g in _B1],
     "lutcore", "torchapprox-algorithm", ("ratio", 10.0)),
    ("first conv (K = 27), exact, vs torch float, batch 8", "≤ 1.5× slower", ["torch layer[exact] conv 8192x27x64"],
     "lutcore", "torch float32", ("slower", 1.5)),
    ("first conv (K = 27), exact, vs torch float, batch 1", "≤ 1.5× slower", ["torch layer[exact] conv 1024x27x64"],
     "lutcore", "torch float32", ("slower", 1.5)),
    ("AdamW (wd 0.01) vs torch fused, 1 × 10M", "≥ 1.0×", ["AdamW step 1x10000000"], "lutcore", "torch fused",
     ("ratio", 1.0)),
    ("AdamW (wd 0.01) vs torch fused, 100 × 100k", "≥ 1.0×", ["AdamW step 100x100000"], "lutcore", "torch fused",
     ("ratio", 1.0)),
    ("Mamba block fwd+bwd vs transformers + mambapy", "≥ 10×", ["Mamba1Block fwd+bwd 2x512x768"], "lutcore",
     "transformers MambaBlock (mambapy scan)", ("ratio", 10.0)),
]


def _find(groups: dict, prefix: str, impl: str):
    for name, entries in groups.items():
        if name.startswith(prefix):
            for e in entries:
                if e.impl == impl and e.time is not None:
                    return e
    return None


def targets_table(groups: dict) -> list[str]:
    """Issue 28's targets (TARGETS) as measured by this run: a row each, the value (a range over
    the row's groups) and whether every group meets it."""
    rows = []
    for label, want, prefixes, lc_impl, peer_impl, (kind, x) in TARGETS:
        vals = []
        for pre in prefixes:
            lc = _find(groups, pre, lc_impl)
            peer = None if peer_impl is None else _find(groups, pre, peer_impl)
            if lc is None or (peer_impl is not None and peer is None):
                continue
            if kind == "rate":
                vals.append(lc.rate)
            elif kind == "slower":
                vals.append(lc.time / peer.time)
            else:
                vals.append(ratio(lc, peer)[0])
        vals = [v for v in vals if v is not None]
        if not vals:
            continue
        lo, hi = min(vals), max(vals)
        unit = " GOP/s" if kind == "rate" else "×"
        got = f"{fmt(lo)}{unit}" if len(vals) == 1 else f"{fmt(lo)}–{fmt(hi)}{unit} ({len(vals)} shapes)"
        met = hi <= x if kind == "slower" else lo >= x
        rows.append(f"| {label} | {want} | {got} | {'met' if met else '**not met**'} |")
    if not rows:
        return []
    return ["### Targets (issue 28), from this run", "",
            "| target | wanted | this run | |", "|---|---|---|---|", *rows, ""]


def _config_lines(meta: dict) -> list[str]:
    cfg = meta.get("lutcore_config")
    when = ""
    if cfg is None:  # json not written by bench/conftest.py: ask the installed lutcore now
        try:
            import lutcore
            cfg, when = lutcore.config(), " (read when the report was written, not recorded in the json)"
        except Exception as exc:  # noqa: BLE001 - the report must still be written
            return [f"- lutcore config: unavailable ({type(exc).__name__})"]
    bodies = "; ".join(f"{k}: {v}" for k, v in (cfg.get("kernel_bodies") or {}).items())
    return [
        f"- lutcore {cfg.get('version', '?')}{when}: OpenMP {'on' if cfg.get('openmp') else 'off'}, "
        f"default SIMD path `{cfg.get('simd', '?')}` (available: {', '.join(cfg.get('simd_available') or [])}), "
        f"CPU features {', '.join(cfg.get('cpu_flags') or []) or 'none detected'}, "
        f"default threads {cfg.get('default_threads', '?')}, audit rate {cfg.get('audit_rate', '?')}",
        f"- Kernel bodies: {bodies or '?'} (a higher path runs the best lower body)",
    ]


def render(data: dict, json_path: str, stat: str, out_path: str | None) -> str:
    meta = data.get("lutcore_bench") or {}
    groups: dict[str, list[Entry]] = {}
    for b in data.get("benchmarks") or []:
        groups.setdefault(b.get("group") or "(ungrouped)", []).append(Entry(b, stat))

    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    run = data.get("datetime") or "unknown"
    commit = data.get("commit_info") or {}
    report_cmd = f"python bench/report.py {json_path}" + (f" -o {out_path}" if out_path else "") + \
        (f" --stat {stat}" if stat != "min" else "")
    bench_cmd = meta.get("command") or ("python -m pytest bench/ --benchmark-only --benchmark-json="
                                        + json_path + "  (assumed: not recorded in the json)")
    versions = ", ".join(f"{k} {meta[k]}" for k in ("python", "numpy", "torch", "transformers", "mambapy")
                         if meta.get(k))
    pools = ", ".join(f"{p.get('internal_api')} {p.get('num_threads')}" for p in meta.get("threadpools") or [])

    lines = ["# lutcore benchmarks", ""]
    if meta.get("small"):
        lines += ["> **LUTCORE_BENCH_SMALL=1**: every dimension was divided by 8. These numbers only "
                  "show that the suite runs; they are not representative.", ""]
    lines += [
        f"- Date: benchmarks run {run}; report written {now}",
        f"- CPU: {cpu_model()} (from /proc/cpuinfo on the machine writing the report)",
        *_config_lines(meta),
        f"- Benchmark threads: {meta.get('threads', '?')} for lutcore, torch and OpenBLAS "
        f"(numpy ufuncs and integer matmul are single-threaded: their rows say 1)"
        + (f"; thread pools seen: {pools}" if pools else ""),
    ]
    other = meta.get("other_cpu_share")
    if isinstance(other, (int, float)):
        busy = other > 0.05
        lines.append(f"- Other processes used {100 * other:.0f}% of the machine's CPU time during the run"
                     + (" — **the machine was busy**: multi-threaded times are inflated, rerun on a "
                        "quiet machine" if busy else ""))
    if versions:
        lines.append(f"- Versions: {versions}")
    if commit.get("id"):
        lines.append(f"- Commit: {commit['id'][:12]}{' (with uncommitted changes)' if commit.get('dirty') else ''}")
    lines += [
        f"- Produced by: `{bench_cmd}` then `{report_cmd}`",
        f"- Times are the **{stat}** over each benchmark's rounds, in ms. Ratio = peer time / lutcore time "
        f"(> 1: lutcore is faster); † marks a throughput ratio (lutcore throughput / peer throughput), "
        f"used where the two did different amounts of work. GOP/s count 2·M·N·K per matmul; "
        f"GB/s count bytes read + written by the contract.",
    ]
    every = [e for es in groups.values() for e in es]
    if any(e.tokens_per_s is not None for e in every):
        lines.append("- tokens/s = tokens one call processes (batch × sequence) / its time.")
    methods = sorted({str(e.info.get("peak_method")) for e in every if e.peak is not None})
    if methods:
        lines.append("- Peak (MiB): resident memory one call needs above what its process held just before "
                     "it (inputs, weights, optimizer state and libraries excluded), measured for each "
                     "implementation in a fresh spawned process after a warm-up call "
                     f"({'; '.join(methods)}). Peak ratio = peer peak / lutcore peak (> 1: lutcore "
                     "needs less).")
    lines.append("")
    if not groups:
        lines += ["No benchmark results in this file (was it written with --benchmark-disable?).", ""]
    lines += targets_table(groups)
    for name, entries in groups.items():
        lines += group_table(name, entries)
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", help="pytest-benchmark --benchmark-json output")
    p.add_argument("-o", "--output", help="markdown file to write (default: stdout)")
    p.add_argument("--stat", choices=("min", "median"), default="min",
                   help="statistic to report (default: min — interference only adds time)")
    args = p.parse_args(argv)
    with open(args.json, encoding="utf-8") as f:
        data = json.load(f)
    text = render(data, args.json, args.stat, args.output)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.output} ({sum(1 for l in text.splitlines() if l.startswith('### '))} groups)",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
