"""`triage compare BASE CAND`: the CI gate. BASE and CAND are triage reports or peers' result files."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from triage import render
from triage.cli_support import console, emit, format_option, funnel, json_option, warn
from triage.core.errors import UsageError
from triage.core.report import ReportKind, Severity, Target, new_report
from triage.core.report_io import write_report
from triage.probes.host import host_info

FORMATS = ("text", "markdown", "json", "junit")


@funnel
def compare(
    base: Path = typer.Argument(..., help="The baseline: a triage bench or diagnose report, or a vLLM "
                                          "`bench serve --save-result`, AIPerf or GuideLLM result file."),
    cand: Path = typer.Argument(..., help="The candidate to judge against it (same kinds)."),
    max_regression: str = typer.Option(
        None, "--max-regression", envvar="TRIAGE_MAX_REGRESSION",
        help="METRIC=PCT,… e.g. ttft_ms.p99=10%,output_tokens_per_s=5%. Defaults: 10% latency, 5% throughput."),
    allow_different: str = typer.Option(
        None, "--allow-different",
        help="Compare anyway when these differ: workload, model (engine, server_flags and hardware may always differ)."),
    inconclusive: str = typer.Option(
        "pass", "--inconclusive",
        help="What an interval that straddles the limit does to the gate: pass (default, listed) or fail. "
             "--inconclusive governs only intervals that straddle the limit."),
    fmt: str = format_option(FORMATS),
    json_path: Path = json_option(),
    fail_on: str = typer.Option("high", "--fail-on",
                                help="Diagnose reports: exit 1 on a new finding at or above this severity."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling."),
) -> int:
    """The CI gate: compare two reports; exit 1 on a regression.

    Exit 0 pass, 1 regression, 2 unusable or incomparable input. Each metric at each level is judged on the
    95% interval of its change against its limit (from the repeats, else the per-request samples). A metric
    with neither repeats nor per-request samples is judged on its point change against the limit and marked
    threshold only.

    Examples:

      triage compare base.json cand.json

      triage compare base.json cand.json --max-regression ttft_ms.p99=10% --format junit > triage.xml

      triage compare base.json cand.json --inconclusive fail --format markdown
    """
    try:
        severity = Severity(fail_on)
    except ValueError:
        raise UsageError(f"--fail-on {fail_on!r} is not one of {', '.join(s.value for s in Severity)}") from None
    from triage.compare import InconclusivePolicy, compare_reports
    from triage.compare.comparability import parse_allow
    from triage.compare.outputs import junit, section
    from triage.compare.text import render_text
    from triage.compare.thresholds import parse_max_regression
    from triage.importers import load_any

    rules = parse_max_regression(max_regression)
    allow = parse_allow(allow_different)
    policy = InconclusivePolicy.parse(inconclusive)
    base_report, cand_report = load_any(base), load_any(cand)
    result = compare_reports(base_report, cand_report, rules, fail_on=severity, seed=seed, allow=allow,
                             policy=policy)
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
    elif fmt == "text":
        if json_path is not None:
            write_report(report, json_path)
        sys.stdout.write(render_text(result, console().width, str(base), str(cand)))
        if json_path is not None:
            sys.stdout.write(f"report written to {json_path}\n")
    else:
        emit(report, json_path, fmt)
    return result.exit_code
