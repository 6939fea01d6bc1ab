"""`triage compare`: the CI gate. Bench reports are judged metric by metric (threshold AND
significance); diagnose reports by new findings."""
from __future__ import annotations

from dataclasses import dataclass

from triage.compare.bench_diff import MetricComparison, Verdict, compare_bench
from triage.compare.findings_diff import FindingsDiff, compare_findings
from triage.compare.thresholds import MetricRule
from triage.core.errors import EXIT_GATE, EXIT_OK, ReportError
from triage.core.report import Report, ReportKind, Severity

SUPPORTED_KINDS = (ReportKind.BENCH, ReportKind.DIAGNOSE)


@dataclass(frozen=True, slots=True)
class CompareResult:
    kind: ReportKind
    metrics: tuple[MetricComparison, ...] = ()
    findings: FindingsDiff | None = None
    fail_on: Severity = Severity.HIGH
    notes: tuple[str, ...] = ()

    @property
    def failures(self) -> int:
        if self.kind is ReportKind.BENCH:
            return sum(1 for m in self.metrics if m.failed)
        return len(self.findings.gate(self.fail_on)) if self.findings else 0

    @property
    def exit_code(self) -> int:
        return EXIT_GATE if self.failures else EXIT_OK


def compare_reports(base: Report, cand: Report, rules: tuple[MetricRule, ...],
                    fail_on: Severity = Severity.HIGH, seed: int = 0) -> CompareResult:
    if base.kind is not cand.kind:
        raise ReportError(f"cannot compare a {base.kind.value} report with a {cand.kind.value} report")
    if base.kind not in SUPPORTED_KINDS:
        raise ReportError(f"compare reads bench and diagnose reports, not {base.kind.value} reports")
    if base.kind is ReportKind.DIAGNOSE:
        return CompareResult(ReportKind.DIAGNOSE, findings=compare_findings(base, cand), fail_on=fail_on)
    rows = tuple(compare_bench(base, cand, rules, seed))
    notes = []
    if any(m.note and "threshold alone" in m.note for m in rows):
        notes.append("Some metrics had no per-request samples or repeats in both reports: they were judged "
                     "on the threshold alone, without a significance test.")
    if any(m.verdict is Verdict.WITHIN_NOISE for m in rows):
        notes.append("within_noise: past the threshold, but neither the 95% interval of the change nor the one-sided "
                     "test (p < 0.05) shows the candidate is worse.")
    return CompareResult(ReportKind.BENCH, metrics=rows, fail_on=fail_on, notes=tuple(notes))
