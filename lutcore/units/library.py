"""A directory of circuits as a units library: every unit with its error metrics and cost.

Design: ``library(DIR)`` walks DIR (sorted, hidden entries skipped) and builds one
entry per unit found:

    a units directory   (holds mul_lut.bin)   Units.load — its cost.json, if any
    FILE.v / FILE.sv                          Units.from_verilog (header / meta.json / Yosys proxy)
    FILE.c                                    Units.from_c, once per function of two 8-bit
                                              integers the file defines (EvoApproxLib: one)

Each entry has ``name``, ``spec`` (what ``lutcore.units.resolve`` takes: the directory,
the .v file, ``file.c:function``), ``path``, ``units``, ``metrics``
(``units.error_metrics()``), ``cost`` (``units.cost``) and ``error`` (None).  A circuit
that cannot be read (a syntax error, a crash of its C model, a bad signature, ...) is
named in a ``LibraryWarning`` and kept apart in ``Library.broken`` (its ``error`` says
why, ``units`` is None); the rest go on.  A ``.v``/``.sv``/``.c`` entry that is not a
regular file (a named pipe, a device, a directory) is never opened: a ``LibraryWarning``
names it and it is skipped.  Two files of one circuit (EvoApproxLib ships
``X.c`` and ``X.v``: the same table under the same name) are one entry, the other file
in its ``duplicates``; ``X_pdk45.v`` (a netlist of PDK45 library cells that only the
cell library defines) is skipped when ``X.v`` or ``X.c`` is beside it.  Iterating a ``Library`` gives the good
entries, sorted by power (``cost["power_mw"]``; those without one last), then name.
A published figure that disagrees with the table warns as it loads
(``lutcore.units.cost.PublishedFigureWarning``) and the entry is kept.

    lib = library("circuits/")
    lib.format_table()       the table ``lutcore units DIR --table`` prints
    lib.plot("lib.png")      power against mae_pct: the library's own Pareto view
    lib.exact                the first entry whose table is exact (the energy reference), or None
"""
from __future__ import annotations

import dataclasses
import os
import warnings

__all__ = ["library", "Library", "LibraryEntry", "LibraryWarning"]


class LibraryWarning(UserWarning):
    """A circuit in a units library could not be read; it is skipped."""


@dataclasses.dataclass
class LibraryEntry:
    name: str
    spec: str
    path: str
    units: object = None
    metrics: dict | None = None
    cost: dict = dataclasses.field(default_factory=dict)
    error: str | None = None
    duplicates: list = dataclasses.field(default_factory=list)    # other specs of the same table and name

    @property
    def power_mw(self):
        return self.cost.get("power_mw")


