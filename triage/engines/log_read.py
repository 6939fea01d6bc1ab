"""A server log read as evidence: which engine wrote it, at which version, its starts, and what its last start
stated (pure: lines in, a LogRead out).

    read = read_log(plain_lines(text))
    read.engine, read.version, read.hits_of("kv_below_max_len")

The engine is the one whose own lines (its log facts and start-up markers) match most; its version is read from
its banner or config line, and then only the forms of that version are used. A log may hold several starts (a
pod that restarted): the last one is judged, the earlier ones are counted, with the time between them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from triage.engines.base import Engine
from triage.engines.log_facts import Hit, forms_of, scan
from triage.engines.registry import engines
from triage.engines.runtime_log import RUNTIME
from triage.engines.startup import PHASES
from triage.engines.startup_log import marker_anchor, markers_of

IDENTITY_FACTS = ("start", "version", "config", "runner")      # lines only this engine writes
IDENTIFY_LINES = 5000
_PAIR = re.compile(r"([A-Za-z_][\w.]*)\s*(?:=|:\s)\s*")


@dataclass
class PhaseMark:
    index: int
    phase: str
    edge: str


@dataclass
class LogRead:
    engine: str | None = None
    version: str | None = None
    num_lines: int = 0
    start_indexes: list[int] = field(default_factory=list)     # where each start begins (plain-line index)
    hits: list[Hit] = field(default_factory=list)              # of the last start, in log order
    phase_marks: list[PhaseMark] = field(default_factory=list)  # of the last start
    config: dict[str, str] = field(default_factory=dict)       # the config line's key -> raw value
    config_fields: dict[str, object] = field(default_factory=dict)  # settings a line states by field name
    first_line_no: int | None = None                           # the last start's span in the file
    last_line_no: int | None = None

    def hits_of(self, fact: str) -> list[Hit]:
        return [h for h in self.hits if h.fact == fact]

    def last(self, fact: str) -> Hit | None:
        return next((h for h in reversed(self.hits) if h.fact == fact), None)


def _score(engine: Engine, lines: list[tuple[int, str]]) -> int:
    hits = scan(lines, forms_of(engine))
    marks = _phase_marks(lines, engine, None)
    return 3 * sum(h.fact in IDENTITY_FACTS for h in hits) + len(hits) + len(marks)


def identify(lines: list[tuple[int, str]]) -> Engine | None:
    """The engine whose own lines match most of this log, judged on its first and last IDENTIFY_LINES lines:
    where engines state who they are (their start) and what they did last."""
    candidates = [e for e in engines() if e.log_facts or e.log_markers]
    sample = lines if len(lines) <= 2 * IDENTIFY_LINES else lines[:IDENTIFY_LINES] + lines[-IDENTIFY_LINES:]
    best, best_n = None, 0
    for engine in candidates:
        n = _score(engine, sample)
        if n > best_n:
            best, best_n = engine, n
    return best


def _version(hits: list[Hit]) -> str | None:
    for h in reversed(hits):
        raw = h.texts.get("version") or (str(h.values["version"]) if "version" in h.values else None)
        if raw:
            return raw.strip().strip("'\"").lstrip("v").split()[0].rstrip(",)")
    return None


def _phase_marks(lines: list[tuple[int, str]], engine: Engine, version: str | None) -> list[PhaseMark]:
    """Where the engine's start-up markers (startup.py) stand in the log."""
    marks = markers_of(engine, version)
    if not marks:
        return []
    anchor = marker_anchor(marks)
    out = []
    for i, (_, line) in enumerate(lines):
        if not anchor.search(line):
            continue
        mark = next((mk for mk in marks if mk.pattern.search(line)), None)
        if mark is not None:
            out.append(PhaseMark(i, mark.phase, mark.edge))
    return out


def _starts(lines: list[tuple[int, str]], hits: list[Hit], marks: list[PhaseMark]) -> list[int]:
    """Where each start begins: the engine's start line, else the first phase marker seen again. The first start
    takes the log's first lines too (what came before its first marked line belongs to it)."""
    if not lines:
        return []
    starts = sorted({h.index for h in hits if h.fact == "start"})
    if not starts and marks:
        first = (marks[0].phase, marks[0].edge)
        starts = [m.index for m in marks if (m.phase, m.edge) == first]
    return [0, *starts[1:]] if starts else [0]


