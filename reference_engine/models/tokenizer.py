"""Tokenizers: a local ``tokenizer.json`` through the ``tokenizers`` library, or a byte-level fallback
(256 byte ids, then BOS and EOS). Torch-free; nothing is downloaded."""
from __future__ import annotations

from pathlib import Path

from triage.core.errors import EngineError


class ByteTokenizer:
    """UTF-8 bytes are ids 0..255. ``bos_token_id``/``eos_token_id`` are specials and never decode to
    text; ids beyond them (a bigger model vocabulary) decode to nothing either."""

    kind = "bytes"

    def __init__(self, bos_token_id: int | None = 256, eos_token_id: int | None = 257):
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        if add_special_tokens and self.bos_token_id is not None:
            ids.insert(0, self.bos_token_id)
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


class HFTokenizer:
    kind = "tokenizer.json"

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the tokenizers library raises a plain Exception
            raise EngineError(f"cannot load tokenizer {path}: {exc}") from exc

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)


def load_tokenizer(directory: Path | None, bos_token_id: int | None, eos_token_id: int | None):
    if directory is not None and (directory / "tokenizer.json").is_file():
        return HFTokenizer(directory / "tokenizer.json")
    return ByteTokenizer(bos_token_id, eos_token_id)
