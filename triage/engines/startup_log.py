"""Read a server's start-up log into its phases: pure functions over (arrival time, line) pairs, no I/O.

    parse_startup(lines, engine=get("vllm"), version="0.33.0")   # -> Startup (phases, seconds, bytes)

A marker is the format string as the engine's source writes it (startup.py); its placeholders become groups, and
the word after each one gives the unit (`%.2f seconds`, `%.4f GiB`, `{:?}` as Rust prints a Duration). A phase
lasts what the engine logged for it, else from its begin line (or the end of the phase before) to its end line.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from functools import cache

from triage.core.log_text import stamp_s
from triage.engines.base import Engine
from triage.engines.startup import LABELS, startup_markers

_PLACEHOLDER = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[sdifgeEx]|\{[^{}]*\}")
_NUMERIC = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[difgeE]|\{[^{}]*:[^{}]*[fde?]\}")
_BYTES = {"gib": 2**30, "gb": 2**30, "mib": 2**20, "mb": 2**20, "kib": 2**10, "bytes": 1, "b": 1}
_SECONDS = {"s": 1.0, "sec": 1.0, "secs": 1.0, "seconds": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6}
_VALUE = re.compile(r"^\s*([\d,]*\.?\d+)\s*(ms|µs|us|s|secs?|seconds|gib|gb|mib|mb|kib|bytes)?\b", re.I)
# Numbers an engine writes into the line outside the marker's own text (SGLang's f-strings span lines).
_LOOSE_S = re.compile(r"(?:elapsed=|Time elapsed:\s*)([\d.]+)\s*s\b")
_LOOSE_B = re.compile(r"mem usage=([\d.]+)\s*GB")
# Time stamps: llama.cpp's `0.00.017.782` (minutes.seconds.milliseconds.microseconds since start) here; the
# wall-clock ones (vLLM `INFO 11-21 15:07:28`, SGLang `[2025-01-01 12:00:00]`, TGI `2024-05-01T12:00:00.12Z`) in
# triage/core/log_text.py.
_LLAMA = re.compile(r"^(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) ")


@dataclass(frozen=True)
class Marker:
    phase: str
    edge: str
    pattern: re.Pattern[str]
    units: tuple[str, ...]          # per group: "s", "bytes" or "" (text)
    head: str = ""                  # its literal text up to the first placeholder, escaped


@cache
def compile_marker(phase: str, edge: str, text: str) -> Marker:
    """A marker's pattern, compiled once per format string (the logs probe runs every `triage watch` cycle)."""
    text = text.rstrip()
    parts, units, pos = [], [], 0
    for m in _PLACEHOLDER.finditer(text):
        parts.append(re.escape(text[pos:m.start()]))
        after = text[m.end():].lstrip().lower()
        unit = next((u for u in ("seconds", "secs", "sec", "gib", "gb", "mib", "mb", "bytes", "s")
                     if after.startswith(u) and not after[len(u):len(u) + 1].isalpha()), "")
        numeric = bool(_NUMERIC.fullmatch(m.group())) or unit != ""
        parts.append(r"([\d.,]+(?:ms|µs|us|s)?)" if numeric else r"(.*?)")
        units.append("s" if unit in ("seconds", "secs", "sec", "s") else "bytes:" + unit if unit else
                     ("dur" if m.group() == "{:?}" else ""))
        pos = m.end()
    parts.append(re.escape(text[pos:]))
    first = _PLACEHOLDER.search(text)
    head = re.escape(text[:first.start()] if first else text)
    return Marker(phase, edge, re.compile("".join(parts)), tuple(units), head or re.escape(text))


def markers_of(engine: Engine, version: str | None = None) -> list[Marker]:
    return [compile_marker(phase, edge, form) for (phase, edge), forms in startup_markers(engine, version).items()
            for form in forms]


def line_time(line: str) -> float | None:
    """Seconds on some fixed scale from the line's own time stamp, or None."""
    if m := _LLAMA.match(line):
        mi, s, ms, us = (int(g) for g in m.groups())
        return mi * 60 + s + ms / 1e3 + us / 1e6
    return stamp_s(line)


def _numbers(marker: Marker, m: re.Match[str], line: str) -> tuple[float | None, int | None]:
    seconds = size = None
    for unit, raw in zip(marker.units, m.groups(), strict=False):
        v = _VALUE.match(raw or "")
        if not unit or v is None:
            continue
        value = float(v.group(1).replace(",", ""))
        if unit == "s":
            seconds = value
        elif unit == "dur":
            seconds = value * _SECONDS.get((v.group(2) or "s").lower(), 1.0)
        elif unit.startswith("bytes:"):
            size = int(value * _BYTES[unit[6:]])
    rest = line[m.start():]
    if seconds is None and (s := _LOOSE_S.search(rest)):
        seconds = float(s.group(1))
    if size is None and (b := _LOOSE_B.search(rest)):
        size = int(float(b.group(1)) * _BYTES["gb"])
    return seconds, size


