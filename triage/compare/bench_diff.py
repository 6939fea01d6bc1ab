"""Compare the levels of two bench reports metric by metric, with one decision rule.

For each metric × level, the 95% interval of the relative change decides, against the metric's limit L
(worse direction positive):
- regression: the whole interval is worse than L (low > L);
- pass: the whole interval is within L (high <= L);
- inconclusive: it straddles L. Whether that fails the gate is the `--inconclusive` policy.

The interval comes from the repeats when both reports have them (run-to-run noise), else from the
per-request samples of each run (within-run noise only: the note says so). With neither there is no
interval: the point change is judged against L alone and the row is marked "threshold only" (NO_INTERVAL_RULE);
--inconclusive has no say over it.

A level whose measurements are the same on both sides (the same report twice, say) is not judged at all: the
change is exactly zero, every row passes as "no change (same data)" (SAME_DATA)."""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from triage.compare.significance import (
    Interval,
    bootstrap_change_pct,
    mann_whitney_p_greater,
    needed_to_settle,
    welch_change_pct,
)
from triage.compare.thresholds import LATENCY_FAMILIES, Direction, MetricRule, repeat_key
from triage.core.convert import to_dict
from triage.core.errors import ReportError
from triage.core.report import BenchLevel, Report, level_name

WITHIN_RUN = "per-request samples of one run: within-run noise only (use --repeat 3 for run-to-run noise)"
THRESHOLD_ONLY = "threshold only"
SAME_DATA = "same data"                 # the source of a row whose two levels hold the same measurements
SAME_DATA_NOTE = "no change (same data)"
# The one rule for a metric without an interval, and what --inconclusive governs. README.md, docs/COMPARE.md and
# `triage compare --help` quote these sentences word for word (tests/test_compare_threshold_only.py checks).
NO_INTERVAL_RULE = ("A metric with neither repeats nor per-request samples is judged on its point change against "
                    "the limit and marked threshold only.")
INCONCLUSIVE_RULE = "--inconclusive governs only intervals that straddle the limit."
THRESHOLD_ONLY_NOTE = ("no repeats or per-request samples: the point change is judged against the limit "
                       "(threshold only); run both with --repeat 3 for an interval")


class Verdict(str, enum.Enum):
    REGRESSION = "regression"
    PASS = "pass"
    INCONCLUSIVE = "inconclusive"
    NOT_MEASURED = "not_measured"          # missing on one side


@dataclass(frozen=True, slots=True)
class MetricComparison:
    level: str
    metric: str
    direction: Direction
    base: float | None
    cand: float | None
    change_pct: float | None               # + means the candidate's number is larger
    max_regression_pct: float
    interval: Interval | None              # of change_pct (same sign convention)
    verdict: Verdict
    note: str | None = None
    p_value_worse: float | None = None     # for the record only; the interval decides
    source: str | None = None              # "repeats", "samples", "e2e samples (Little's law)", "threshold only"
    settle: str | None = None              # for inconclusive rows: what would settle it
    settle_n: int | None = None            # … and the values a side that would (None: no number would)

    @property
    def threshold_only(self) -> bool:
        return self.source == THRESHOLD_ONLY

    @property
    def same_data(self) -> bool:
        return self.source == SAME_DATA

    @property
    def worse_pct(self) -> float | None:
        if self.change_pct is None:
            return None
        return self.change_pct if self.direction is Direction.LOWER_IS_BETTER else -self.change_pct


LevelKey = tuple[str, float, int | None]


def level_key(level: BenchLevel) -> LevelKey:
    """What makes two levels the same load point: the load (concurrency or rate) and, in an --input-len sweep,
    the prompt length (None for a single-length run, so such reports match each other as before)."""
    if level.concurrency is not None:
        return ("concurrency", float(level.concurrency), level.input_len)
    if level.request_rate is not None:
        return ("rate", float(level.request_rate), level.input_len)
    raise ReportError("a bench level has neither concurrency nor request_rate")


