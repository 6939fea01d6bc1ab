"""A CompareResult as a report section (JSON, Markdown: failing rows first) and as JUnit XML
(inconclusive rows skipped, with the reason, unless the policy fails them)."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

from triage.compare import CompareResult
from triage.compare.bench_diff import SAME_DATA, THRESHOLD_ONLY, MetricComparison, Verdict, settle_text
from triage.core.report import Finding, ReportKind


def pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "+inf%" if value > 0 else "-inf%"
    return f"{value:+.1f}%"


def interval_text(m: MetricComparison) -> str:
    if m.verdict is Verdict.NOT_MEASURED:
        return "-"
    if m.interval is None:
        return _no_interval(m, "no interval")
    return f"[{m.interval.low_pct:+.1f}%, {m.interval.high_pct:+.1f}%]"


def _no_interval(m: MetricComparison, otherwise: str) -> str:
    return THRESHOLD_ONLY if m.threshold_only else SAME_DATA if m.same_data else otherwise


def evidence(m: MetricComparison) -> str:
    if m.interval is None:
        return _no_interval(m, "none")
    n = f"{m.interval.n_base}+{m.interval.n_cand}"
    return {"repeats": f"{n} repeats", "samples": f"{n} requests"}.get(m.source or "", f"{n} requests (E2E)")


def verdict_text(result: CompareResult, m: MetricComparison) -> str:
    return m.verdict.value.upper() if result.failed(m) else m.verdict.value


def _rank(result: CompareResult, m: MetricComparison) -> int:
    if result.failed(m):
        return 0
    return {Verdict.INCONCLUSIVE: 1, Verdict.PASS: 2}.get(m.verdict, 3)


def failing_first(result: CompareResult) -> list[MetricComparison]:
    """Failing rows, then inconclusive, pass, not measured; the level order kept within each group."""
    return sorted(result.metrics, key=lambda m: _rank(result, m))


def headline(result: CompareResult) -> str:
    if result.kind is not ReportKind.BENCH:
        return f"compare: {'FAIL' if result.failures else 'PASS'} ({result.failures} new finding(s) at or " \
               f"above {result.fail_on.value})"
    if result.same_data:
        return f"compare: PASS ({SAME_MEASUREMENTS})"
    reg, inc = result.count(Verdict.REGRESSION), result.count(Verdict.INCONCLUSIVE)
    thr = sum(1 for m in result.metrics if m.threshold_only)
    only = f", {thr} {THRESHOLD_ONLY}" if thr else ""
    return (f"compare: {'FAIL' if result.failures else 'PASS'} ({reg} regression(s), {inc} inconclusive{only}, "
            f"--inconclusive {result.policy.value})")


SAME_MEASUREMENTS = "the two reports hold the same measurements: no change"


def settle_lines(result: CompareResult) -> list[str]:
    """What would settle the inconclusive rows: the row's own line when there is one; for several, one line
    per kind of evidence (requests, repeats) with the most that any of them needs, and one naming the rows
    whose change sits on the limit."""
    rows = [m for m in result.metrics if m.verdict is Verdict.INCONCLUSIVE and m.settle]
    if len(rows) <= 1:
        return [f"{m.level} {m.metric}: {m.settle}" for m in rows]
    lines = []
    for repeats in (True, False):
        group = [m for m in rows if (m.source == "repeats") is repeats and m.settle_n is not None]
        if group:
            n = max(m.settle_n for m in group)
            have = max(max(m.interval.n_base, m.interval.n_cand) for m in group)
            label, what = ((f"{group[0].level} {group[0].metric}", "it") if len(group) == 1
                           else (f"{len(group)} inconclusive rows", "all of them"))
            lines.append(f"{label}: {settle_text(n, group[0].source, have, what)}")
    stuck = [f"{m.level} {m.metric}" for m in rows if m.settle_n is None]
    if stuck:
        lines.append(f"{', '.join(stuck)}: {settle_text(None, None, 0, 'it' if len(stuck) == 1 else 'them')}")
    return lines


def metric_row(result: CompareResult, m: MetricComparison) -> list[Any]:
    ci = "none" if m.threshold_only else interval_text(m)      # the next column says "threshold only"
    return [m.level, m.metric, m.base, m.cand, pct(m.change_pct), f"{m.max_regression_pct:g}%",
            ci, evidence(m), verdict_text(result, m)]


def _finding_rows(label: str, findings: tuple[Finding, ...]) -> list[list[Any]]:
    return [[label, f.severity.value, f.code, f.title] for f in findings]


def _finite(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) else v


def section(result: CompareResult) -> dict[str, Any]:
    """The `compare` section of a kind=compare report: structured rows plus tables for people."""
    summary = {"kind": result.kind.value, "failures": result.failures,
               "verdict": "fail" if result.failures else "pass"}
    if result.kind is ReportKind.BENCH:
        data = [{"level": m.level, "metric": m.metric, "direction": m.direction.value, "base": m.base,
                 "candidate": m.cand, "change_pct": _finite(m.change_pct),
                 "max_regression_pct": m.max_regression_pct,
                 "ci_low_pct": m.interval.low_pct if m.interval else None,
                 "ci_high_pct": m.interval.high_pct if m.interval else None,
                 "method": m.interval.method if m.interval else None,
                 "interval_from": m.source, "n_base": m.interval.n_base if m.interval else None,
                 "n_candidate": m.interval.n_cand if m.interval else None,
                 "threshold_only": m.threshold_only,
                 "p_value_worse": m.p_value_worse, "verdict": m.verdict.value, "failed": result.failed(m),
                 "settle": m.settle, "note": m.note} for m in result.metrics]
        tables = []
        if result.changed:
            tables.append({"title": "what changed", "columns": ["what", "key", "base", "candidate"],
                           "rows": [[d.category, d.key, *d.shown()] for d in result.changed]})
        tables.append({"title": headline(result),
                       "columns": ["level", "metric", "base", "cand", "change", "limit", "95% CI of change",
                                   "interval from", "verdict"],
                       "rows": [metric_row(result, m) for m in failing_first(result)],
                       "notes": list(result.notes) + settle_lines(result)})
        return {**summary, "inconclusive_policy": result.policy.value,
                "regressions": result.count(Verdict.REGRESSION),
                "inconclusive": result.count(Verdict.INCONCLUSIVE),
                "threshold_only": sum(1 for m in result.metrics if m.threshold_only),
                "drift": list(result.drift),
                "changed": [{"what": d.category, "key": d.key, "base": d.base, "candidate": d.cand}
                            for d in result.changed],
                "metrics": data, "tables": tables}
    diff = result.findings
    rows = (_finding_rows("new", diff.new) + _finding_rows("resolved", diff.resolved)
            + _finding_rows("unchanged", diff.unchanged))
    table = {"title": headline(result), "columns": ["change", "severity", "code", "title"], "rows": rows, "notes": []}
    return {**summary, "fail_on": result.fail_on.value,
            "new": [f.code for f in diff.new], "resolved": [f.code for f in diff.resolved],
            "unchanged": [f.code for f in diff.unchanged], "tables": [table]}


def _bench_case(suite: ET.Element, result: CompareResult, m: MetricComparison) -> int:
    """One metric at one level as a test case; 1 when it is skipped (inconclusive or not measured)."""
    case = ET.SubElement(suite, "testcase", classname=f"triage.compare.{m.level}", name=m.metric)
    if result.failed(m):
        ci = f"{THRESHOLD_ONLY}, no interval" if m.threshold_only else f"95% CI {interval_text(m)}"
        failure = ET.SubElement(case, "failure", message=f"{m.metric} {m.verdict.value} at {m.level}: "
                                f"{pct(m.change_pct)}, {ci} (max {m.max_regression_pct:g}%)")
        failure.text = f"base={m.base} candidate={m.cand} interval from {evidence(m)}" + (
            f"; {m.settle}" if m.settle else "")
    elif m.verdict is Verdict.INCONCLUSIVE:
        ET.SubElement(case, "skipped", message=f"inconclusive: 95% CI {interval_text(m)} straddles the "
                      f"{m.max_regression_pct:g}% limit; {m.settle or 'more data would settle it'}")
        return 1
    elif m.verdict is Verdict.NOT_MEASURED:
        ET.SubElement(case, "skipped", message=m.note or "not measured")
        return 1
    elif m.threshold_only:       # a pass on the point change alone: say so in the case's output
        ET.SubElement(case, "system-out").text = (f"{THRESHOLD_ONLY}: {pct(m.change_pct)} within the "
                                                  f"{m.max_regression_pct:g}% limit, no interval")
    return 0


def _finding_cases(suite: ET.Element, result: CompareResult) -> int:
    """One test case per new finding (failed when it gates), or one passing case when none is new."""
    gated = set(id(f) for f in result.findings.gate(result.fail_on))
    for f in result.findings.new:
        case = ET.SubElement(suite, "testcase", classname="triage.compare.findings", name=f.code)
        if id(f) in gated:
            failure = ET.SubElement(case, "failure", message=f"new {f.severity.value} finding {f.code}: {f.title}")
            failure.text = f.message
    if not result.findings.new:
        ET.SubElement(suite, "testcase", classname="triage.compare.findings", name="no-new-findings")
        return 1
    return len(result.findings.new)


def junit(result: CompareResult) -> str:
    """One testcase per metric × level (bench) or per new finding (diagnose)."""
    suite = ET.Element("testsuite", name="triage.compare")
    cases = skipped = 0
    if result.kind is ReportKind.BENCH:
        for m in failing_first(result):
            skipped += _bench_case(suite, result, m)
            cases += 1
    else:
        cases = _finding_cases(suite, result)
    if result.drift and not result.same_data:        # said once for the suite: it is about a report, not one metric
        ET.SubElement(suite, "system-out").text = "\n".join(n for n in result.notes if n.startswith("drift "))
    suite.set("tests", str(cases))
    suite.set("failures", str(result.failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
