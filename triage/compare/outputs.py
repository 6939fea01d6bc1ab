"""A CompareResult as a report section (text/markdown/json) and as JUnit XML."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

from triage.compare import CompareResult
from triage.compare.bench_diff import MetricComparison, Verdict
from triage.core.report import Finding, ReportKind


def _pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "+inf%" if value > 0 else "-inf%"
    return f"{value:+.1f}%"


def _interval(m: MetricComparison) -> str:
    if m.verdict is Verdict.NOT_MEASURED:
        return "-"
    if m.interval is None and m.p_value_worse is None:
        return "threshold only"
    ci = f"[{m.interval.low_pct:+.1f}%, {m.interval.high_pct:+.1f}%]" if m.interval else "n/a"
    return ci if m.p_value_worse is None else f"{ci} p={m.p_value_worse:.2g}"


def _method(m: MetricComparison) -> str:
    if m.interval is not None and m.interval.method == "welch-t":
        return "welch-t (repeats)"
    return "bootstrap+mann-whitney" if m.interval or m.p_value_worse is not None else "threshold"


def metric_row(m: MetricComparison) -> list[Any]:
    return [m.level, m.metric, m.base, m.cand, _pct(m.change_pct), f"{m.max_regression_pct:g}%",
            _interval(m), m.verdict.value.upper() if m.failed else m.verdict.value]


def _finding_rows(label: str, findings: tuple[Finding, ...]) -> list[list[Any]]:
    return [[label, f.severity.value, f.code, f.title] for f in findings]


def section(result: CompareResult) -> dict[str, Any]:
    """The `compare` section of a kind=compare report: structured rows plus tables for people."""
    summary = {"kind": result.kind.value, "failures": result.failures,
               "verdict": "fail" if result.failures else "pass"}
    if result.kind is ReportKind.BENCH:
        columns = ["level", "metric", "base", "cand", "change", "limit", "95% CI of change, p(worse)", "verdict"]
        data = [{"level": m.level, "metric": m.metric, "direction": m.direction.value, "base": m.base,
                 "candidate": m.cand, "change_pct": None if m.change_pct is None or math.isinf(m.change_pct)
                 else m.change_pct, "max_regression_pct": m.max_regression_pct,
                 "ci_low_pct": m.interval.low_pct if m.interval else None,
                 "ci_high_pct": m.interval.high_pct if m.interval else None,
                 "p_value_worse": m.p_value_worse,
                 "method": _method(m),
                 "verdict": m.verdict.value,
                 "note": m.note} for m in result.metrics]
        table = {"title": f"compare: {summary['verdict'].upper()} ({result.failures} regression(s))",
                 "columns": columns, "rows": [metric_row(m) for m in result.metrics], "notes": list(result.notes)}
        return {**summary, "metrics": data, "tables": [table]}
    diff = result.findings
    rows = (_finding_rows("new", diff.new) + _finding_rows("resolved", diff.resolved)
            + _finding_rows("unchanged", diff.unchanged))
    table = {"title": f"compare: {summary['verdict'].upper()} ({result.failures} new finding(s) at or above "
                      f"{result.fail_on.value})",
             "columns": ["change", "severity", "code", "title"], "rows": rows, "notes": []}
    return {**summary, "fail_on": result.fail_on.value,
            "new": [f.code for f in diff.new], "resolved": [f.code for f in diff.resolved],
            "unchanged": [f.code for f in diff.unchanged], "tables": [table]}


def junit(result: CompareResult) -> str:
    """One testcase per metric × level (bench) or per new finding (diagnose)."""
    suite = ET.Element("testsuite", name="triage.compare")
    cases = 0
    if result.kind is ReportKind.BENCH:
        for m in result.metrics:
            case = ET.SubElement(suite, "testcase", classname=f"triage.compare.{m.level}", name=m.metric)
            cases += 1
            if m.failed:
                failure = ET.SubElement(case, "failure", message=f"{m.metric} regressed {_pct(m.change_pct)} "
                                        f"(max {m.max_regression_pct:g}%) at {m.level}")
                failure.text = f"base={m.base} candidate={m.cand} 95% CI of change {_interval(m)}"
            elif m.verdict is Verdict.NOT_MEASURED:
                ET.SubElement(case, "skipped", message=m.note or "not measured")
    else:
        gated = set(id(f) for f in result.findings.gate(result.fail_on))
        for f in result.findings.new:
            case = ET.SubElement(suite, "testcase", classname="triage.compare.findings", name=f.code)
            cases += 1
            if id(f) in gated:
                failure = ET.SubElement(case, "failure", message=f"new {f.severity.value} finding {f.code}: {f.title}")
                failure.text = f.message
        if not result.findings.new:
            ET.SubElement(suite, "testcase", classname="triage.compare.findings", name="no-new-findings")
            cases += 1
    suite.set("tests", str(cases))
    suite.set("failures", str(result.failures))
    suite.set("errors", "0")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
