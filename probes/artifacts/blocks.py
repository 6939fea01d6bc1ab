"""A pasted issue body (Markdown) -> its blocks: fenced code (``` or ~~~), `<details>` sections without fences, and
indented code; the prose between them is left out, except an inline `code span` that holds a launch command.

The engines' bug templates lay a report out this way: vLLM's asks for `collect_env` output and the command in
fenced blocks, often folded in `<details>`; SGLang's and TGI's for the command, the log and `nvidia-smi`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_DETAILS_OPEN = re.compile(r"<details\b", re.I)
_DETAILS_CLOSE = re.compile(r"</details>", re.I)
_TAGS = re.compile(r"</?(details|summary|br|p|b|i|code|pre)\b[^>]*>", re.I)
_INLINE = re.compile(r"`([^`\n]{8,})`")


@dataclass(frozen=True)
class Block:
    first_line: int          # 1-based, in the file
    last_line: int
    text: str

    def label(self, name: str, number: int) -> str:
        return f"{name} block {number} (lines {self.first_line}-{self.last_line})"


def is_markdown(text: str) -> bool:
    """An issue body, not a bare artifact: it fences code or folds sections."""
    return any(_FENCE.match(ln) for ln in text.splitlines()) or bool(_DETAILS_OPEN.search(text))


def split(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks, consumed = _folded(lines)
    prose: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence.group(1))),
                       len(lines))
            blocks.append(Block(i + 2, end, "\n".join(lines[i + 1:end])))
            i = end + 1
            continue
        if i not in consumed and not _DETAILS_OPEN.search(lines[i]) and not _DETAILS_CLOSE.search(lines[i]):
            prose.append((i + 1, lines[i]))
        i += 1
    blocks += _indented(prose) + _inline(prose)
    return sorted(blocks, key=lambda b: b.first_line)


def _folded(lines: list[str]) -> tuple[list[Block], set[int]]:
    """`<details>` sections without a fence inside, each one block (its tags and summary dropped); and the line
    indexes they took. A section with a fence is left to the fence."""
    out, taken = [], set()
    opens = [i for i, ln in enumerate(lines) if _DETAILS_OPEN.search(ln)]
    for start in opens:
        end = next((j for j in range(start, len(lines)) if _DETAILS_CLOSE.search(lines[j])), None)
        if end is None or any(_FENCE.match(ln) for ln in lines[start:end]):
            continue
        body = [(j, _TAGS.sub("", lines[j])) for j in range(start, end + 1)
                if not re.match(r"\s*<summary", lines[j], re.I)]
        kept = [(j, t) for j, t in body if t.strip()]
        if kept:
            out.append(Block(kept[0][0] + 1, kept[-1][0] + 1, "\n".join(t for _, t in kept)))
        taken.update(range(start, end + 1))
    return out, taken


def _indented(prose: list[tuple[int, str]]) -> list[Block]:
    out, run = [], []
    for n, line in [*prose, (-1, "")]:
        if line.startswith(("    ", "\t")) and line.strip():
            run.append((n, line[4:] if line.startswith("    ") else line[1:]))
            continue
        if len(run) >= 2:
            out.append(Block(run[0][0], run[-1][0], "\n".join(t for _, t in run)))
        run = []
    return out


def _inline(prose: list[tuple[int, str]]) -> list[Block]:
    from triage.probes.artifacts.launch import find_command

    return [Block(n, n, m.group(1)) for n, line in prose if not line.startswith(("    ", "\t"))
            for m in _INLINE.finditer(line) if find_command(m.group(1)) is not None]
