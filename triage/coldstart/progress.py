"""What `triage coldstart` says on stderr while a start is under way: the launch, each phase as the log reveals
it, and a heartbeat every ~10 s, so a slow start does not look hung. A start quicker than `QUIET_FOR_S` says
nothing; a slower one prints what it held back and goes on live. Plain lines when stderr is not a terminal
(a CI log, a pipe); on a terminal the heartbeat is a rich status line instead."""
from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.status import Status

from triage.core.redact import redact_text
from triage.engines.base import Engine
from triage.engines.startup_log import parse_startup

QUIET_FOR_S = 2.0     # a wait shorter than this prints nothing
HEARTBEAT_S = 10.0    # a "still waiting" line this often
REPARSE_S = 0.5       # read the log for phases at most this often


def _secs(x: float) -> str:
    return f"{x:.1f} s" if x >= 1 else f"{x:.2f} s"


class Progress:
    """One start's progress. `out` None: silent. `tick` is called from the wait loop with the seconds since the
    launch and the log lines so far ((arrival seconds, text)); `close` ends it on every way out."""

    def __init__(self, out: Console | None, engine: Engine | None, timeout_s: float, prefix: str = "coldstart: ",
                 quiet_for_s: float = QUIET_FOR_S, heartbeat_s: float = HEARTBEAT_S):
        self.out, self.engine, self.timeout_s, self.prefix = out, engine, timeout_s, prefix
        self.quiet_for_s, self.heartbeat_s = quiet_for_s, heartbeat_s
        self.live = False
        self._held: list[str] = []
        self._started: set[str] = set()
        self._ended: set[str] = set()
        self._last_phase: str | None = None
        self._last_beat = 0.0
        self._parsed = (-1, -REPARSE_S)       # (lines read, when)
        self._status: Status | None = None

    def say(self, text: str) -> None:
        if self.out is None:
            return
        if not self.live:
            self._held.append(text)
        else:
            self.out.print(self.prefix + text, markup=False, highlight=False, soft_wrap=True)

    def started(self, pid: int, where: str | None, health: str) -> None:
        target = where + health if where else f"{health} at the address its log prints"
        self.say(f"started pid {pid}, waiting up to {self.timeout_s:g} s for {target}")

    def tick(self, elapsed: float, lines: Sequence[tuple[float, str]]) -> None:
        if self.out is None:
            return
        if not self.live and elapsed >= self.quiet_for_s:
            self._go_live()
        self._phases(elapsed, lines)
        if not self.live:
            return
        if self._status is not None:
            self._status.update(f"waiting {elapsed:.0f} s of {self.timeout_s:g} s, {self._where(lines)}")
        elif elapsed - self._last_beat >= self.heartbeat_s:
            self._last_beat = elapsed
            self.say(f"still waiting: {elapsed:.0f} s, {self._where(lines)}")

    def ready(self, elapsed: float) -> None:
        self.say(f"ready after {elapsed:.1f} s; timing one request's first token")

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _go_live(self) -> None:
        assert self.out is not None
        self.live = True
        held, self._held = self._held, []
        for text in held:
            self.say(text)
        if self.out.is_terminal:
            self._status = self.out.status("waiting", spinner="dots")
            self._status.start()

    def _where(self, lines: Sequence[tuple[float, str]]) -> str:
        if self._last_phase is not None:
            return f"last phase: {self._last_phase}"
        if self.engine is not None or not lines:
            return "no phase in its log yet"
        return f"last log line: {redact_text(lines[-1][1]).strip()[:60]}"

    def _phases(self, elapsed: float, lines: Sequence[tuple[float, str]]) -> None:
        """Each phase once as it begins, and again as it ends (one line for a phase first seen ended)."""
        count, when = self._parsed
        if self.engine is None or len(lines) == count or elapsed - when < REPARSE_S:
            return
        self._parsed = (len(lines), elapsed)
        for p in parse_startup(list(lines), self.engine, t0=0.0).phases:
            if p.phase == "process" or p.started_at_s is None:
                continue
            if p.completed and p.phase not in self._ended:
                self._ended.add(p.phase)
                took = f" took {_secs(p.seconds)}" if p.seconds is not None else " done"
                since = "" if p.phase in self._started else f" (from {p.started_at_s:.1f} s)"
                self.say(f"{p.label}{took}{since}")
            elif not p.completed and p.phase not in self._started:
                self.say(f"{p.label} started at {p.started_at_s:.1f} s")
            self._started.add(p.phase)
            self._last_phase = p.label + ("" if p.completed else " (under way)")
