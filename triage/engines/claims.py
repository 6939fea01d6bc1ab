"""The claims ledger: every sentence triage says about what an engine does, with the source lines that show it.

One JSON file per engine in `ledger/`. A claim has an id (`tgi.chunking-ignores-max-batch-size`), one
sentence, where it was read (a git repository and tag, or a registry package and version), the path and the
line range, and the sha256 of those lines (`line_hash`). Nothing here reads the engines' sources:
`scripts/verify_engine_claims.py` does, when the sources are fetched again, and fails on a hash that moved.

A claim that spans releases is a range, two facts: `ref` is the first release it holds in, `until` the same
behaviour at the last (its own path, lines and hash, since lines move between releases), and `absent_before`
the release just before `ref`, where a distinctive text of it must not be found: "from 0.18" is then checked
at 0.18, at the range's end and at 0.17.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LEDGER_DIR = Path(__file__).resolve().parent / "ledger"


@dataclass(frozen=True, slots=True)
class RangeEnd:
    """The same behaviour at the last release of a claim's range."""

    ref: str
    path: str
    first_line: int
    last_line: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Absent:
    """The release just before a claim's range, where `text` is not in `path` (or `path` does not exist)."""

    ref: str
    path: str
    text: str


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
    until: RangeEnd | None = None        # the last release the claim holds in, when it spans releases
    absent_before: Absent | None = None  # the release before `ref`, for a claim that says "from `ref`"

    @property
    def citation(self) -> str:
        text = f"{self._where(self.ref)} {self.path}:{_lines(self.first_line, self.last_line)}"
        if self.until is not None:
            text += f" .. {self._where(self.until.ref)} {self.until.path}:{_lines(self.until.first_line, self.until.last_line)}"
        if self.absent_before is not None:
            text += f"; not in {self.absent_before.ref}"
        return text

    def _where(self, ref: str) -> str:
        return {"git": f"{self.origin}@{ref}", "local": "triage (this repository)"}.get(
            self.kind, f"{self.origin}=={ref} (PyPI)")


def _lines(first: int, last: int) -> str:
    return f"L{first}" if first == last else f"L{first}-{last}"


def _claim(raw: dict) -> Claim:
    until, absent = raw.get("until"), raw.get("absent_before")
    return Claim(**{**raw, "until": RangeEnd(**until) if until else None,
                    "absent_before": Absent(**absent) if absent else None})


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
            claim = _claim(raw)
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
