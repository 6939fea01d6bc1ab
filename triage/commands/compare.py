"""`triage compare BASE CAND`: the CI gate. BASE and CAND are triage reports or peers' result files."""
from __future__ import annotations

import os
from pathlib import Path

import typer

from triage import render
from triage.cli_support import OptionSpec, emit, format_option, funnel, json_option, option_groups, warn
from triage.compare.gate import CompareOptions
from triage.core.report import Report, ReportKind

COMPARE_OPTIONS: OptionSpec = {
    "base": (Path, typer.Argument(..., help="The baseline: a triage bench or diagnose report, or a vLLM "
                                            "`bench serve --save-result`, AIPerf or GuideLLM result file.")),
    "cand": (Path, typer.Argument(..., help="The candidate to judge against it (same kinds).")),
    "max_regression": (str, typer.Option(
        None, "--max-regression", envvar="TRIAGE_MAX_REGRESSION",
        help="METRIC=PCT,… e.g. ttft_ms.p99=10%,output_tokens_per_s=5%. Defaults: 10% latency, 5% throughput.")),
    "allow_different": (str, typer.Option(
        None, "--allow-different",
        help="Compare anyway when these differ: workload, model (engine, server_flags and hardware may always "
             "differ).")),
    "inconclusive": (str, typer.Option(
        None, "--inconclusive",
        help="What an interval that straddles the limit does to the gate: pass (listed) or fail. --inconclusive "
             "governs only intervals that straddle the limit.")),
    "fail_on": (str, typer.Option(None, "--fail-on",
                                  help="Diagnose reports: exit 1 on a new finding at or above this severity.")),
    "seed": (int, typer.Option(None, "--seed", help="Seed of the bootstrap resampling.")),
}


@funnel
@option_groups(opts=(CompareOptions, COMPARE_OPTIONS))
def compare(opts: CompareOptions, fmt: str = format_option(ReportKind.COMPARE),
            json_path: Path = json_option()) -> int:
    from triage.compare.gate import run_compare
    from triage.importers import load_any

    report, view = run_compare(opts, load_any)
    _append_step_summary(report)
    emit(report, json_path, fmt, detail=view)
    return view.result.exit_code


def _append_step_summary(report: Report) -> None:
    """In GitHub Actions, the verdict as Markdown on the job's summary page too."""
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary_path:
        return
    try:
        with open(summary_path, "a", encoding="utf-8") as f:
            f.write(render.markdown(report))
    except OSError as e:
        warn(f"could not append to $GITHUB_STEP_SUMMARY ({e})")
