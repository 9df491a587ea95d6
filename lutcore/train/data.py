"""Training data: text, token ids or a file -> windows -> deterministic batches.

Windows are non-overlapping in what they predict: window i covers tokens
[i*L, i*L + L] (L+1 tokens: inputs are the first L, targets the last L); a
tail window of at least 2 tokens is kept (shorter).  Batches group windows
of equal length in an order drawn from ``seed`` and the epoch number, so a
run resumed at (epoch, batch) sees exactly the batches it would have seen.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from lutcore import _check

__all__ = ["load_tokens", "read_text", "make_windows", "epoch_batches", "builtin_corpus", "held_out_size",
           "HELD_OUT_FRACTION"]

HELD_OUT_FRACTION = 0.05    # ``lutcore train`` holds out the last 5 % of the tokens (at least one window)


def builtin_corpus() -> str:
    """Python's own bundled documentation topics (no download needed)."""
    from pydoc_data import topics
    return "\n\n".join(topics.topics[k] for k in sorted(topics.topics))


def read_text(path, encoding: str = "utf-8") -> str:
    """The text of file ``path``, decoded strictly: a byte sequence that is not valid
    ``encoding`` (Latin-1 or UTF-16 read as UTF-8, a binary file) is a ValueError naming the
    file and the byte offset, never replacement characters trained on.  With the default
    UTF-8, a NUL byte (UTF-16 text, binary data) is refused the same way."""
    import codecs
    path = os.fspath(path)
    if not isinstance(encoding, str):
        raise TypeError(f"encoding: expected a codec name such as 'utf-8', got {type(encoding).__name__}")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"encoding: unknown text encoding {encoding!r}") from None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data: no such file {path!r}")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        bad = raw[e.start:e.start + 4]
        raise ValueError(f"{path}: not {encoding} text: invalid byte sequence {bad!r} at byte offset {e.start} "
                         f"(of {len(raw):,}); if the file is text in another encoding, say which "
                         f"(encoding=, --encoding latin-1 / utf-16 / ...)") from None
    if codecs.lookup(encoding).name == "utf-8":
        nul = raw.find(b"\0")
        if nul >= 0:
            raise ValueError(f"{path}: not utf-8 text: NUL byte at byte offset {nul} (of {len(raw):,}) — a binary "
                             f"file or UTF-16 text; if it is text in another encoding, say which "
                             f"(encoding=, --encoding utf-16 / ...)")
    return text


def load_tokens(data, tokenizer, encoding: str = "utf-8") -> np.ndarray:
    """``data``: text (str), a path (os.PathLike, or a str naming an existing file; read with
    ``read_text(path, encoding)``), or token ids (sequence / array of ints)."""
    from lutcore.tokenizer import Tokenizer
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"tokenizer: expected a lutcore Tokenizer, got {type(tokenizer).__name__}")
    if isinstance(data, os.PathLike) or (isinstance(data, str) and len(data) < 4096 and "\n" not in data
                                         and os.path.isfile(data)):
        data = read_text(data, encoding)
    if isinstance(data, str):
        ids = tokenizer.encode(data)
    else:
        ids = np.asarray(data)
        if ids.size == 0:
            raise ValueError("data: the corpus is empty")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"data: expected text, a file path or integer token ids, got dtype {ids.dtype}")
        ids = ids.reshape(-1).astype(np.int64)
    if ids.size == 0:
        raise ValueError("data: the corpus is empty")
    return _check.token_ids(ids, "data", tokenizer.vocab_size)


def held_out_size(n_tokens: int, seq_len: int) -> int:
    """How many tokens at the end of a corpus of ``n_tokens`` ``lutcore train`` holds out
    (and ``lutcore eval`` scores by default): 5 %, at least one window of ``seq_len`` + 1."""
    return max(_check.int_arg(seq_len, "seq_len", lo=1) + 1, int(n_tokens * HELD_OUT_FRACTION))


def make_windows(ids: np.ndarray, seq_len: int) -> list[np.ndarray]:
    seq_len = _check.int_arg(seq_len, "seq_len", lo=1)
    out = []
    n = ids.size
    for start in range(0, n - 1, seq_len):
        w = ids[start:start + seq_len + 1]
        if w.size >= 2:
            out.append(w)
    if not out:
        raise ValueError(f"data: {n} token(s) is shorter than one window (need at least 2)")
    return out


def epoch_batches(windows: list[np.ndarray], batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Deterministic (seed, epoch) order; each batch is an int64 (b, len+1) array."""
    batch_size = _check.int_arg(batch_size, "batch_size", lo=1)
    rng = np.random.default_rng([_check.int_arg(seed, "seed", lo=0), _check.int_arg(epoch, "epoch", lo=0)])
    order = rng.permutation(len(windows))
    by_len: dict[int, list[int]] = {}
    for i in order:
        by_len.setdefault(windows[i].size, []).append(int(i))
    batches = []
    for length in sorted(by_len, reverse=True):
        idx = by_len[length]
        for s in range(0, len(idx), batch_size):
            batches.append(np.stack([windows[i] for i in idx[s:s + batch_size]]))
    return batches


def fingerprint(ids: np.ndarray, seq_len: int, batch_size: int) -> str:
    h = hashlib.sha256(np.ascontiguousarray(ids, np.int64).tobytes())
    h.update(f"{seq_len}/{batch_size}".encode())
    return h.hexdigest()[:32]
