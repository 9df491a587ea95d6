"""Checkpoint files: config.json, safetensors (single file or sharded index),
and atomic directory writes (temporary directory, fsync, rename) so an
interrupted save never damages what was there."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile

import numpy as np

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def read_config(path) -> dict:
    path = os.fspath(path)
    f = os.path.join(path, "config.json")
    if not os.path.isfile(f):
        raise FileNotFoundError(f"path: no config.json in {path!r}")
    with open(f) as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as e:
            raise ValueError(f"{f}: not valid JSON ({e})") from None


def safetensors_files(path) -> dict[str, str]:
    """{tensor name: file} for a checkpoint directory."""
    from safetensors import safe_open
    path = os.fspath(path)
    idx = os.path.join(path, INDEX)
    if os.path.isfile(idx):
        with open(idx) as fh:
            wm = json.load(fh).get("weight_map", {})
        return {k: os.path.join(path, v) for k, v in wm.items()}
    single = os.path.join(path, SINGLE)
    if not os.path.isfile(single):
        raise FileNotFoundError(f"path: no {SINGLE} or {INDEX} in {path!r}")
    with safe_open(single, framework="numpy") as f:
        return {k: single for k in f.keys()}


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
                raise
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


@contextlib.contextmanager
def atomic_dir(path):
    """Yield a temporary directory beside ``path``; on success fsync its files and
    swap it into place (the old directory is removed only after the rename)."""
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)          # mkdtemp makes 0700; a checkpoint is an ordinary directory
    try:
        yield tmp
        for name in os.listdir(tmp):
            fd = os.open(os.path.join(tmp, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        old = None
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=".old-" + os.path.basename(path) + "-", dir=parent)
            os.rmdir(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
