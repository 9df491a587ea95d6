"""Checkpoint files: config.json, safetensors (single file or sharded index),
and crash-safe directory saves (``atomic_dir``: new files fsynced under new
names, one journal rename as the switch, then the usual names) so that a save
killed at any instant leaves one complete save readable (``saved_dir``).

Every file a loader reads from a units or checkpoint directory goes through
``contained``: names (a sharded index's weight_map entries) stay inside the
directory, and a symlink is followed only when it resolves inside it."""
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


def _hf_blob(root_real: str, target_real: str) -> bool:
    """A Hugging Face hub cache snapshot (``<repo>/snapshots/<rev>/``) links its files into
    ``<repo>/blobs/``: such a link stays inside the cached repository."""
    snaps = os.path.dirname(root_real)
    if os.path.basename(snaps) != "snapshots":
        return False
    blobs = os.path.join(os.path.dirname(snaps), "blobs")
    return os.path.commonpath([blobs, target_real]) == blobs


def contained(root, name, what: str | None = None) -> str:
    """``root/name`` for a file a loader reads from the directory ``root`` (a units directory,
    a lutcore checkpoint, a Hugging Face directory), checked to stay inside it.

    The rule (the same for every loader):
      * ``name`` is a relative path that stays inside ``root`` as written: an absolute path
        or one that climbs out (``../elsewhere/x.safetensors``) is refused;
      * a symlink (the file, or a directory on the way to it) is followed when its target
        resolves inside ``root`` (``root`` itself may be a symlink: its resolved directory
        is what counts), and refused when it points outside — except a Hugging Face hub
        cache snapshot's links into its own ``blobs/`` directory;
    each refusal is a ValueError naming the entry (``what``, default the file) and, for a
    symlink, its target.  A file that does not exist is returned as is (the caller says
    it is missing); a dangling symlink is judged by where it points."""
    root = path_arg(root, "root")
    label = what or repr(name)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{label}: expected a file name inside {root!r}, got {name!r}")
    norm = os.path.normpath(name)
    if os.path.isabs(name) or norm == os.pardir or norm.startswith(os.pardir + os.sep):
        raise ValueError(f"{label}: {name!r} lies outside the directory {root!r} (a file it names must be "
                         f"inside it)")
    f = os.path.join(root, name)
    root_real, real = os.path.realpath(root), os.path.realpath(f)
    if os.path.commonpath([root_real, real]) != root_real and not _hf_blob(root_real, real):
        raise ValueError(f"{f}: a symlink to {real!r}, outside the directory {root!r} (a file of a units or "
                         f"checkpoint directory may link only to a file inside it)"
                         + (f"; named by {what}" if what else ""))
    return f


def read_config(path) -> dict:
    path = path_arg(path)
    f = contained(saved_dir(path), "config.json")
    if not os.path.isfile(f):
        raise FileNotFoundError(f"path: no config.json in {path!r}")
    return load_json(f)


def safetensors_files(path) -> dict[str, str]:
    """{tensor name: file} for a checkpoint directory."""
    from safetensors import safe_open
    path = saved_dir(path_arg(path))
    idx = contained(path, INDEX)
    if os.path.isfile(idx):
        wm = load_json(idx).get("weight_map", {})
        if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
            raise ValueError(f"{idx}: weight_map must map tensor names to file names")
        return {k: contained(path, v, f"{idx}: weight_map entry {k!r}") for k, v in wm.items()}
    single = contained(path, SINGLE)
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


def writable_dir(path, name: str = "out") -> str:
    """Check, before any work, that an output directory can be written: ``target_dir``'s
    checks (not a file, not under one, no ``missing/..``), then a probe — the directory is
    created (with any missing parents) and a file is created and removed in it, so a
    read-only place, one without permission, or a pseudo file system (``/proc``) is found
    now; what the probe created is removed again.  Failure: a ValueError naming ``name``,
    the path and the reason.  Returns the path as given."""
    given = target_dir(path, name)
    full = os.path.abspath(given)
    made, p = [], full
    while not os.path.exists(p):
        made.append(p)
        p = os.path.dirname(p)
    try:
        try:
            os.makedirs(full, exist_ok=True)
        except OSError as e:
            raise ValueError(f"{name}: cannot create the directory {given!r} ({e.strerror or e})") from None
        try:
            fd, probe = tempfile.mkstemp(prefix=".lutcore-probe-", dir=full)
            os.close(fd)
            os.remove(probe)
        except OSError as e:
            raise ValueError(f"{name}: cannot write into the directory {given!r} ({e.strerror or e})") from None
    finally:
        for d in made:                     # deepest first: what did not exist before
            try:
                os.rmdir(d)
            except OSError:
                pass
    return given


