"""`triage bench --find-max concurrency|rate --slo ...`: the highest load whose SLO attainment meets the target.

The search brackets, then bisects: from a start load it doubles while a level passes, so the first failing
level and the last passing one bracket the answer; then it halves the bracket (integer midpoints for
concurrency, geometric ones for a rate) until it is narrow enough or the budget is spent. A level passes
when the share of its measured requests that met every SLO term reaches the target; failed requests are
misses. Each level also carries a 95% Wilson interval of its attainment (scipy), so the answer says how
sure it is. The search stops early when the server fails most requests or the client itself becomes the
bottleneck (the bench's validity verdict), since no higher load can then be measured honestly.

Pure: `search` takes a `measure(load)` function; the runner (find_max_runner.py) measures real levels.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy.stats import binomtest

from triage.core.errors import UsageError

MODES = ("concurrency", "rate")
SERVER_ERROR_FRAC = 0.5          # a level whose requests mostly failed ends the search


@dataclass(frozen=True, slots=True)
class FindMaxSpec:
    mode: str                          # "concurrency" | "rate"
    target_attainment: float = 0.99    # share of requests meeting the SLO, 0..1
    start: float = 1.0                 # first load tried
    limit: float = 1024.0              # never above this load
    rel_precision: float = 0.1         # a rate bracket is done when hi / lo <= 1 + this
    max_requests: int | None = None    # budget: requests sent in all levels
    max_duration_s: float | None = None  # budget: seconds of measuring

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"--find-max {self.mode!r}: use concurrency or rate")
        if not 0 < self.target_attainment <= 1:
            raise UsageError(f"--attainment {self.target_attainment:g}: must be in (0, 1]")
        if self.max_requests is not None and self.max_requests < 1:
            raise UsageError(f"--max-requests {self.max_requests}: must be at least 1")
        if self.max_duration_s is not None and self.max_duration_s <= 0:
            raise UsageError(f"--max-duration {self.max_duration_s:g}: must be > 0")


@dataclass(frozen=True, slots=True)
class Measured:
    """What one level at `load` measured (the runner fills it from a BenchLevel)."""

    load: float
    num_measured: int              # requests in the window, failed ones included
    num_met_slo: int
    num_failed: int
    client_bottleneck: bool = False
    client_reason: str | None = None
    level: str | None = None       # the level's name in the report
    requests_sent: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Probe:
    load: float
    level: str | None
    attainment: float | None
    attainment_ci95: tuple[float, float] | None
    num_measured: int
    passed: bool
    note: str | None = None


@dataclass(slots=True)
class FindMaxResult:
    mode: str
    target_attainment: float
    answer: float | None = None              # the highest load that passed (None: not even the first)
    bracket: tuple[float | None, float | None] = (None, None)   # (last passing, first failing)
    stop_reason: str = ""
    probes: list[Probe] = field(default_factory=list)
    requests_sent: int = 0
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["bracket"] = list(self.bracket)
        out["probes"] = [{**asdict(p), "attainment_ci95": list(p.attainment_ci95) if p.attainment_ci95 else None}
                         for p in self.probes]
        return out


def wilson_ci95(met: int, n: int) -> tuple[float, float] | None:
    if n <= 0:
        return None
    ci = binomtest(met, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def _judge(m: Measured, target: float) -> Probe:
    attainment = m.num_met_slo / m.num_measured if m.num_measured else None
    passed = attainment is not None and attainment >= target and not m.client_bottleneck
    note = None
    if m.client_bottleneck:
        note = f"client was the bottleneck: {m.client_reason or 'see the level'}"
    elif m.num_measured and m.num_failed / m.num_measured >= SERVER_ERROR_FRAC:
        note = f"{m.num_failed}/{m.num_measured} requests failed"
    return Probe(m.load, m.level, attainment, wilson_ci95(m.num_met_slo, m.num_measured), m.num_measured, passed,
                 note)


def _midpoint(lo: float, hi: float, mode: str) -> float | None:
    """The next load to try inside (lo, hi), or None when the bracket cannot be split further."""
    if mode == "concurrency":
        mid = (int(lo) + int(hi)) // 2
        return float(mid) if int(lo) < mid < int(hi) else None
    return math.sqrt(lo * hi)


class _Search:
    """One search's state: the probes run so far, its budgets, and the bracket [lo, hi]."""

    def __init__(self, measure: Callable[[float], Measured], spec: FindMaxSpec,
                 progress: Callable[[Probe, FindMaxResult], None], requests_at: Callable[[float], int]):
        self.measure, self.spec, self.progress, self.requests_at = measure, spec, progress, requests_at
        self.result = FindMaxResult(spec.mode, spec.target_attainment)
        self.lo: float | None = None
        self.hi: float | None = None

    def budget_left(self, next_load: float) -> str | None:
        spec, result = self.spec, self.result
        if spec.max_requests is not None and \
                result.requests_sent + max(1, self.requests_at(next_load)) > spec.max_requests:
            return (f"request budget: {result.requests_sent} sent, a level at {next_load:g} needs "
                    f"{self.requests_at(next_load)} more than --max-requests {spec.max_requests} allows")
        if spec.max_duration_s is not None and result.duration_s >= spec.max_duration_s:
            return f"time budget spent ({result.duration_s:.0f} s of --max-duration {spec.max_duration_s:g} s)"
        return None

    def run(self, load: float) -> Probe | None:
        """Measure at `load`; None (the stop reason set) when the budget does not allow it."""
        if (why := self.budget_left(load)) is not None:
            self.result.stop_reason = why
            return None
        m = self.measure(load)
        self.result.requests_sent += m.requests_sent
        self.result.duration_s += m.duration_s
        probe = _judge(m, self.spec.target_attainment)
        self.result.probes.append(probe)
        self.progress(probe, self.result)
        return probe

    def bracket(self) -> None:
        """Double the load while it passes."""
        spec = self.spec
        load = float(max(1, round(spec.start)) if spec.mode == "concurrency" else spec.start)
        while (probe := self.run(load)) is not None:
            if not probe.passed:
                self.hi = load
                if probe.note:
                    self.result.stop_reason = f"stopped early at {load:g}: {probe.note}"
                return
            self.lo = load
            if load >= spec.limit:
                self.result.stop_reason = f"passed at the limit {spec.limit:g}: the answer is at least that"
                return
            load = min(spec.limit, load * 2)

    def bisect(self) -> None:
        """Narrow (lo, hi) when both ends are known."""
        while self.lo is not None and self.hi is not None and not self.result.stop_reason.startswith("stopped early"):
            lo, hi = self.lo, self.hi
            if self.spec.mode == "rate" and hi / lo <= 1 + self.spec.rel_precision:
                return
            mid = _midpoint(lo, hi, self.spec.mode)
            if mid is None or (probe := self.run(mid)) is None:
                return
            if probe.passed:
                self.lo = mid
            else:
                self.hi = mid
                if probe.note:
                    self.result.stop_reason = f"stopped early at {mid:g}: {probe.note}"
                    return

    def finish(self) -> FindMaxResult:
        result, lo, hi = self.result, self.lo, self.hi
        result.answer, result.bracket = lo, (lo, hi)
        if not result.stop_reason:
            result.stop_reason = "bracket narrowed to its precision" if hi is not None else result.stop_reason
        if lo is None and hi is not None:
            result.stop_reason = (result.stop_reason + "; " if result.stop_reason else "") + \
                f"even the first load ({hi:g}) missed the SLO target"
        return result


def search(measure: Callable[[float], Measured], spec: FindMaxSpec,
           progress: Callable[[Probe, FindMaxResult], None] = lambda p, r: None,
           requests_at: Callable[[float], int] = lambda load: 0) -> FindMaxResult:
    """`requests_at(load)`: how many requests a level at `load` will send, so that no level is started that
    would overrun --max-requests."""
    walk = _Search(measure, spec, progress, requests_at)
    walk.bracket()
    walk.bisect()
    return walk.finish()
