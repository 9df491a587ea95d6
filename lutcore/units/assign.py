"""Per-layer units: which unit runs which layer, shared by every front end.

Design: a front end (lutcore.torch, lutcore's GPT / MambaLM, the pipeline and
``lutcore eval``) knows its layer names; this module turns a *mapping*
``{key: spec}`` into ``{layer name: Units or None}`` (None: the layer computes
in float) and reads and writes assignments as JSON.  It knows no model.

Keys, tried in the mapping's order — the first key that matches a layer gives
its units:

* an exact layer name (``"layer3.0.conv1"``, ``"model.layers.3.mlp.down_proj"``);
* a module name that is a dotted prefix: it covers its submodules
  (``"layer3"`` covers ``"layer3.0.conv1"``, not ``"layer30"``);
* an ``fnmatch`` glob (``"layer3.*.conv2"``, ``"*"``), matched against the layer's
  name and every dotted prefix of it (a glob that names a module covers it too).

A key that matches no layer is a ValueError listing the layer names.  A spec is
anything ``lutcore.units.resolve`` takes (a Units, a built-in name, a units
directory, ``mul.v``, ``mul.c:function``), or None / ``"none"`` / ``"float"``:
that layer computes in float.  Each distinct spec is resolved once.  Layers no
key matches are left to the caller: front ends that *build* from a mapping
(``approximate``, ``GPT(units=...)``, ``Pipeline.from_pretrained``, ``lutcore
eval``) run them in float; ``set_units`` leaves their units as they are.

Assignment files (``save_assignment`` / ``load_assignment``)::

    {"format": "lutcore-assignment", "version": 1,
     "layers": {"conv1": {"name": "mitchell", "digest": "<sha256>"},          built-in: by name
                "fc":    {"name": "m8", "digest": "...", "path": "units/m8"}, a directory or circuit
                "head":  null}}                                             float

A ``path`` relative to the file is read relative to the file's directory.  Every
unit's digest is checked on load (a mismatch is a ValueError naming the layer and
the path).  A unit built in memory (no ``loaded_from``, not a built-in) is saved
only when ``units_dir=`` is given (its tables go there, referenced by path);
otherwise saving it is a ValueError naming the layer.  A JSON file that is a plain
``{key: spec}`` object (no ``"format"``) is read as a mapping.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Mapping

__all__ = ["Assignment", "FLOAT_SPECS", "is_float", "as_mapping", "covers", "match", "assign", "resolve_spec",
           "digest_of", "describe", "save_assignment", "load_assignment", "FORMAT"]

FORMAT = "lutcore-assignment"
FLOAT_SPECS = ("none", "float")
_GLOB = set("*?[")
_LIST = 60                      # layer names listed in an error at most


class Assignment(dict):
    """A resolved assignment {layer name: Units or None}, exact names only.  A part of a model
    (a pipeline stage) given one applies the entries for its own layers and ignores the rest."""


def is_float(spec) -> bool:
    """None, "none" or "float": the layer computes in float."""
    return spec is None or (isinstance(spec, str) and spec.strip().lower() in FLOAT_SPECS)


def resolve_spec(spec):
    """A spec -> Units (or MXUnits), or None for float."""
    from lutcore.units import resolve
    return None if is_float(spec) else resolve(spec, mx=True)


def as_mapping(units):
    """``units`` as a per-layer mapping (a dict in its order), or None when it is one spec.
    A ``.json`` path is an assignment file (``load_assignment``)."""
    if isinstance(units, Mapping):
        out = {}
        for k, v in units.items():
            if not isinstance(k, str):
                raise TypeError(f"units: mapping keys must be layer names, prefixes or globs (str), got "
                                f"{type(k).__name__} {k!r}")
            out[k] = v
        if not out:
            raise ValueError("units: an empty mapping assigns nothing; give {layer name or glob: units spec}")
        return out
    if isinstance(units, (str, os.PathLike)) and os.fspath(units).lower().endswith(".json"):
        return load_assignment(units)
    return None


def _prefixes(name: str):
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


ATTENTION_PRODUCTS = ("qk", "pv")     # attention's own products: "<attention module>.qk" / ".pv"


def is_attention(name: str) -> bool:
    """Whether a layer name is one of attention's own products (q k^T, p v)."""
    return name.rsplit(".", 1)[-1] in ATTENTION_PRODUCTS