def sha256_file(fname) -> str:
    h = hashlib.sha256()
    with open(fname, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


JOURNAL = ".lutcore-save.json"        # present only while a save switches its files into place
TMP_PREFIX = ".tmp-save-"

# Test hook: called with a tag ("journal", "place <file>", "remove <file>", "unjournal")
# before each step of a save that changes what ``path`` holds, so a test can end the
# process at each one (os._exit: no cleanup runs, as with kill -9).
_crash_hook = None


def _step(tag: str) -> None:
    if _crash_hook is not None:
        _crash_hook(tag)


def _journal(path):
    """The pending switch recorded in ``path`` — (its directory, its files) — when that
    directory still holds every file at its recorded size; else None."""
    j = os.path.join(path, JOURNAL)
    if not os.path.isfile(j):
        return None
    try:
        with open(j, encoding="utf-8") as fh:
            rec = json.load(fh)
        d, files = rec["dir"], rec["files"]
        ok = (isinstance(d, str) and d.startswith(TMP_PREFIX) and os.sep not in d and isinstance(files, dict)
              and all(isinstance(n, str) and os.sep not in n and isinstance(b, int) for n, b in files.items())
              and isinstance(rec.get("order"), list) and sorted(rec["order"]) == sorted(files)
              and isinstance(rec.get("remove", []), list))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not ok:
        return None
    d = os.path.join(path, d)
    if os.path.islink(d):               # a save makes a real directory, never a link
        return None
    for n, nbytes in files.items():
        f = os.path.join(d, n)
        if not os.path.isfile(f) or os.path.getsize(f) != nbytes:
            return None
    return d, rec


def saved_dir(path) -> str:
    """The directory to read a save in ``path`` from: ``path`` itself, or — when a save
    was interrupted while switching its files into place — that save's complete copy
    (the journal's directory), so a reader never sees the mixture.  Every lutcore loader
    reads through this."""
    found = _journal(path)
    return found[0] if found else path


def _place(src, dst):
    """Put a copy of ``src`` at ``dst`` with one atomic rename (a hard link of it where the
    file system allows, else a copied file); ``src`` stays whole."""
    tmp = os.path.join(os.path.dirname(dst), f".{os.path.basename(dst)}.lutcore-part")
    if os.path.lexists(tmp):
        os.remove(tmp)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
        _fsync_path(tmp)
    os.replace(tmp, dst)


def _finish(path, tmp, rec):
    """Roll a journalled save forward: every file into place (``order`` first to last),
    the files it replaces removed, the journal removed, its directory removed."""
    for n in rec["order"]:
        _step(f"place {n}")
        _place(os.path.join(tmp, n), os.path.join(path, n))
    for n in rec.get("remove", []):
        f = os.path.join(path, n)
        if isinstance(n, str) and os.sep not in n and os.path.isfile(f) and n not in rec["files"]:
            _step(f"remove {n}")
            os.remove(f)
    _fsync_path(path)
    _step("unjournal")
    os.remove(os.path.join(path, JOURNAL))
    _fsync_path(path)
    shutil.rmtree(tmp, ignore_errors=True)


def recover(path) -> None:
    """Finish a save that was interrupted while switching (its journal is still there),
    then remove what killed saves left: ``.tmp-save-*`` directories, a stale journal,
    half-placed files."""
    found = _journal(path)
    if found:
        _finish(path, found[0], found[1])
    elif os.path.lexists(os.path.join(path, JOURNAL)):
        os.remove(os.path.join(path, JOURNAL))
    for n in os.listdir(path):
        f = os.path.join(path, n)
        if n.startswith(TMP_PREFIX) and os.path.isdir(f) and not os.path.islink(f):
            shutil.rmtree(f, ignore_errors=True)
        elif n.endswith(".lutcore-part") and n.startswith(".") and os.path.isfile(f):
            os.remove(f)


def _write_failed(path, e):
    """A write failure (disk full, read-only file system, a file too large, ...) as one
    OSError naming the directory, whatever layer raised it."""
    err = OSError(getattr(e, "errno", None) or 5, f"cannot save into {path!r}: {e}")
    err.filename = path
    return err


@contextlib.contextmanager
def atomic_file(fname):
    """Yield a temporary name beside ``fname`` to write one file to; on success fsync it
    and rename it over ``fname`` (one atomic step: the old file or the new one, never a
    torn one).  A failure removes the temporary file, keeps ``fname`` as it was, and —
    a write failure — is an OSError naming ``fname``."""
    from safetensors import SafetensorError
    fname = path_arg(fname)
    d = os.path.dirname(os.path.abspath(fname))
    if os.path.isdir(fname):
        raise ValueError(f"path: {fname!r} is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(fname)}.", suffix=".lutcore-part", dir=d)
        os.close(fd)
    except OSError as e:
        raise _write_failed(fname, e) from e
    try:
        try:
            yield tmp
            os.chmod(tmp, file_mode())
            _fsync_path(tmp)
            os.replace(tmp, fname)
            _fsync_path(d)
        except (OSError, SafetensorError) as e:
            raise _write_failed(fname, e) from e
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_dir(path, owned=MODEL_FILES, last=("config.json", "trainer.json")):
    """Yield a temporary directory (inside ``path``) to write a save's files into; then
    switch ``path`` to them so that at every instant one complete save is readable:

    1. the files are fsynced in ``path/.tmp-save-*/`` (the old save untouched);
    2. a journal (``.lutcore-save.json``, written whole and renamed in: the switch)
       names them — from here on every lutcore loader (``saved_dir``) reads the new
       save from that directory until the switch is done;
    3. each file is put in place under its usual name (a hard link renamed over the
       old one, ``last`` ones last), then ``owned`` files (fnmatch patterns: an earlier
       save's index and shards) that this save did not write are removed;
    4. the journal is removed, then the temporary directory.

    A crash before 2 leaves the old save (and a ``.tmp-save-*`` directory that the next
    save removes); after 2, the new one (the next save finishes the switch first).  The
    usual names stay what other tools read (transformers finds config.json and
    model.safetensors).  Nothing else in ``path`` is touched, and ``path`` itself is
    never replaced: a symlink, a mount point or the working directory stays what it is.
    A failure before the switch leaves ``path`` as it was (a directory this save
    created is removed again); a write failure is an OSError naming ``path``.
    Refused up front: a path that is a file (or lies under one), that resolves only
    after normalising, or where one of the save's files is a directory."""
    from safetensors import SafetensorError
    path = target_dir(path)
    created = not os.path.exists(path)
    switched = False
    try:
        os.makedirs(path, exist_ok=True)
        recover(path)
        tmp = tempfile.mkdtemp(prefix=TMP_PREFIX, dir=path)
    except OSError as e:
        if created:
            shutil.rmtree(path, ignore_errors=True)
        raise _write_failed(path, e) from e
    try:
        try:
            yield tmp
        except (OSError, SafetensorError) as e:
            raise _write_failed(path, e) from e
        order = {n: i for i, n in enumerate(last)}
        new = sorted(os.listdir(tmp), key=lambda n: (order.get(n, -1), n))
        for n in new:
            dst = os.path.join(path, n)
            if os.path.isdir(dst) and not os.path.islink(dst):
                raise ValueError(f"path: {dst!r} is a directory, so this save cannot write its {n} there")
        try:
            mode = file_mode()
            for n in new:
                f = os.path.join(tmp, n)
                os.chmod(f, mode)          # safetensors writes 0600; a checkpoint file is an ordinary file
                _fsync_path(f)
            _fsync_path(tmp)
            stale = sorted(n for n in os.listdir(path) if n not in new and os.path.isfile(os.path.join(path, n))
                           and any(fnmatch.fnmatchcase(n, pat) for pat in owned))
            rec = {"format": "lutcore-save/1", "dir": os.path.basename(tmp), "order": new,
                   "files": {n: os.path.getsize(os.path.join(tmp, n)) for n in new}, "remove": stale}
            jtmp = os.path.join(path, JOURNAL + ".lutcore-part")
            with open(jtmp, "w", encoding="utf-8") as fh:
                json.dump(rec, fh)
                fh.flush()
                os.fsync(fh.fileno())
            _step("journal")
            os.replace(jtmp, os.path.join(path, JOURNAL))
            switched = True
            _fsync_path(path)
            _finish(path, tmp, rec)
        except OSError as e:
            raise _write_failed(path, e) from e
    except BaseException:
        if not switched:
            shutil.rmtree(tmp, ignore_errors=True)
            jtmp = os.path.join(path, JOURNAL + ".lutcore-part")
            if os.path.lexists(jtmp):
                os.remove(jtmp)
            if created:                    # nothing of the user's was there
                shutil.rmtree(path, ignore_errors=True)
        raise
