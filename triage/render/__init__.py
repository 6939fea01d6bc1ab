"""Renderers: a Report in, text out. Rich for people, Markdown for PRs and CI summaries.
(JSON is report_io.dumps; JUnit belongs to compare.)

The order for people: the header, the verdict, the findings, the tables that back them, then what was
looked at (one phrase per probe layer; the full probe table with `verbose`)."""
from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console

from triage.core.report import Report, ReportKind
from triage.render import bench, findings, startup_phases, tables


@dataclass(frozen=True)
class ViewOptions:
    """What the text view shows beyond the default (a command passes it as `Output.detail`)."""
    verbose: bool = False   # the full probe table instead of one phrase per layer


def _judged(report: Report) -> bool:
    return bool(report.findings or report.skipped_rules or report.probes)


def console_view(report: Report, out: Console, verbose: bool = False) -> None:
    findings.header_console(report, out)
    levels_first = report.kind is ReportKind.BENCH     # a bench's own results lead its view
    if levels_first and report.bench is not None:
        bench.levels_console(report.bench, out)
    if _judged(report):
        findings.findings_console(report, out)
    if not levels_first and report.bench is not None:
        out.print()
        bench.levels_console(report.bench, out)
    for section in (report.baseline, report.plan, report.compare):
        if section:
            tables.section_console(section, out)
    if report.probes:
        startup_phases.startup_console(report, out)
        if verbose:
            out.print()
            findings.probes_console(report, out)
    findings.coverage_console(report, out, layers=not verbose)


def markdown(report: Report) -> str:
    parts = [findings.header_markdown(report)]
    if _judged(report):
        parts.append(findings.verdict_markdown(report))
    if report.findings:
        parts.append(findings.findings_markdown(report))
    if report.bench is not None:
        parts.append(bench.levels_markdown(report.bench))
    for section in (report.baseline, report.plan, report.compare):
        if section:
            parts.append(tables.section_markdown(section))
    parts += [startup_phases.startup_markdown(report), findings.coverage_markdown(report)]
    return "\n\n".join(p for p in parts if p).rstrip() + "\n"