def names_attention(key: str) -> bool:
    """Whether a mapping key names attention products: its last component is ``qk`` / ``pv`` (or a
    glob other than ``*`` matching one).  Only such keys cover them: ``"*"`` or a layer's prefix
    keeps meaning the weight matmuls, as it always has."""
    last = key.rsplit(".", 1)[-1]
    if last in ATTENTION_PRODUCTS:
        return True
    return bool(_GLOB & set(last)) and last != "*" and any(fnmatch.fnmatchcase(p, last) for p in ATTENTION_PRODUCTS)


def one_spec(units, names) -> "Assignment":
    """What one spec means over ``names``: every weight matmul through ``units`` (resolved, or None
    for float), attention's own products in float."""
    return Assignment((n, None if is_attention(n) else units) for n in names)


def covers(key: str, name: str) -> bool:
    """Whether mapping key ``key`` covers layer ``name`` (exact, dotted prefix or glob); an
    attention product only by a key that names one (``names_attention``)."""
    if key == name:
        return True
    if is_attention(name) and not names_attention(key):
        return False
    cands = _prefixes(name)
    if key in cands:
        return True
    return bool(_GLOB & set(key)) and any(fnmatch.fnmatchcase(c, key) for c in cands)


def _names_list(names) -> str:
    names = list(names)
    s = ", ".join(names[:_LIST])
    return s + (f", ... ({len(names) - _LIST} more)" if len(names) > _LIST else "")


def match(mapping: Mapping, names, *, what: str = "units") -> dict:
    """{layer name: the first key of ``mapping`` covering it} for the layers some key covers
    (in ``names``' order); a key covering no layer is a ValueError listing the names."""
    names = list(names)
    out, hit = {}, {}
    for k in mapping:
        if not isinstance(k, str):
            raise TypeError(f"{what}: mapping keys must be str, got {type(k).__name__} {k!r}")
        hit[k] = False
    for n in names:
        for k in mapping:
            if covers(k, n):
                hit[k] = True
                out.setdefault(n, k)
                break
    for k in mapping:                 # a key shadowed by an earlier one still names layers
        if not hit[k] and any(covers(k, n) for n in names):
            hit[k] = True
    bad = [k for k, h in hit.items() if not h]
    att = [k for k in bad if names_attention(k)]
    if att and not any(is_attention(n) for n in names):
        raise ValueError(f"{what}: key{'s' if len(att) > 1 else ''} {', '.join(map(repr, att))} name"
                         f"{'' if len(att) > 1 else 's'} attention products (.qk / .pv), and this model has no "
                         f"attention through units (its layers: {_names_list(names)})")
    if bad:
        raise ValueError(f"{what}: key{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))} match"
                         f"{'' if len(bad) > 1 else 'es'} no layer (a key is a layer name, a dotted prefix or an "
                         f"fnmatch glob); the layers are: {_names_list(names)}")
    return out


def _spec_key(spec):
    if isinstance(spec, (str, os.PathLike)):
        return ("s", os.fspath(spec))
    return ("o", id(spec))


