"""Renderers: a Report in, text out. Rich for people, Markdown for PRs and CI summaries.
(JSON is report_io.dumps; JUnit belongs to compare.)"""
from __future__ import annotations

from rich.console import Console

from triage.core.report import Report
from triage.render import bench, findings, startup_phases, tables


def console_view(report: Report, out: Console) -> None:
    findings.header_console(report, out)
    if report.probes:
        findings.probes_console(report, out)
        startup_phases.startup_console(report, out)
    if report.bench is not None:
        bench.levels_console(report.bench, out)
    for section in (report.baseline, report.plan, report.compare):
        if section:
            tables.section_console(section, out)
    if report.findings or report.skipped_rules or report.probes:
        findings.findings_console(report, out)


def markdown(report: Report) -> str:
    parts = [findings.header_markdown(report), startup_phases.startup_markdown(report)]
    if report.bench is not None:
        parts.append(bench.levels_markdown(report.bench))
    for section in (report.baseline, report.plan, report.compare):
        if section:
            parts.append(tables.section_markdown(section))
    if report.findings or report.probes:
        parts.append(findings.findings_markdown(report))
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"