def _value(level: BenchLevel, metric: str) -> float | None:
    family, _, stat = metric.partition(".")
    if family in LATENCY_FAMILIES:
        return getattr(getattr(level, family), stat)
    return getattr(level, metric)


def _repeat_values(level: BenchLevel, metric: str) -> list[float]:
    key = repeat_key(metric)
    return [r[key] for r in (level.repeats or []) if isinstance(r, dict) and r.get(key) is not None]


def _samples(level: BenchLevel, family: str) -> list[float]:
    return list((level.samples or {}).get(family) or [])


def _interval(base_lv: BenchLevel, cand_lv: BenchLevel, metric: str, change: float,
              seed: int) -> tuple[Interval | None, float | None, str | None]:
    """(interval of the change in %, one-sided p that the candidate's number is larger, source)."""
    base_r, cand_r = _repeat_values(base_lv, metric), _repeat_values(cand_lv, metric)
    if len(base_r) >= 2 and len(cand_r) >= 2:
        welch = welch_change_pct(base_r, cand_r)
        if welch is not None:
            return welch[0], welch[1], "repeats"
    family, _, stat = metric.partition(".")
    if family in LATENCY_FAMILIES:
        b, c = _samples(base_lv, family), _samples(cand_lv, family)
        interval = bootstrap_change_pct(b, c, stat, seed)
        return (interval, mann_whitney_p_greater(b, c), "samples") if interval else (None, None, None)
    # A throughput at a concurrency level, without repeats: a closed loop of C clients completes C / mean(E2E)
    # requests a second (Little's law), so the sampling noise of mean E2E is the noise of the rate. The
    # interval is that of the rate implied by mean E2E, shifted onto the measured change.
    if base_lv.concurrency is None or cand_lv.concurrency is None:
        return None, None, None
    b, c = _samples(base_lv, "e2e_ms"), _samples(cand_lv, "e2e_ms")

    def implied(sb, sc):
        return 100.0 * (sb / sc - 1.0)

    interval = bootstrap_change_pct(b, c, "mean", seed, transform=implied)
    if interval is None or not b or not c:
        return None, None, None
    # Shifted on the ratio scale (a factor, not an offset in points), so that the low end of a rate's change
    # stays above −100% as the rate itself stays above zero.
    factor = (1.0 + change / 100.0) / (1.0 + implied(sum(b) / len(b), sum(c) / len(c)) / 100.0)

    def shifted(pct_value: float) -> float:
        return 100.0 * ((1.0 + pct_value / 100.0) * factor - 1.0)

    p_lower = mann_whitney_p_greater(b, c)            # candidate's E2E larger = its rate lower
    return (Interval(shifted(interval.low_pct), shifted(interval.high_pct), interval.method, interval.n_base,
                     interval.n_cand), None if p_lower is None else 1.0 - p_lower, "e2e samples (Little's law)")


def settle_text(n: int | None, source: str | None, have: int, what: str = "it") -> str:
    """What would settle an inconclusive row (or several: `what`), in words."""
    if n is None:
        return f"the change sits on the limit: no sample size settles {what}"
    unit = "repeats" if source == "repeats" else "requests"
    return f"about {n} {unit} a side would settle {what} (have {have})" + (
        "; or run both with --repeat 3" if source != "repeats" else "")


