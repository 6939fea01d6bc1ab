"""What a server log states, read with the engine's own format strings: pure functions over lines, no I/O.

    hits = scan(lines, forms_of(engine, version))      # lines: [(line number in the file, plain text)]

A fact's forms live in the engine's module (`Engine.log_facts`, each a `LogForm` citing its source lines in the
ledger); what torch and NCCL print whatever the engine serves with is in `runtime_log.py`. A form's placeholders
(`%d`, `%.2f`, `%s`, `{}`, `{name:.2f}`, `{:?}`) become groups, named by the form's `fields`. A line is read
with the continuation lines a web page wrapped off it (a record).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, cached_property

from triage.core.log_text import stamp_s
from triage.engines.base import Engine, LogForm

_PLACEHOLDER = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?[sdifgeExr]|\{[^{}]*\}")
_NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
# A line that opens a record of its own: a level word, slog's time=, llama.cpp's clock, a rank or process tag.
_RECORD = re.compile(r"\s*(?:\[(?:\d|rank)|\(\w[\w ]*pid=\d+\)|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|CRITICAL)\b|"
                     r"time=|\d+\.\d+\.\d+\.\d+ )")
# A lead of its own: llama.cpp's lower-case function prefix, a Python exception or traceback.
_LEAD = re.compile(r"\s*(?:[a-z_][a-z0-9_.]*: |[\w.]*(?:Error|Exception|Warning): |Traceback|File \")")
_KEY_CHARS = 16         # a form's leading text that finds its candidate lines (a page may wrap the rest)
_MAX_JOIN = 4           # continuation lines a wrapped line may have


@dataclass(frozen=True)
class Compiled:
    form: LogForm
    fact: str
    pattern: re.Pattern[str]
    head: str                      # the literal text before the first placeholder
    key: str                       # its first _KEY_CHARS characters: enough to find a candidate line


@dataclass
class Hit:
    fact: str
    line_no: int                   # in the file (1-based)
    index: int                     # in the plain lines
    values: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    line: str = ""
    claim: str = ""
    head: str = ""                 # the form's literal text before its first placeholder

    @cached_property
    def at_s(self) -> float | None:
        """The line's own time stamp (read when asked: most hits never need it)."""
        return stamp_s(self.line)


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
    head = head.replace("%%", "%")
    return Compiled(form, fact, re.compile("".join(parts)), head, head[:_KEY_CHARS])


def forms_of(engine: Engine, version: str | None = None) -> list[Compiled]:
    return [compile_form(fact, form) for fact in engine.log_facts for form in engine.log_fact(fact, version)]


def _value(raw: str) -> float | None:
    m = _NUMBER.match(raw.strip())
    return float(m.group().replace(",", "")) if m else None


def _hit(c: Compiled, m: re.Match[str], line_no: int, index: int, line: str) -> Hit:
    hit = Hit(c.fact, line_no, index, line=line.strip()[:400], claim=c.form.claim, head=c.head)
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
    heads = sorted({re.escape(c.key) for c in compiled if c.key}, key=len, reverse=True)
    return re.compile("|".join(heads) or "(?!)")


def _continues(line: str) -> bool:
    """A line that carries on the one before it (a page wrapped it): no time stamp, no level word or process tag
    of its own, and no `name: ` lead (llama.cpp's function prefixes, a Python exception)."""
    return not _RECORD.match(line) and not _LEAD.match(line) and stamp_s(line) is None


def _record(lines: list[tuple[int, str]], i: int) -> tuple[str, int]:
    """Line i with the lines a page wrapped off it (up to _MAX_JOIN), joined with a space; and how many."""
    if _continues(lines[i][1]):
        return lines[i][1], 0
    parts = []
    for _, nxt in lines[i + 1:i + 1 + _MAX_JOIN]:
        if not _continues(nxt):
            break
        parts.append(nxt.strip())
    return " ".join([lines[i][1], *parts]), len(parts)


def _match(c: Compiled, line: str, joined: str, cut: list[str]) -> tuple[re.Match[str] | None, str]:
    if m := c.pattern.search(line):
        return m, line
    if joined != line and (m := c.pattern.search(joined)):
        return m, joined
    if cut and (m := c.pattern.search(line + "".join(cut))):         # a page that cut a word in two
        return m, line + "".join(cut)
    return None, line


def scan(lines: list[tuple[int, str]], compiled: list[Compiled]) -> list[Hit]:
    """Every record that one of the forms matches, in log order (a record gives at most one hit per fact). A
    record is a line with the continuation lines a page wrapped off it; those are not read again on their own. Only
    a line that holds some form's leading text is looked at further (a log may be hundreds of thousands of lines)."""
    anchor = _anchor(compiled)
    out: list[Hit] = []
    skip_to = -1
    for i, (line_no, line) in enumerate(lines):
        if i <= skip_to or not anchor.search(line):
            continue
        joined, n = _record(lines, i)
        cut = [text.strip() for _, text in lines[i + 1:i + 1 + n]]
        seen: set[str] = set()
        for c in compiled:
            if c.fact in seen or (c.key and c.key not in joined and c.key not in line + "".join(cut)):
                continue
            m, text = _match(c, line, joined, cut)
            if m is not None:
                out.append(_hit(c, m, line_no, i, text))
                seen.add(c.fact)
        if seen and n:
            skip_to = i + n
    return out