@dataclass
class Phase:
    phase: str
    label: str
    seconds: float | None = None             # as the engine logged it, else between its lines
    logged: bool = False                     # seconds from the engine's own line
    bytes: int | None = None
    bandwidth_bytes_per_s: float | None = None   # weight download and load only: bytes / seconds
    started_at_s: float | None = None        # since the start (the launch, or the log's first stamped line)
    ended_at_s: float | None = None
    completed: bool = False
    line: str | None = None                  # the line that ended it


@dataclass
class Startup:
    engine: str | None = None
    num_starts: int = 0
    phases: list[Phase] = field(default_factory=list)      # of the last start
    ready_s: float | None = None                           # to the API server's ready line (or health answer)
    phases_total_s: float | None = None
    compile_s_each_start: list[float] = field(default_factory=list)
    cuda_graph_s_each_start: list[float] = field(default_factory=list)
    download_s_each_start: list[float] = field(default_factory=list)
    # Seconds from one start's first line to the next start's: how long each replica ran before it restarted
    # (known where the log's lines carry times), oldest first.
    start_gaps_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.phase == name), None)


def marker_anchor(marks: list[Marker]) -> re.Pattern[str]:
    """One alternation of each marker's literal text up to its first placeholder: a cheap filter that lets only
    candidate lines reach the markers' own patterns (a 64 MiB log is hundreds of thousands of lines)."""
    heads = {mk.head for mk in marks if mk.head}
    return re.compile("|".join(sorted(heads, key=len, reverse=True)) or "(?!)")


def _events(lines, marks: list[Marker]) -> list[tuple[float | None, Marker, float | None, int | None, str]]:
    out = []
    anchor = marker_anchor(marks)
    lines = list(lines)
    for i, (t, line) in enumerate(lines):
        if not anchor.search(line):
            continue
        for mk in marks:
            if m := mk.pattern.search(line):
                if t is None:
                    t = line_time(line)
                back = i
                while t is None and back > 0 and i - back < 50:   # an unstamped line (uvicorn's) is as late as
                    back -= 1                                      # the stamped one before it
                    t = lines[back][0] if lines[back][0] is not None else line_time(lines[back][1])
                seconds, size = _numbers(mk, m, line)
                out.append((t, mk, seconds, size, line.strip()[:300]))
                break
    return out


def parse_startup(lines, engine: Engine, version: str | None = None, t0: float | None = None) -> Startup:
    """`lines`: (arrival seconds or None, text). `t0`: the launch time on the same scale (coldstart), else the
    first stamped line. A begin line of the first phase seen again opens a new start (a restart in one log)."""
    lines = [(t, text) for t, text in lines]
    events = _events(lines, markers_of(engine, version))
    if t0 is None:
        t0 = next((t for t in (a if a is not None else line_time(b) for a, b in lines) if t is not None), None)
    starts: list[list] = []
    first_key = None
    for ev in events:
        key = (ev[1].phase, ev[1].edge)
        if first_key is None:
            first_key = key
        if key == first_key or not starts:
            starts.append([])
        starts[-1].append(ev)
    out = Startup(engine=engine.name, num_starts=len(starts))
    for run in starts:
        phases = _phases(run, t0 if run is starts[0] else None)
        _take_out_contained(phases, engine, version)
        for name, bucket in (("compile", out.compile_s_each_start), ("cuda_graph", out.cuda_graph_s_each_start),
                             ("download", out.download_s_each_start)):
            p = next((p for p in phases if p.phase == name and p.seconds is not None), None)
            if p is not None:
                bucket.append(p.seconds)
        out.phases = phases
    firsts = [next((ev[0] for ev in run if ev[0] is not None), None) for run in starts]
    out.start_gaps_s = [round(b - a, 3) for a, b in zip(firsts, firsts[1:], strict=False)
                        if a is not None and b is not None and b > a]
    if starts:
        last = starts[-1]
        base = t0 if len(starts) == 1 else next((ev[0] for ev in last if ev[0] is not None), None)
        ready = next((ev[0] for ev in last if ev[1].phase == "api_server" and ev[1].edge == "end"), None)
        if ready is not None and base is not None:
            out.ready_s = round(ready - base, 3)
    known = [p.seconds for p in out.phases if p.seconds is not None]
    out.phases_total_s = round(sum(known), 3) if known else None
    return out


