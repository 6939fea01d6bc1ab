"""`triage compare` as one call: parse the gate's options, load both inputs, judge, and build the report."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triage.compare import CompareResult, InconclusivePolicy, compare_reports
from triage.compare.comparability import parse_allow
from triage.compare.section import section
from triage.compare.thresholds import parse_max_regression
from triage.core.errors import UsageError
from triage.core.report import Report, ReportKind, Severity, Target, new_report


@dataclass(frozen=True)
class CompareOptions:
    base: Path
    cand: Path
    max_regression: str | None = None
    allow_different: str | None = None
    inconclusive: str = "pass"
    fail_on: str = "high"
    seed: int = 0


@dataclass(frozen=True)
class CompareView:
    """What compare's text and JUnit formats render beyond the report: the result and the inputs' names."""
    result: CompareResult
    base: str
    cand: str


def _severity(fail_on: str) -> Severity:
    try:
        return Severity(fail_on)
    except ValueError:
        raise UsageError(f"--fail-on {fail_on!r} is not one of {', '.join(s.value for s in Severity)}") from None


def run_compare(opts: CompareOptions, load: Callable[[Path], Report]) -> tuple[Report, CompareView]:
    """Judge CAND against BASE, each read by `load` (triage.importers.load_any: triage or peer files)."""
    from triage.probes.host import host_info

    severity = _severity(opts.fail_on)
    rules = parse_max_regression(opts.max_regression)
    allow = parse_allow(opts.allow_different)
    policy = InconclusivePolicy.parse(opts.inconclusive)
    base_report, cand_report = load(opts.base), load(opts.cand)
    result = compare_reports(base_report, cand_report, rules, fail_on=severity, seed=opts.seed, allow=allow,
                             policy=policy)
    target = cand_report.target
    report = new_report(ReportKind.COMPARE, host_info(),
                        Target(model=target.model, engine=target.engine, url=target.url,
                               engine_version=target.engine_version),
                        compare={**section(result), "base": str(opts.base), "candidate": str(opts.cand)})
    return report, CompareView(result, str(opts.base), str(opts.cand))
