"""Compare the findings of two diagnose reports: what is new, what was resolved."""
from __future__ import annotations

from dataclasses import dataclass

from triage.core.report import Finding, Report, Severity


@dataclass(frozen=True, slots=True)
class FindingsDiff:
    new: tuple[Finding, ...]
    resolved: tuple[Finding, ...]
    unchanged: tuple[Finding, ...]

    def gate(self, fail_on: Severity) -> tuple[Finding, ...]:
        return tuple(f for f in self.new if f.severity.at_least(fail_on))


def compare_findings(base: Report, cand: Report) -> FindingsDiff:
    base_codes = {f.code for f in base.findings}
    cand_codes = {f.code for f in cand.findings}
    return FindingsDiff(
        new=tuple(f for f in cand.findings if f.code not in base_codes),
        resolved=tuple(f for f in base.findings if f.code not in cand_codes),
        unchanged=tuple(f for f in cand.findings if f.code in base_codes),
    )
