"""Checkpoint files: config.json, safetensors (single file or sharded index),
and atomic directory writes (temporary directory, fsync, rename) so an
interrupted save never damages what was there."""
from __future__ import annotations

import contextlib
import fnmatch
import hashlib
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


def path_arg(path, name: str = "path") -> str:
    """A str or os.PathLike path as str; anything else (None, bytes) is a TypeError naming it."""
    if isinstance(path, (str, os.PathLike)):
        path = os.fspath(path)
        if isinstance(path, str):
            return path
    raise TypeError(f"{name}: expected a path (str or os.PathLike), got {type(path).__name__}")


def read_config(path) -> dict:
    path = path_arg(path)
    f = os.path.join(path, "config.json")
    if not os.path.isfile(f):
        raise FileNotFoundError(f"path: no config.json in {path!r}")
    return load_json(f)


def safetensors_files(path) -> dict[str, str]:
    """{tensor name: file} for a checkpoint directory."""
    from safetensors import safe_open
    path = path_arg(path)
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


def file_mode() -> int:
    """The mode an ordinary new file gets: 0666 less the process umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def target_dir(path, name: str = "path") -> str:
    """A directory to write into, checked: a str or os.PathLike path (not bytes), not an
    existing file, not under a file, and resolving as the OS resolves it (``missing/..``
    does not name the working directory)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a directory path (str or os.PathLike), got {type(path).__name__}")
    given = os.fspath(path)
    if not isinstance(given, str):
        raise TypeError(f"{name}: expected a str path, got {type(given).__name__}")
    full = os.path.abspath(given)
    if os.path.exists(given) != os.path.exists(full):
        raise ValueError(f"{name}: {given!r} does not name a directory (it resolves only after normalising "
                         f"to {full!r})")
    if os.path.exists(given) and not os.path.isdir(given):
        raise ValueError(f"{name}: {given!r} exists and is not a directory")
    p = os.path.dirname(full)
    while p and not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    if p and os.path.exists(p) and not os.path.isdir(p):
        raise ValueError(f"{name}: {given!r} lies under {p!r}, which is a file")
    return given


def sha256_file(fname) -> str:
    h = hashlib.sha256()
    with open(fname, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def atomic_dir(path, owned=MODEL_FILES, last=("config.json", "trainer.json")):
    """Yield a temporary directory (inside ``path``) to write a save's files into; on
    success fsync them and move them into ``path`` one by one, each with one atomic
    rename, ``last`` ones last (in that order; a reader that checks the last file's
    record of the others sees a torn save).  Then ``owned`` files (fnmatch patterns:
    an earlier save's index and shards) that this save did not write are removed.
    Nothing else in ``path`` is touched, and ``path`` itself is never replaced: a
    symlink, a mount point or the working directory stays what it is.  A failure
    before the first rename leaves ``path`` as it was (a directory this save created
    is removed again).  Refused up front: a path that is a file (or lies under one), that
    resolves only after normalising, or where one of the save's files is a directory."""
    path = target_dir(path)
    created = not os.path.exists(path)
    os.makedirs(path, exist_ok=True)
    try:
        tmp = tempfile.mkdtemp(prefix=".tmp-save-", dir=path)
    except BaseException:
        if created:
            shutil.rmtree(path, ignore_errors=True)
        raise
    try:
        yield tmp
        order = {n: i for i, n in enumerate(last)}
        new = sorted(os.listdir(tmp), key=lambda n: (order.get(n, -1), n))
        for n in new:
            dst = os.path.join(path, n)
            if os.path.isdir(dst) and not os.path.islink(dst):
                raise ValueError(f"path: {dst!r} is a directory, so this save cannot write its {n} there")
        mode = file_mode()
        for n in new:
            f = os.path.join(tmp, n)
            os.chmod(f, mode)              # safetensors writes 0600; a checkpoint file is an ordinary file
            _fsync_path(f)
        for n in new:
            os.replace(os.path.join(tmp, n), os.path.join(path, n))
        os.rmdir(tmp)
        for n in os.listdir(path):
            f = os.path.join(path, n)
            if n not in new and any(fnmatch.fnmatchcase(n, pat) for pat in owned) and os.path.isfile(f):
                os.remove(f)
        _fsync_path(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:                        # nothing of the user's was there
            shutil.rmtree(path, ignore_errors=True)
        raise
