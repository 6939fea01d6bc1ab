"""The claims ledger: every sentence triage says about what an engine does, with the source lines that show it.

One JSON file per engine in `ledger/`. A claim has an id (`tgi.chunking-ignores-max-batch-size`), one
sentence, where it was read (a git repository and tag, or a registry package and version), the path and the
line range, and the sha256 of those lines (`line_hash`). Nothing here reads the engines' sources:
`scripts/verify_engine_claims.py` does, when the sources are fetched again, and fails on a hash that moved.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LEDGER_DIR = Path(__file__).resolve().parent / "ledger"


@dataclass(frozen=True, slots=True)
class Claim:
    id: str
    sentence: str
    kind: str             # "git": a repository at a tag | "pypi": a registry package at a version | "local": this
                          # repository's working tree (the reference engine; tests/test_engines.py checks it)
    origin: str           # "huggingface/text-generation-inference" | "vllm"
    ref: str              # the tag or the version
    path: str             # inside the repository, or inside the package archive
    first_line: int
    last_line: int
    sha256: str           # of the lines first..last (line_hash)

    @property
    def citation(self) -> str:
        where = {"git": f"{self.origin}@{self.ref}", "local": "triage (this repository)"}.get(
            self.kind, f"{self.origin}=={self.ref} (PyPI)")
        lines = f"L{self.first_line}" if self.first_line == self.last_line else f"L{self.first_line}-{self.last_line}"
        return f"{where} {self.path}:{lines}"


def line_hash(text: str, first_line: int, last_line: int) -> str:
    """sha256 of lines first..last (1-based, inclusive), each without its trailing white space, joined by
    newlines: a claim's lines keep their hash whatever the file's line endings."""
    lines = text.splitlines()[first_line - 1:last_line]
    if len(lines) != last_line - first_line + 1:
        raise ValueError(f"the file has {len(text.splitlines())} lines; lines {first_line}-{last_line} asked")
    return hashlib.sha256("\n".join(line.rstrip() for line in lines).encode()).hexdigest()


@cache
def ledger() -> dict[str, Claim]:
    """Every claim of every engine, by id."""
    out: dict[str, Claim] = {}
    for path in sorted(LEDGER_DIR.glob("*.json")):
        for raw in json.loads(path.read_text()):
            claim = Claim(**raw)
            if claim.id in out:
                raise ValueError(f"claim {claim.id} is in the ledger twice ({path.name})")
            out[claim.id] = claim
    return out


def claim(claim_id: str) -> Claim:
    try:
        return ledger()[claim_id]
    except KeyError:
        raise KeyError(f"no claim {claim_id!r} in triage/engines/ledger") from None


def cite(claim_ids: tuple[str, ...] | list[str]) -> list[str]:
    """One line per claim: the sentence, then where the source shows it."""
    return [f"{claim(c).sentence} [{c}: {claim(c).citation}]" for c in claim_ids]