def _top_level(body: str) -> list[str]:
    """The comma-separated items of `body`, split outside brackets and quotes only."""
    items, depth, quote, cur = [], 0, "", []
    for ch in body:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    return [*items, "".join(cur)]


def split_pairs(text: str) -> dict[str, str]:
    """`a=1, b='x, y', c={...}` or `a: Some(1), b: "x"` (a Python repr, a Rust Debug print) -> raw values by key,
    split at top-level commas only."""
    body = text.strip()
    if (m := re.match(r"^[\w.]*\s*[({]\s*", body)) and body.endswith((")", "}")):
        body = body[m.end():-1]
    out = {}
    for item in _top_level(body):
        if m := _PAIR.match(item.strip()):
            value = item.strip()[m.end():].strip()
            if value.startswith("Some(") and value.endswith(")"):
                value = value[5:-1]
            out[m.group(1)] = value.strip("'\"")
    return out


def read_log(lines: list[tuple[int, str]]) -> LogRead:
    engine = identify(lines)
    out = LogRead(num_lines=len(lines))
    if engine is None:
        out.hits = scan(lines, forms_of(RUNTIME))
        return out
    # Who and which version first (only the identity lines: a cheap pass), then every fact at that version once.
    every = scan(lines, [c for c in forms_of(engine) if c.fact in IDENTITY_FACTS])
    out.engine, version = engine.name, _version(every)
    out.version = version
    marks = _phase_marks(lines, engine, version)
    out.start_indexes = _starts(lines, [h for h in every if h.fact == "start"], marks)
    begin = out.start_indexes[-1] if out.start_indexes else 0
    last = lines[begin:]
    hits = scan(last, forms_of(engine, version)) + scan(last, forms_of(RUNTIME))
    for h in hits:
        h.index += begin
    out.hits = sorted(hits, key=lambda h: h.index)
    out.phase_marks = [m for m in marks if m.index >= begin]
    if (cfg := out.last("config")) is not None:
        _read_config(out, cfg, lines)
    if (settings := out.last("settings")) is not None:          # settings a line states by field name
        out.config_fields.update(settings.values)
    if last:
        out.first_line_no, out.last_line_no = last[0][0], last[-1][0]
    return out


def _block(lines: list[tuple[int, str]], index: int, head: str) -> str:
    """A config print from `head` on, with the lines that follow until its brackets close (TGI's `{:#?}` spans
    one line per field); at most 300 lines."""
    first = lines[index][1]
    text = first[first.find(head):] if head in first else first
    depth = sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
    i = index + 1
    while depth > 0 and i < len(lines) and i - index < 300:
        part = lines[i][1].strip()
        text += " " + part
        depth += sum(part.count(c) for c in "([{") - sum(part.count(c) for c in ")]}")
        i += 1
    return text


def _read_config(out: LogRead, hit: Hit, lines: list[tuple[int, str]]) -> None:
    """The config line's settings: a `key=value, ...` text (vLLM, SGLang), a bracketed print (TGI), or the
    line's own named fields (the reference engine's `max_model_len=%d`)."""
    if "config" in hit.texts:
        out.config = split_pairs(hit.texts["config"])
    elif not hit.values and not hit.texts:
        out.config = split_pairs(_block(lines, hit.index, hit.head))
    else:
        out.config_fields = {**{k: v for k, v in hit.texts.items() if k != "version"}, **hit.values}


def phase_at(read: LogRead, index: int, order: tuple[str, ...]) -> str | None:
    """The start-up phase a line at `index` fell in: the phase whose begin line came last before it, or the one
    after the phase whose end line came last (in the engine's order); 'serving' once the server was up; None when
    the log shows no start-up line at all."""
    if not read.phase_marks:
        return None
    before = [m for m in read.phase_marks if m.index < index]
    if not before:
        return "process"
    mark = before[-1]
    if mark.phase == "api_server" and mark.edge == "end":
        return "serving"
    if mark.edge == "begin":
        return mark.phase
    steps = order or PHASES
    if mark.phase in steps and steps.index(mark.phase) + 1 < len(steps):
        return steps[steps.index(mark.phase) + 1]
    return mark.phase
