"""Tokenizers: byte-level (the default, 256 ids), a printable-character
fallback (96 ids: '\\n' and ASCII 32..126, anything else -> '?'), and any
Hugging Face ``tokenizer.json`` through the ``tokenizers`` library."""
from __future__ import annotations

import os

import numpy as np

__all__ = ["Tokenizer"]

_CHARS = "\n" + "".join(chr(c) for c in range(32, 127))


class Tokenizer:
    def __init__(self, kind: str, hf=None, source: str | None = None):
        if kind not in ("bytes", "chars", "hf") or (kind == "hf") != (hf is not None):
            raise ValueError(f"kind: expected 'bytes' or 'chars' (or 'hf' with a tokenizers.Tokenizer) — use "
                             f"Tokenizer.bytes(), .chars(), .from_file(path); got {kind!r}")
        self.kind, self._hf, self.source = kind, hf, source
        if kind == "chars":
            self._map = {c: i for i, c in enumerate(_CHARS)}

    # ---- builders
    @classmethod
    def bytes(cls) -> "Tokenizer":
        return cls("bytes")

    @classmethod
    def chars(cls) -> "Tokenizer":
        return cls("chars")

    @classmethod
    def from_file(cls, path) -> "Tokenizer":
        """A Hugging Face tokenizer.json."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a file path, got {type(path).__name__}")
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"tokenizer: no such file {path!r}")
        try:
            from tokenizers import Tokenizer as HFTokenizer
            hf = HFTokenizer.from_file(path)
        except Exception as e:       # the library raises its own exception type
            raise ValueError(f"{path}: not a valid tokenizer.json ({e})") from None
        return cls("hf", hf, source=path)

    @classmethod
    def from_str(cls, json_str: str, source="inline") -> "Tokenizer":
        from tokenizers import Tokenizer as HFTokenizer
        try:
            return cls("hf", HFTokenizer.from_str(json_str), source=source)
        except Exception as e:
            raise ValueError(f"{source}: not a valid tokenizer.json ({e})") from None

    @classmethod
    def from_spec(cls, spec: dict) -> "Tokenizer":
        """Inverse of ``spec()`` (used by checkpoints)."""
        kind = spec.get("kind") if isinstance(spec, dict) else None
        if kind == "bytes":
            return cls.bytes()
        if kind == "chars":
            return cls.chars()
        if kind == "hf" and isinstance(spec.get("json"), str):
            return cls.from_str(spec["json"], source=spec.get("source", "checkpoint"))
        raise ValueError(f"tokenizer spec: expected {{'kind': 'bytes' | 'chars'}} or {{'kind': 'hf', 'json': ...}} "
                         f"(Tokenizer.spec()), got {spec!r:.200}")

    def spec(self) -> dict:
        if self.kind == "hf":
            return {"kind": "hf", "json": self._hf.to_str(), "source": self.source}
        return {"kind": self.kind}

    # ---- use
    @property
    def vocab_size(self) -> int:
        if self.kind == "bytes":
            return 256
        if self.kind == "chars":
            return len(_CHARS)
        return self._hf.get_vocab_size(with_added_tokens=True)

    @property
    def name(self) -> str:
        return {"bytes": "byte-level", "chars": "printable chars"}.get(self.kind, f"tokenizer.json ({self.source})")

    def encode(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise TypeError(f"text: expected str, got {type(text).__name__}")
        if self.kind == "bytes":
            return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int64)
        if self.kind == "chars":
            q = self._map["?"]
            return np.array([self._map.get(c, q) for c in text], np.int64)
        return np.array(self._hf.encode(text).ids, np.int64)

    def decode(self, ids) -> str:
        try:
            arr = np.asarray(ids)
        except ValueError:
            arr = np.asarray(ids, dtype=object)
        if arr.dtype.kind not in "iu" and (arr.size or arr.dtype == object):
            got = "None or a ragged or mixed sequence" if arr.dtype == object else arr.dtype
            raise TypeError(f"ids: expected integer token ids, got {got}")
        ids = [int(i) for i in arr.reshape(-1)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids: {len(bad)} id(s) outside [0, {self.vocab_size}) for the {self.name} "
                             f"tokenizer, e.g. {bad[0]}")
        if self.kind == "bytes":
            return bytes(ids).decode("utf-8", errors="replace")
        if self.kind == "chars":
            return "".join(_CHARS[i] if 0 <= i < len(_CHARS) else "?" for i in ids)
        return self._hf.decode(ids)

    def __repr__(self):
        return f"Tokenizer({self.name}, vocab_size={self.vocab_size})"