def judge(level: str, rule: MetricRule, base_lv: BenchLevel, cand_lv: BenchLevel, seed: int = 0) -> MetricComparison:
    base, cand = _value(base_lv, rule.metric), _value(cand_lv, rule.metric)
    if base is None or cand is None:
        return MetricComparison(level, rule.metric, rule.direction, base, cand, None, rule.max_regression_pct,
                                None, Verdict.NOT_MEASURED, "missing in " + ("base" if base is None else "candidate"))
    if base == 0:
        change = 0.0 if cand == 0 else float("inf") * (1 if cand > 0 else -1)
    else:
        change = 100.0 * (cand - base) / abs(base)
    lower_better = rule.direction is Direction.LOWER_IS_BETTER
    interval, p_larger, source = _interval(base_lv, cand_lv, rule.metric, change, seed)
    limit = rule.max_regression_pct
    p_worse = None if p_larger is None else (p_larger if lower_better else 1.0 - p_larger)
    if interval is None:
        # No spread can be estimated: the measured change is judged against the limit on its own (threshold
        # only). A gate that passed a clear breach for want of an interval would not be a gate.
        worse = change if lower_better else -change
        verdict = Verdict.REGRESSION if worse > limit else Verdict.PASS
        return MetricComparison(level, rule.metric, rule.direction, base, cand, change, limit, None, verdict,
                                THRESHOLD_ONLY_NOTE, None, THRESHOLD_ONLY, None)
    low_w, high_w = ((interval.low_pct, interval.high_pct) if lower_better
                     else (-interval.high_pct, -interval.low_pct))
    settle = settle_n = None
    if low_w > limit:
        verdict = Verdict.REGRESSION
    elif high_w <= limit:
        verdict = Verdict.PASS
    else:
        verdict = Verdict.INCONCLUSIVE
        settle_n = needed_to_settle(interval, low_w, high_w, limit)
        settle = settle_text(settle_n, source, max(interval.n_base, interval.n_cand))
    note = WITHIN_RUN if source != "repeats" else None
    return MetricComparison(level, rule.metric, rule.direction, base, cand, change, limit, interval, verdict,
                            note, p_worse, source, settle, settle_n)


def same_measurements(base_lv: BenchLevel, cand_lv: BenchLevel) -> bool:
    """Whether two levels hold the same measurements: every value, sample and repeat alike."""
    return json.dumps(to_dict(base_lv), sort_keys=True) == json.dumps(to_dict(cand_lv), sort_keys=True)


def unchanged(level: str, rule: MetricRule, lv: BenchLevel) -> MetricComparison:
    """A metric of a level whose two sides hold the same measurements: no change, nothing to estimate."""
    value = _value(lv, rule.metric)
    if value is None:
        return MetricComparison(level, rule.metric, rule.direction, None, None, None, rule.max_regression_pct,
                                None, Verdict.NOT_MEASURED, "missing in base and candidate")
    return MetricComparison(level, rule.metric, rule.direction, value, value, 0.0, rule.max_regression_pct, None,
                            Verdict.PASS, SAME_DATA_NOTE, None, SAME_DATA)


def _levels_by_key(report: Report, which: str) -> dict[LevelKey, BenchLevel]:
    out: dict[LevelKey, BenchLevel] = {}
    for lv in report.bench.levels:
        key = level_key(lv)
        if key in out:
            raise ReportError(f"the {which} report has level {level_name(lv)} twice; compare cannot tell which "
                              "to match (run it once with --repeat K instead)")
        out[key] = lv
    return out


def compare_bench(base: Report, cand: Report, rules: tuple[MetricRule, ...],
                  seed: int = 0) -> tuple[list[MetricComparison], list[str]]:
    """(rows for the levels both reports have, the names of levels only one of them has)."""
    base_levels, cand_levels = _levels_by_key(base, "base"), _levels_by_key(cand, "candidate")
    shared = [k for k in base_levels if k in cand_levels]
    if not shared:
        def names(levels):
            return ", ".join(level_name(lv) for lv in levels.values()) or "none"
        raise ReportError(f"no bench level appears in both reports (base: {names(base_levels)}; "
                          f"candidate: {names(cand_levels)})")
    only = [f"{level_name(lv)} (base only)" for k, lv in base_levels.items() if k not in cand_levels]
    only += [f"{level_name(lv)} (candidate only)" for k, lv in cand_levels.items() if k not in base_levels]
    rows = []
    for key in shared:
        name, base_lv, cand_lv = level_name(base_levels[key]), base_levels[key], cand_levels[key]
        same = same_measurements(base_lv, cand_lv)
        for rule in rules:
            rows.append(unchanged(name, rule, base_lv) if same else judge(name, rule, base_lv, cand_lv, seed))
    return rows, only
