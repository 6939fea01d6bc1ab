"""Compare the levels of two bench reports metric by metric."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from triage.compare.significance import (
    ALPHA,
    MIN_SAMPLES,
    Interval,
    bootstrap_change_pct,
    mann_whitney_p_greater,
    welch_change_pct,
)
from triage.compare.thresholds import LATENCY_FAMILIES, Direction, MetricRule, repeat_key
from triage.core.errors import ReportError
from triage.core.report import BenchLevel, Report, level_name


class Verdict(str, enum.Enum):
    REGRESSION = "regression"
    WITHIN_NOISE = "within_noise"          # past the threshold, but not statistically significant
    OK = "ok"                              # within the threshold
    IMPROVED = "improved"
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
    interval: Interval | None
    verdict: Verdict
    note: str | None = None
    # One-sided Mann–Whitney p-value that the candidate is worse (None without samples).
    p_value_worse: float | None = None

    @property
    def failed(self) -> bool:
        return self.verdict is Verdict.REGRESSION


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


def _evidence(base_lv: BenchLevel, cand_lv: BenchLevel, metric: str) -> tuple[list[float], list[float], str, str] | None:
    """What the significance test compares: (base values, candidate values, statistic, source).

    Repeats (--repeat K, K >= 2 on both sides) come first: run-to-run spread is the noise a CI gate meets
    (host load, clocks, caches), and per-request samples from one run cannot see it. Without repeats,
    per-request samples judge latencies against within-run noise only, and the note says so."""
    base_r, cand_r = _repeat_values(base_lv, metric), _repeat_values(cand_lv, metric)
    if len(base_r) >= 2 and len(cand_r) >= 2:
        return base_r, cand_r, "mean", "repeats"
    family, _, stat = metric.partition(".")
    if family in LATENCY_FAMILIES:
        base_s, cand_s = (base_lv.samples or {}).get(family), (cand_lv.samples or {}).get(family)
        if base_s and cand_s:
            return base_s, cand_s, stat, "samples"
    return None


def _test(base_s: list[float], cand_s: list[float], stat: str, lower_better: bool,
          seed: int) -> tuple[Interval | None, float | None]:
    """(CI of the relative change, one-sided p that the candidate is worse). Many values a side: bootstrap of
    the statistic + Mann–Whitney. A few (repeats): Welch's t on the means."""
    if len(base_s) >= MIN_SAMPLES and len(cand_s) >= MIN_SAMPLES:
        interval = bootstrap_change_pct(base_s, cand_s, stat, seed)
        p_worse = mann_whitney_p_greater(base_s, cand_s) if lower_better else mann_whitney_p_greater(cand_s, base_s)
        return interval, p_worse
    welch = welch_change_pct(base_s, cand_s) if stat == "mean" else None
    if welch is None:
        return None, None
    interval, p_cand_larger = welch
    return interval, (p_cand_larger if lower_better else 1.0 - p_cand_larger)


def _judge(level: str, rule: MetricRule, base_lv: BenchLevel, cand_lv: BenchLevel, seed: int) -> MetricComparison:
    base, cand = _value(base_lv, rule.metric), _value(cand_lv, rule.metric)
    if base is None or cand is None:
        return MetricComparison(level, rule.metric, rule.direction, base, cand, None, rule.max_regression_pct,
                                None, Verdict.NOT_MEASURED, "missing in " + ("base" if base is None else "candidate"))
    if base == 0:
        change = 0.0 if cand == 0 else float("inf") * (1 if cand > 0 else -1)
    else:
        change = 100.0 * (cand - base) / abs(base)
    # Positive "worse" means the candidate moved in the bad direction.
    worse_pct = change if rule.direction is Direction.LOWER_IS_BETTER else -change
    evidence = _evidence(base_lv, cand_lv, rule.metric)
    interval = p_worse = None
    if evidence is not None:
        base_s, cand_s, stat, source = evidence
        interval, p_worse = _test(base_s, cand_s, stat, rule.direction is Direction.LOWER_IS_BETTER, seed)
    tested = interval is not None or p_worse is not None
    if not tested:
        note = "no per-request samples or repeats: judged on the threshold alone"
    elif source == "samples":
        note = "per-request samples of one run: within-run noise only (use --repeat for run-to-run noise)"
    else:
        note = None
    if worse_pct > rule.max_regression_pct:
        if not tested:
            verdict = Verdict.REGRESSION
        else:
            ci_bad = interval is not None and (
                interval.low_pct > 0 if rule.direction is Direction.LOWER_IS_BETTER else interval.high_pct < 0)
            rank_bad = p_worse is not None and p_worse < ALPHA
            verdict = Verdict.REGRESSION if (ci_bad or rank_bad) else Verdict.WITHIN_NOISE
    elif worse_pct < -rule.max_regression_pct:
        verdict = Verdict.IMPROVED
    else:
        verdict = Verdict.OK
    return MetricComparison(level, rule.metric, rule.direction, base, cand, change, rule.max_regression_pct,
                            interval, verdict, note, p_worse)


def _describe_model(report: Report) -> str:
    return report.target.model or "unknown model"


def check_comparable(base: Report, cand: Report) -> None:
    if base.bench is None or cand.bench is None:
        raise ReportError("a bench report without a bench section cannot be compared")
    if base.target.model and cand.target.model and base.target.model != cand.target.model:
        raise ReportError(f"the reports benchmark different models: base {_describe_model(base)!r}, "
                          f"candidate {_describe_model(cand)!r}")


def _levels_by_key(report: Report, which: str) -> dict[LevelKey, BenchLevel]:
    out: dict[LevelKey, BenchLevel] = {}
    for lv in report.bench.levels:
        key = level_key(lv)
        if key in out:
            raise ReportError(f"the {which} report has level {level_name(lv)} twice; compare cannot tell which "
                              "to match (run it once with --repeat K instead)")
        out[key] = lv
    return out


def compare_bench(base: Report, cand: Report, rules: tuple[MetricRule, ...], seed: int = 0) -> list[MetricComparison]:
    check_comparable(base, cand)
    base_levels, cand_levels = _levels_by_key(base, "base"), _levels_by_key(cand, "candidate")
    shared = [k for k in base_levels if k in cand_levels]
    if not shared:
        def names(levels):
            return ", ".join(level_name(lv) for lv in levels.values()) or "none"
        raise ReportError(f"no bench level appears in both reports (base: {names(base_levels)}; "
                          f"candidate: {names(cand_levels)})")
    rows = []
    for key in shared:
        name = level_name(base_levels[key])
        for rule in rules:
            rows.append(_judge(name, rule, base_levels[key], cand_levels[key], seed))
    return rows
