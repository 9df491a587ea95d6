"""Checkpoint files: config.json, safetensors (single file or sharded index),
and atomic directory writes (temporary directory, fsync, rename) so an
interrupted save never damages what was there."""
from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import tempfile

import numpy as np

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def load_json(fname) -> dict:
    """A JSON object from ``fname``; anything else is a ValueError naming the file."""
    with open(fname, encoding="utf-8") as fh:
        try:
            obj = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{fname}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{fname}: expected a JSON object, got {type(obj).__name__}")
    return obj


def load_tensors(fname) -> dict:
    """Every tensor of a safetensors file (numpy); a damaged file is a ValueError naming it."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    try:
        return load_file(fname)
    except (SafetensorError, ValueError, TypeError) as e:
        raise ValueError(f"{fname}: not a readable safetensors file ({e})") from None


def read_config(path) -> dict:
    path = os.fspath(path)
    f = os.path.join(path, "config.json")
    if not os.path.isfile(f):
        raise FileNotFoundError(f"path: no config.json in {path!r}")
    return load_json(f)


def safetensors_files(path) -> dict[str, str]:
    """{tensor name: file} for a checkpoint directory."""
    from safetensors import safe_open
    path = os.fspath(path)
    idx = os.path.join(path, INDEX)
    if os.path.isfile(idx):
        wm = load_json(idx).get("weight_map", {})
        if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
            raise ValueError(f"{idx}: weight_map must map tensor names to file names")
        return {k: os.path.join(path, v) for k, v in wm.items()}
    single = os.path.join(path, SINGLE)
    if not os.path.isfile(single):
        raise FileNotFoundError(f"path: no {SINGLE} or {INDEX} in {path!r}")
    try:
        with safe_open(single, framework="numpy") as f:
            return {k: single for k in f.keys()}
    except Exception as e:                 # noqa: BLE001 - safetensors raises its own error types
        raise ValueError(f"{single}: not a readable safetensors file ({e})") from None


def _to_dtype(name, arr, dtype):
    if arr.dtype == dtype:
        return arr
    return arr.astype(dtype)


def read_safetensors(path, names=None, dtype=np.float32) -> dict:
    """Read (only) the named tensors, widening fp16/bf16 to ``dtype``."""
    from safetensors import safe_open
    files = safetensors_files(path)
    want = list(files) if names is None else list(names)
    missing = [n for n in want if n not in files]
    if missing:
        raise ValueError(f"checkpoint {os.fspath(path)!r} lacks tensors: {missing}")
    by_file: dict[str, list] = {}
    for n in want:
        by_file.setdefault(files[n], []).append(n)
    out = {}
    for fname, ns in by_file.items():
        try:
            with safe_open(fname, framework="numpy") as f:
                for n in ns:
                    out[n] = _to_dtype(n, f.get_tensor(n), dtype)
        except Exception as e:     # bf16 is not a numpy dtype: read through the raw bytes
            if "bfloat16" not in str(e) and "bf16" not in str(e).lower():
                if isinstance(e, (FileNotFoundError, PermissionError)):
                    raise
                raise ValueError(f"{fname}: not a readable safetensors file ({e})") from None
            out.update(_read_bf16(fname, ns, dtype))
    return out


def _read_bf16(fname, names, dtype):
    """Minimal safetensors reader for bfloat16 tensors (numpy has no bf16)."""
    import struct
    with open(fname, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
        base = 8 + n
        out = {}
        for name in names:
            meta = header[name]
            s, e = meta["data_offsets"]
            fh.seek(base + s)
            raw = fh.read(e - s)
            dt = meta["dtype"]
            if dt == "BF16":
                u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
                arr = u.view(np.float32)
            else:
                np_dt = {"F16": "<f2", "F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4"}[dt]
                arr = np.frombuffer(raw, np_dt)
            out[name] = arr.reshape(meta["shape"]).astype(dtype)
        return out


MODEL_FILES = ("config.json", SINGLE, INDEX, "model-*-of-*.safetensors")


def _fsync_path(p, flags=os.O_RDONLY):
    fd = os.open(p, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_dir(path, owned=MODEL_FILES):
    """Yield a temporary directory beside ``path`` to write into; on success fsync
    its files and put them in place.  Nothing of the user's is lost:

    * a new ``path``, or a directory holding only files this save writes or
      ``owned`` names (fnmatch patterns: files of an earlier save, such as the
      shards of a sharded checkpoint), is swapped whole: one rename, so a reader
      sees the old set or the new one, never a mix;
    * a directory holding anything else keeps it: the new files replace their
      namesakes one by one (each rename atomic), then ``owned`` files the new
      save does not write (a stale index or shard) are removed; nothing else is
      touched.

    A failure before that point leaves ``path`` as it was.  A ``path`` that is
    an existing file, or that does not resolve (``missing/..``), is refused."""
    given = os.fspath(path)
    path = os.path.abspath(given)
    if os.path.exists(given) != os.path.exists(path):
        raise ValueError(f"path: {given!r} does not name a directory (it resolves only after "
                         f"normalising to {path!r})")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"path: {given!r} exists and is not a directory")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)          # mkdtemp makes 0700; a checkpoint is an ordinary directory
    try:
        yield tmp
        new = sorted(os.listdir(tmp))
        for name in new:
            _fsync_path(os.path.join(tmp, name))
        ours = lambda n: n in new or any(fnmatch.fnmatchcase(n, pat) for pat in owned)    # noqa: E731
        if not os.path.exists(path):
            os.replace(tmp, path)
        elif all(ours(n) and os.path.isfile(os.path.join(path, n)) for n in os.listdir(path)):
            old = tempfile.mkdtemp(prefix=".old-" + os.path.basename(path) + "-", dir=parent)
            os.rmdir(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:                              # the user's files stay: ours go in one by one
            for name in new:
                os.replace(os.path.join(tmp, name), os.path.join(path, name))
            os.rmdir(tmp)
            for n in os.listdir(path):
                f = os.path.join(path, n)
                if n not in new and ours(n) and os.path.isfile(f):
                    os.remove(f)
            _fsync_path(path)
        _fsync_path(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
