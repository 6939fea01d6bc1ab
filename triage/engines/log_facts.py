"""What a server log states, read with the engine's own format strings: pure functions over lines, no I/O.

    hits = scan(lines, forms_of(engine, version))      # lines: [(line number in the file, plain text)]

A fact's forms live in the engine's module (`Engine.log_facts`, each a `LogForm` citing its source lines in the
ledger); what torch and NCCL print whatever the engine serves with is in `runtime_log.py`. A form's placeholders
(`%d`, `%.2f`, `%s`, `{}`, `{name:.2f}`, `{:?}`) become groups, named by the form's `fields`. A line a web page
wrapped is read joined to the next one when its head matched and the rest did not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from triage.core.log_text import stamp_s
from triage.engines.base import Engine, LogForm

_PLACEHOLDER = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?[sdifgeExr]|\{[^{}]*\}")
_NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_RECORD = re.compile(r"\s*(?:\[|\(|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|CRITICAL)\b|time=|\d+\.\d+\.\d+\.\d+ )")
_MIN_HEAD = 10          # a head this long is specific enough to try joining a wrapped line


@dataclass(frozen=True)
class Compiled:
    form: LogForm
    fact: str
    pattern: re.Pattern[str]
    head: str                      # the literal text before the first placeholder


@dataclass
class Hit:
    fact: str
    line_no: int                   # in the file (1-based)
    index: int                     # in the plain lines
    at_s: float | None             # the line's own time stamp
    values: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    line: str = ""
    claim: str = ""
    head: str = ""                 # the form's literal text before its first placeholder


@cache
def compile_form(fact: str, form: LogForm) -> Compiled:
    text = form.text.rstrip()
    parts, pos = [], 0
    found = list(_PLACEHOLDER.finditer(text))
    for i, m in enumerate(found):
        parts.append(re.escape(text[pos:m.start()]))
        if m.group() == "%%":
            parts.append("%")
        else:
            last = i == len(found) - 1 and m.end() == len(text)
            parts.append("(.*)" if last else "(.*?)")
        pos = m.end()
    parts.append(re.escape(text[pos:]))
    first = next((m for m in found if m.group() != "%%"), None)
    head = text[:first.start()] if first else text
    return Compiled(form, fact, re.compile("".join(parts)), head.replace("%%", "%"))


def forms_of(engine: Engine, version: str | None = None) -> list[Compiled]:
    return [compile_form(fact, form) for fact in engine.log_facts for form in engine.log_fact(fact, version)]


def _value(raw: str) -> float | None:
    m = _NUMBER.match(raw.strip())
    return float(m.group().replace(",", "")) if m else None


def _hit(c: Compiled, m: re.Match[str], line_no: int, index: int, line: str) -> Hit:
    hit = Hit(c.fact, line_no, index, stamp_s(line), line=line.strip()[:400], claim=c.form.claim, head=c.head)
    for name, raw in zip(c.form.fields, m.groups(), strict=False):
        if not name or raw is None:
            continue
        number = _value(raw)
        if number is not None and not name.endswith("_text"):
            hit.values[name] = number
        else:
            hit.texts[name.removesuffix("_text")] = raw.strip()
    return hit


def _anchor(compiled: list[Compiled]) -> re.Pattern[str]:
    heads = sorted({re.escape(c.head) for c in compiled if c.head}, key=len, reverse=True)
    return re.compile("|".join(heads) or "(?!)")


def _continues(line: str) -> bool:
    """A line that carries on the one before it (a page wrapped it): no time stamp and no level word of its own."""
    return stamp_s(line) is None and not _RECORD.match(line)


def scan(lines: list[tuple[int, str]], compiled: list[Compiled]) -> list[Hit]:
    """Every line that one of the forms matches, in log order (a line gives at most one hit per fact)."""
    anchor = _anchor(compiled)
    out: list[Hit] = []
    for i, (line_no, line) in enumerate(lines):
        if not anchor.search(line):
            continue
        seen: set[str] = set()
        for c in compiled:
            if c.fact in seen or (c.head and c.head not in line):
                continue
            m = c.pattern.search(line)
            text = line
            if m is None and len(c.head) >= _MIN_HEAD and i + 1 < len(lines) and _continues(lines[i + 1][1]):
                for glue in (" ", ""):
                    text = line + glue + lines[i + 1][1].lstrip()
                    if m := c.pattern.search(text):
                        break
            if m is not None:
                out.append(_hit(c, m, line_no, i, text))
                seen.add(c.fact)
    return out


def count_hits(lines: list[tuple[int, str]], compiled: list[Compiled]) -> int:
    return len(scan(lines, compiled))