class _PhaseWalk:
    """The phases of one start, built marker by marker in log order."""

    def __init__(self, run: list, t0: float | None):
        self.by: dict[str, Phase] = {}
        self.t0 = t0
        self.prev_end = t0
        self.base = t0 if t0 is not None else next((ev[0] for ev in run if ev[0] is not None), None)
        self.begins: dict[str, float | None] = {}
        self.nested: dict[str, list[Phase]] = {}     # open phase -> the phases that ended inside it

    def rel(self, t: float | None) -> float | None:
        return None if t is None or self.base is None else round(t - self.base, 3)

    def begin(self, p: Phase, t: float | None) -> None:
        self.begins[p.phase] = t
        self.nested[p.phase] = []
        prev_end = self.prev_end
        if prev_end is not None and t is not None and self.t0 is not None and t - prev_end > 0 and len(self.by) == 1:
            self.by["process"] = Phase("process", LABELS["process"], seconds=round(t - prev_end, 3),
                                       started_at_s=0.0, ended_at_s=self.rel(t), completed=True)
        p.started_at_s = self.rel(t)

    def end(self, p: Phase, t: float | None, seconds: float | None, size: int | None, line: str) -> None:
        start = self.begins.get(p.phase, self.prev_end)
        opened = [name for name in self.nested if name != p.phase and not self.by[name].completed]
        if p.phase not in self.begins and opened and self.begins[opened[-1]] is not None and start is not None:
            start = max(start, self.begins[opened[-1]])      # it ran inside the phase still open
        p.started_at_s = p.started_at_s if p.started_at_s is not None else self.rel(start)
        p.ended_at_s, p.completed, p.line = self.rel(t), True, line
        self._time(p, t, start, seconds)
        for name in opened:
            if name in self.nested:
                self.nested[name].append(p)
        if size is not None:
            p.bytes = size
        if p.phase in ("weight_load", "download") and p.bytes and p.seconds:
            p.bandwidth_bytes_per_s = round(p.bytes / p.seconds, 1)
        self.prev_end = t if t is not None else self.prev_end

    def _time(self, p: Phase, t: float | None, start: float | None, seconds: float | None) -> None:
        if seconds is not None:
            p.seconds, p.logged = round(seconds, 3), True
        elif t is not None and start is not None:
            p.seconds = round(t - start, 3)
        # A phase that ended inside another (vLLM downloads inside its model load; TGI warms up after its web
        # server starts) is taken out of the outer one, so that the phases add up.
        inner = self.nested.pop(p.phase, [])
        inner_s = sum(q.seconds for q in inner if q.seconds is not None)
        if p.seconds is not None and inner_s and p.seconds > inner_s:
            p.seconds = round(p.seconds - inner_s, 3)


def _phases(run: list, t0: float | None) -> list[Phase]:
    walk = _PhaseWalk(run, t0)
    for t, mk, seconds, size, line in run:
        p = walk.by.setdefault(mk.phase, Phase(mk.phase, LABELS[mk.phase]))
        if mk.edge == "begin":
            walk.begin(p, t)
        else:
            walk.end(p, t, seconds, size, line)
    return sorted(walk.by.values(), key=lambda p: p.phase != "process")   # else in the order the log shows them


def _take_out_contained(phases: list[Phase], engine: Engine, version: str | None) -> None:
    """A phase the engine reports after the fact (`startup.<phase>.within` names the phase whose interval held
    it) is taken out of that phase's interval."""
    by = {p.phase: p for p in phases}
    for p in phases:
        outer = by.get(next(iter(engine.log_marker(f"startup.{p.phase}.within", version)), ""))
        if outer is not None and p.seconds and outer.seconds and not outer.logged and outer.seconds > p.seconds:
            outer.seconds = round(outer.seconds - p.seconds, 3)
            p.started_at_s = outer.ended_at_s - p.seconds if outer.ended_at_s is not None else p.started_at_s
            p.ended_at_s = outer.ended_at_s


def candidate_lines(lines: list[str], candidates: tuple[Engine, ...]) -> list[str]:
    """The lines any of these engines' markers could match, each with the line before it (its time stamp, for an
    unstamped one) and the log's first line (the start of its clock): what parsing a long log needs."""
    anchor = marker_anchor([mk for e in candidates for mk in markers_of(e)])
    keep = {0} if lines else set()
    for i, line in enumerate(lines):
        if anchor.search(line):
            keep.update((i - 1, i) if i else (i,))
    return [lines[i] for i in sorted(keep)]


def guess_engine(lines, candidates: tuple[Engine, ...]) -> Engine | None:
    """The engine whose start-up markers match the most of these lines (None when none matches)."""
    best, best_n = None, 0
    for engine in candidates:
        n = len(_events(lines, markers_of(engine)))
        if n > best_n:
            best, best_n = engine, n
    return best