def assign(mapping: Mapping, names, *, what: str = "units", default=None, fill: bool = False) -> dict:
    """{layer name: Units or None} from ``mapping`` over ``names``: the layers some key
    covers; with ``fill=True`` every name, the uncovered ones getting ``default``
    (a resolved Units or None).  Each distinct spec is resolved once; a spec that does
    not resolve is an error naming its key."""
    keys = match(mapping, names, what=what)
    resolved, by_key = {}, {}
    for k in dict.fromkeys(keys.values()):
        spec = mapping[k]
        sk = _spec_key(spec)
        if sk not in resolved:
            try:
                resolved[sk] = resolve_spec(spec)
            except (TypeError, ValueError, FileNotFoundError) as e:
                raise type(e)(f"{what}[{k!r}]: {e}") from None
        by_key[k] = resolved[sk]
    if fill:
        return Assignment((n, by_key[keys[n]] if n in keys else default) for n in names)
    return Assignment((n, by_key[keys[n]]) for n in names if n in keys)


def digest_of(assignment: Mapping) -> str:
    """One sha256 for a full assignment {layer: Units or None} (order-independent)."""
    rows = sorted((n, None if u is None else u.digest) for n, u in assignment.items())
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def describe(assignment: Mapping) -> str:
    """A short label: "all mitchell", or "mitchell x3, exact x2, float x1"."""
    counts = {}
    for u in assignment.values():
        name = "float" if u is None else u.name
        counts[name] = counts.get(name, 0) + 1
    if len(counts) == 1:
        return f"all {next(iter(counts))}"
    return ", ".join(f"{k} x{v}" for k, v in counts.items())


# ----------------------------------------------------------------------------- files

def _builtin(u) -> bool:
    from lutcore.units import approx
    if getattr(u, "grad_tables", None) is not None:     # a name would lose the attached gradient tables
        return False
    if not isinstance(u.name, str) or not approx.is_name(u.name):
        return False
    try:
        return approx.by_name(u.name).digest == u.digest
    except ValueError:
        return False


def _entry(name, u, base, units_dir, saved):
    from lutcore.units import Units
    from lutcore.units.mxunits import MXUnits
    if u is None:
        return None
    if not isinstance(u, (Units, MXUnits)):
        u = resolve_spec(u)
        if u is None:
            return None
    e = {"name": u.name, "digest": u.digest}
    if not _builtin(u):
        src = getattr(u, "loaded_from", None)
        if src is None:
            if units_dir is None:
                raise ValueError(f"save_assignment: layer {name!r} runs units {u.name!r} (digest {u.digest[:16]}) "
                                 f"built in memory, with no directory or circuit file to refer to: pass "
                                 f"units_dir= to save its tables there, or save them yourself (units.save(dir)) and "
                                 f"assign Units.load(dir)")
            if u.digest not in saved:
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(u.name))[:40] or "units"
                d = os.path.join(os.fspath(units_dir), f"{safe}-{u.digest[:12]}")
                u.save(d)
                saved[u.digest] = os.path.abspath(d)
            src = saved[u.digest]
        spec, sep, fn = _split_spec(src)
        if base is not None and os.path.isabs(spec):
            rel = os.path.relpath(spec, base)
            spec = spec if rel.startswith("..") else rel
        e["path"] = spec + sep + fn
    cost = {k: v for k, v in (getattr(u, "cost", None) or {}).items()}
    if cost:
        e["cost"] = cost
    return e


def _split_spec(src: str):
    """"dir", "mul.v", "mul.v:top", "mul.c:fn" -> (path, ":" or "", suffix)."""
    head, sep, tail = src.rpartition(":")
    if sep and head.lower().endswith((".c", ".v", ".sv")) and tail.isidentifier():
        return head, sep, tail
    return src, "", ""


