"""`triage compare BASE.json CAND.json`: the CI regression gate."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from triage import render
from triage.cli_support import emit, format_option, funnel, json_option, warn
from triage.core.errors import UsageError
from triage.core.report import ReportKind, Severity, Target, new_report
from triage.core.report_io import read_report, write_report
from triage.probes.host import host_info

FORMATS = ("text", "markdown", "json", "junit")


@funnel
def compare(
    base: Path = typer.Argument(..., help="The baseline report (bench or diagnose JSON)."),
    cand: Path = typer.Argument(..., help="The candidate report to judge against it."),
    max_regression: str = typer.Option(
        None, "--max-regression", envvar="TRIAGE_MAX_REGRESSION",
        help="METRIC=PCT,… e.g. ttft_ms.p99=10%,output_tokens_per_s=5%. Defaults: 10% latency, 5% throughput."),
    fmt: str = format_option(FORMATS),
    json_path: Path = json_option(),
    fail_on: str = typer.Option("high", "--fail-on",
                                help="Diagnose reports: exit 1 on a new finding at or above this severity."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling."),
) -> int:
    """Compare two reports. Exit 0 pass, 1 regression, 2 unusable input."""
    try:
        severity = Severity(fail_on)
    except ValueError:
        raise UsageError(f"--fail-on {fail_on!r} is not one of {', '.join(s.value for s in Severity)}") from None
    from triage.compare import compare_reports
    from triage.compare.outputs import junit, section
    from triage.compare.thresholds import parse_max_regression

    rules = parse_max_regression(max_regression)
    base_report, cand_report = read_report(base), read_report(cand)
    result = compare_reports(base_report, cand_report, rules, fail_on=severity, seed=seed)
    report = new_report(ReportKind.COMPARE, host_info(),
                        Target(model=cand_report.target.model, engine=cand_report.target.engine,
                               url=cand_report.target.url, engine_version=cand_report.target.engine_version),
                        compare={**section(result), "base": str(base), "candidate": str(cand)})
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        try:
            with open(summary_path, "a", encoding="utf-8") as f:
                f.write(render.markdown(report))
        except OSError as e:
            warn(f"could not append to $GITHUB_STEP_SUMMARY ({e})")
    if fmt == "junit":
        if json_path is not None:
            write_report(report, json_path)
        sys.stdout.write(junit(result))
    else:
        emit(report, json_path, fmt)
    return result.exit_code