class Library:
    """The good entries (iterate, index by position or name) and the broken ones (``broken``)."""

    def __init__(self, root, entries, broken):
        self.root = root
        self.entries = sorted(entries, key=lambda e: (e.power_mw is None, e.power_mw or 0.0, e.name, e.spec))
        self.broken = list(broken)

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)

    def __getitem__(self, key):
        if isinstance(key, str):
            for e in self.entries:
                if key in (e.name, e.spec):
                    return e
            raise KeyError(f"no unit {key!r} in the library {self.root!r} (units: "
                           f"{', '.join(e.name for e in self.entries) or 'none'})")
        return self.entries[key]

    @property
    def units(self) -> list:
        return [e.units for e in self.entries]

    @property
    def exact(self):
        return next((e for e in self.entries if e.units.is_exact), None)

    def __repr__(self):
        return f"Library({self.root!r}, {len(self.entries)} units, {len(self.broken)} broken)"

    def format_table(self) -> str:
        def num(v, fmt):
            return "-" if v is None else format(v, fmt)
        head = ("unit", "power mW", "area um2", "delay ns", "mae%", "wce%", "ep%", "exact", "cost from", "spec")
        rows = [head]
        for e in self.entries:
            c, m = e.cost, e.metrics
            src = c.get("source", "-")
            if "cells" in c and "area_um2" not in c:
                src = f"Yosys proxy: {c['cells']} cells" + (f", {c['transistors']} transistors"
                                                           if "transistors" in c else "")
            rows.append((e.name, num(c.get("power_mw"), ".4g"), num(c.get("area_um2"), ".5g"),
                         num(c.get("delay_ns"), ".3g"), f"{m['mae_pct']:.4g}", f"{m['wce_pct']:.4g}",
                         f"{m['ep_pct']:.4g}", "yes" if e.units.is_exact else "no", src[:60],
                         os.path.relpath(e.spec, self.root) if not os.path.isabs(e.spec) or
                         e.spec.startswith(os.path.abspath(self.root)) else e.spec))
        w = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"units library {self.root}: {len(self.entries)} unit(s), sorted by power"
                 + (f"; {len(self.broken)} broken, skipped" if self.broken else "")]
        for i, r in enumerate(rows):
            lines.append("  ".join(x.ljust(w[j]) if j in (0, 7, 8, 9) else x.rjust(w[j])
                                   for j, x in enumerate(r)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * x for x in w))
        for e in self.broken:
            lines.append(f"broken: {e.spec}: {e.error}")
        return "\n".join(lines)

    def plot(self, png) -> str:
        """Power against mae_pct of every entry with a power figure -> ``png`` (written atomically)."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from lutcore._io import atomic_file
        pts = [e for e in self.entries if e.power_mw is not None]
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        for e in pts:
            ax.scatter(e.metrics["mae_pct"], e.power_mw, marker="*" if e.units.is_exact else "o",
                       s=90 if e.units.is_exact else 30, color="#c0504d" if e.units.is_exact else "#4f81bd")
            ax.annotate(e.name, (e.metrics["mae_pct"], e.power_mw), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xlabel("mean absolute error, % of 2^16 (mae_pct)")
        ax.set_ylabel("power (mW, as published or stated)")
        missing = len(self.entries) - len(pts)
        ax.set_title(f"units library {os.path.basename(os.path.normpath(self.root))}: {len(pts)} unit(s)"
                     + (f" ({missing} without a power figure not shown)" if missing else ""), fontsize=9)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with atomic_file(png) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        return png


def _not_regular(path):
    """None for a regular file (or a symlink to one), else what it is: a circuit file is read
    only when it is one (opening a named pipe would wait for a writer forever)."""
    import stat
    from lutcore.units.hdl import _file_kind
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    return None if stat.S_ISREG(st.st_mode) else _file_kind(st.st_mode)


def _circuits(root):
    """Yield (kind, path) under ``root``: ("dir", units directory) / ("v", file) / ("c", file),
    or ("skip", a .v/.sv/.c entry that is not a regular file: what it is)."""
    from lutcore.units import MUL_FILE
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        if MUL_FILE in files:
            dirs[:] = []                                   # a units directory is one unit
            yield "dir", d
            continue
        for f in sorted(files):
            if f.startswith("."):
                continue
            low = f.lower()
            stem = f[:-len("_pdk45.v")] if low.endswith("_pdk45.v") else None
            if stem is not None and (stem + ".v" in files or stem + ".c" in files):
                continue          # EvoApproxLib's PDK45 cell netlist of a circuit it also ships as .v / .c
            kind = "v" if low.endswith((".v", ".sv")) else "c" if low.endswith(".c") else None
            if kind is None:
                continue
            p = os.path.join(d, f)
            what = _not_regular(p)
            yield ("skip", (p, what)) if what else (kind, p)


def _c_functions(path):
    from lutcore.units import hdl
    with open(path, encoding="utf-8", errors="replace") as f:
        defs = hdl._c_definitions(f.read())
    cands = hdl._c_candidates(defs)
    return cands or [None]                                 # None: from_c chooses, or says what is wrong


def library(path, *, timeout: float = 60) -> Library:
    """Every unit under directory ``path`` (see the module docstring); ``timeout``: seconds
    each circuit may take (Yosys, or a C model's child process)."""
    from lutcore._io import path_arg
    from lutcore.units import Units
    from lutcore.units.hdl import _timeout_arg
    root = path_arg(path)
    timeout = _timeout_arg(timeout)             # checked here: each circuit would only fail with it
    if not os.path.isdir(root):
        raise FileNotFoundError(f"path: no such units library directory: {root!r}")
    good, bad = [], []
    for kind, p in _circuits(root):
        if kind == "skip":
            warnings.warn(f"units library {root}: skipping {p[0]}: {p[1]}, not a regular file", LibraryWarning,
                          stacklevel=2)
            continue
        todo = [(p, None)] if kind != "c" else [(p, fn) for fn in _safe_functions(p)]
        for f, fn in todo:
            spec = f if fn is None else f"{f}:{fn}"
            try:
                if kind == "dir":
                    u = Units.load(f)
                elif kind == "v":
                    u = Units.from_verilog(f, timeout=timeout)
                else:
                    u = Units.from_c(f, fn, timeout=timeout)
                same = next((e for e in good if e.units.digest == u.digest and e.name == u.name), None)
                if same is not None:                       # EvoApproxLib's .c and .v of one circuit
                    same.duplicates.append(spec)
                    if not same.cost and u.cost:
                        same.units, same.cost = u, dict(u.cost)
                    continue
                good.append(LibraryEntry(name=u.name, spec=spec, path=f, units=u, metrics=u.error_metrics(),
                                         cost=dict(u.cost)))
            except (ValueError, TypeError, OSError) as e:
                bad.append(LibraryEntry(name=os.path.basename(spec), spec=spec, path=f, error=str(e)))
                warnings.warn(f"units library {root}: skipping {spec}: {e}", LibraryWarning, stacklevel=2)
    return Library(root, good, bad)


def _safe_functions(path):
    try:
        return _c_functions(path)
    except OSError:
        return [None]