def save_assignment(assignment, path, *, units_dir=None) -> str:
    """Write ``assignment`` ({layer or key: Units, spec or None}, or an object with an
    ``assignment()`` method) to JSON file ``path`` (atomically); returns the path.  See the
    module docstring for the format and for ``units_dir``."""
    from lutcore._io import atomic_file, path_arg
    if hasattr(assignment, "assignment") and callable(assignment.assignment):
        assignment = assignment.assignment()
    if not isinstance(assignment, Mapping):
        raise TypeError(f"assignment: expected a mapping {{layer: units}} or a model, got "
                        f"{type(assignment).__name__}")
    path = path_arg(path)
    base = os.path.dirname(os.path.abspath(path))
    saved = {}
    layers = {}
    for name, u in assignment.items():
        if not isinstance(name, str):
            raise TypeError(f"assignment: keys must be layer names (str), got {type(name).__name__} {name!r}")
        layers[name] = _entry(name, u, base, units_dir, saved)
    with atomic_file(path) as tmp, open(tmp, "w") as f:
        json.dump({"format": FORMAT, "version": 1, "layers": layers}, f, indent=1)
    return path


def load_assignment(path) -> dict:
    """{layer: Units or None} from a file ``save_assignment`` wrote (every digest checked),
    or the {key: spec} mapping of a plain JSON object (specs that are relative paths read
    relative to the file's directory)."""
    from lutcore._io import path_arg
    from lutcore.units import approx
    path = path_arg(path)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such assignment file") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable JSON assignment ({e})") from None
    base = os.path.dirname(os.path.abspath(path))

    def local(spec):
        p, sep, fn = _split_spec(spec)
        if not os.path.isabs(p) and os.path.exists(os.path.join(base, p)):
            p = os.path.join(base, p)
        return p + sep + fn

    if isinstance(doc, dict) and "format" not in doc:             # a plain mapping
        out = {}
        for k, v in doc.items():
            if v is not None and not isinstance(v, str):
                raise ValueError(f"{path}: {k!r}: expected a units spec (str) or null, got {type(v).__name__}")
            out[k] = v if v is None or is_float(v) or approx.is_name(v) else local(v)
        if not out:
            raise ValueError(f"{path}: an empty mapping assigns nothing")
        return out
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("layers"), dict):
        raise ValueError(f"{path}: expected a lutcore assignment ({{\"format\": {FORMAT!r}, \"layers\": {{...}}}}) "
                         f"or a {{layer: units spec}} object")
    if doc.get("version", 1) != 1:
        raise ValueError(f"{path}: assignment format version {doc.get('version')!r}; this lutcore reads version 1")
    cache, out = {}, {}
    for name, e in doc["layers"].items():
        if e is None:
            out[name] = None
            continue
        if not isinstance(e, dict) or not isinstance(e.get("digest"), str) or not isinstance(e.get("name"), str):
            raise ValueError(f"{path}: layer {name!r}: expected null or {{\"name\", \"digest\"[, \"path\"]}}, "
                             f"got {e!r}")
        if "path" in e:
            spec = local(e["path"])
            where = f"{spec} (from {path})"
        elif approx.is_name(e["name"]):
            spec, where = e["name"], f"built-in {e['name']!r} (from {path})"
        else:
            raise ValueError(f"{path}: layer {name!r}: units {e['name']!r} is neither a built-in name nor has a "
                             f"path to its tables")
        if spec not in cache:
            try:
                cache[spec] = resolve_spec(spec)
            except (TypeError, ValueError, FileNotFoundError) as err:
                raise type(err)(f"{path}: layer {name!r}: {err}") from None
        u = cache[spec]
        if u is None or u.digest != e["digest"]:
            raise ValueError(f"{path}: layer {name!r}: units at {where} have digest "
                             f"{'-' if u is None else u.digest[:16]}, the assignment records {e['digest'][:16]} "
                             f"(the tables changed since it was saved)")
        cost = e.get("cost")
        if isinstance(cost, dict) and cost and not getattr(u, "cost", None) and hasattr(u, "with_cost"):
            figs = {k: cost[k] for k in ("power_mw", "area_um2", "delay_ns") if isinstance(cost.get(k), (int, float))}
            if figs:
                cache[spec] = u = u.with_cost(**figs, source=cost.get("source") or f"recorded in {path}")
        out[name] = u
    return out
