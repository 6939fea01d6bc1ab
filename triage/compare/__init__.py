"""`triage compare`: the CI gate. Bench reports: comparability first (workload, model; what else changed),
then one decision rule per metric × level (regression / pass / inconclusive from the interval of the
relative change). Diagnose reports: new findings."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from triage.compare.bench_diff import (
    NO_INTERVAL_RULE,
    WITHIN_RUN,
    MetricComparison,
    Verdict,
    compare_bench,
)
from triage.compare.comparability import Difference, check_comparable
from triage.compare.findings_diff import FindingsDiff, compare_findings
from triage.compare.thresholds import MetricRule
from triage.core.drift import describe, drift_check
from triage.core.errors import EXIT_GATE, EXIT_OK, ReportError, UsageError
from triage.core.report import Report, ReportKind, Severity, level_name

SUPPORTED_KINDS = (ReportKind.BENCH, ReportKind.DIAGNOSE)


class InconclusivePolicy(str, enum.Enum):
    PASS = "pass"      # the default: the gate fails on regressions it can show; inconclusive rows are listed
    FAIL = "fail"      # a strict gate: an interval that reaches past the limit fails too

    @classmethod
    def parse(cls, value: str) -> InconclusivePolicy:
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"--inconclusive {value!r} is not one of pass, fail") from None


@dataclass(frozen=True, slots=True)
class CompareResult:
    kind: ReportKind
    metrics: tuple[MetricComparison, ...] = ()
    findings: FindingsDiff | None = None
    fail_on: Severity = Severity.HIGH
    notes: tuple[str, ...] = ()
    changed: tuple[Difference, ...] = ()
    policy: InconclusivePolicy = InconclusivePolicy.PASS
    # Levels whose first and last repeats differ beyond the noise within a repeat (triage.core.drift), in
    # either report: {"report": "base"|"candidate", "level": ..., **drift_check(...)}.
    drift: tuple[dict, ...] = ()
    # Every level of both reports is in the other, with the same measurements (the same report twice, say).
    same_data: bool = False

    def failed(self, m: MetricComparison) -> bool:
        return m.verdict is Verdict.REGRESSION or (
            m.verdict is Verdict.INCONCLUSIVE and self.policy is InconclusivePolicy.FAIL)

    def count(self, verdict: Verdict) -> int:
        return sum(1 for m in self.metrics if m.verdict is verdict)

    @property
    def failures(self) -> int:
        if self.kind is ReportKind.BENCH:
            return sum(1 for m in self.metrics if self.failed(m))
        return len(self.findings.gate(self.fail_on)) if self.findings else 0

    @property
    def exit_code(self) -> int:
        return EXIT_GATE if self.failures else EXIT_OK


def compare_reports(base: Report, cand: Report, rules: tuple[MetricRule, ...],
                    fail_on: Severity = Severity.HIGH, seed: int = 0,
                    allow: frozenset[str] = frozenset(),
                    policy: InconclusivePolicy = InconclusivePolicy.PASS) -> CompareResult:
    if base.kind is not cand.kind:
        raise ReportError(f"cannot compare a {base.kind.value} report with a {cand.kind.value} report")
    if base.kind not in SUPPORTED_KINDS:
        raise ReportError(f"compare reads bench and diagnose reports, not {base.kind.value} reports")
    if base.kind is ReportKind.DIAGNOSE:
        return CompareResult(ReportKind.DIAGNOSE, findings=compare_findings(base, cand), fail_on=fail_on)
    changed = check_comparable(base, cand, allow)
    rows, only = compare_bench(base, cand, rules, seed)
    same = not only and any(m.same_data for m in rows) and all(
        m.same_data or m.verdict is Verdict.NOT_MEASURED for m in rows)
    notes = []
    if only:
        notes.append(f"levels in one report only, not compared: {', '.join(only)}")
    if any(m.note == WITHIN_RUN for m in rows):
        notes.append("Intervals from per-request samples see within-run noise only; run both benches with "
                     "--repeat 3 for run-to-run noise.")
    if any(m.threshold_only for m in rows):
        notes.append(f"threshold only: {NO_INTERVAL_RULE} Run both with --repeat 3 for an interval.")
    if any(m.verdict is Verdict.INCONCLUSIVE for m in rows):
        notes.append(f"inconclusive: the interval straddles the limit; --inconclusive {policy.value} "
                     f"{'fails' if policy is InconclusivePolicy.FAIL else 'passes'} them.")
    drift = _drift(base, cand)
    for d in () if same else drift:          # one report's drift, twice over, says nothing about a change
        notes.append(describe(f"in the {d['report']} at {d['level']}", d) + "; intervals from its repeats carry "
                     "that spread (rerun on a quiet host, or keep --repeat-order rounds)")
    return CompareResult(ReportKind.BENCH, metrics=tuple(rows), fail_on=fail_on, notes=tuple(notes),
                         changed=tuple(changed), policy=policy, drift=drift, same_data=same)


def _drift(base: Report, cand: Report) -> tuple[dict, ...]:
    """The drift check of every level of both reports: the one bench wrote, else derived from the repeats."""
    out = []
    for which, report in (("base", base), ("candidate", cand)):
        for lv in report.bench.levels:
            check = lv.drift or drift_check(lv.repeats)
            if check and check.get("drifted"):
                out.append({"report": which, "level": level_name(lv), **check})
    return tuple(out)
