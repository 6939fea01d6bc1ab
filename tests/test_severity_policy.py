"""The severity policy (docs/RULES.md): above LOW needs a symptom; an opportunity is capped at LOW,
kept in the report as `kind: opportunity`, and shown apart from the problems."""
from __future__ import annotations

import io

from rich.console import Console

from tests.factories import bench_report
from triage.core.report import Certainty, Finding, FindingKind, Fix, Severity
from triage.core.report_io import dumps, loads
from triage.render.findings import findings_console, findings_markdown
from triage.rules.base import Hit, Rule, RuleDoc
from triage.rules.evaluate import severity_of

DOC = RuleDoc(what="w", why="y", example="e", fix="f", references=("r",))


def _rule(severity: Severity) -> Rule:
    return Rule(code="ZZZ001", name="x", severity=severity, inputs=("gpu",), doc=DOC, check=lambda c: None)


def _hit(kind: FindingKind, severity: Severity | None = None) -> Hit:
    return Hit(title="t", message="m", evidence={}, fix=Fix("do it"), kind=kind, severity=severity)


def test_an_opportunity_is_never_above_low():
    assert severity_of(_rule(Severity.HIGH), _hit(FindingKind.OPPORTUNITY)) is Severity.LOW
    assert severity_of(_rule(Severity.MEDIUM), _hit(FindingKind.OPPORTUNITY, Severity.CRITICAL)) is Severity.LOW
    assert severity_of(_rule(Severity.INFO), _hit(FindingKind.OPPORTUNITY)) is Severity.INFO
    assert severity_of(_rule(Severity.HIGH), _hit(FindingKind.PROBLEM)) is Severity.HIGH


def _finding(code: str, kind: FindingKind, severity: Severity) -> Finding:
    return Finding(code=code, name=code.lower(), severity=severity, certainty=Certainty.LIKELY, title=f"title {code}",
                   message="m", evidence={}, fix=Fix("fix it"), kind=kind)


def _with(findings: tuple[Finding, ...]):
    import dataclasses

    return dataclasses.replace(bench_report([]), findings=findings)


def test_opportunities_are_rendered_apart_and_survive_json(report_validator):
    report = _with((_finding("KV001", FindingKind.PROBLEM, Severity.HIGH),
                                   _finding("QUANT001", FindingKind.OPPORTUNITY, Severity.LOW)))
    text_json = dumps(report)
    report_validator(__import__('json').loads(text_json))
    again = loads(text_json)
    assert [f.kind for f in again.findings] == [FindingKind.PROBLEM, FindingKind.OPPORTUNITY]
    md = findings_markdown(again)
    assert md.index("KV001") < md.index("### Opportunities") < md.index("QUANT001")
    buf = io.StringIO()
    findings_console(again, Console(file=buf, width=120, color_system=None))
    text = buf.getvalue()
    assert text.index("KV001") < text.index("Opportunities") < text.index("QUANT001")


def test_only_opportunities_reads_as_no_problem():
    report = _with((_finding("QUANT001", FindingKind.OPPORTUNITY, Severity.LOW),))
    assert "No problems found." in findings_markdown(report)
