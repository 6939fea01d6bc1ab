"""`triage bench`: load-test an OpenAI-compatible endpoint (or, with no --url, the bundled reference engine)."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.bench.options import (
    BenchOptions,
    LoadOptions,
    OutputOptions,
    ScaleOptions,
    SloOptions,
    TargetOptions,
    WorkloadOptions,
)
from triage.cli_support import console, emit, format_option, funnel, json_option, option_groups
from triage.commands.bench_options import BENCH_GROUPS
from triage.core.report import ReportKind
from triage.formats import get as get_format


@funnel
@option_groups(**BENCH_GROUPS)
def bench(ctx: typer.Context, target: TargetOptions, load: LoadOptions, workload: WorkloadOptions,
          slo: SloOptions, scale: ScaleOptions, output: OutputOptions) -> int | None:
    """Load-test a server: closed-loop concurrency and open-loop rate levels, with goodput, server and GPU
    state per level, and a verdict on whether the client itself was the bottleneck.
    `triage bench merge DIR...` builds one report from shard outputs (--shard, --workers)."""
    if ctx.invoked_subcommand is not None:
        return None
    from triage.bench.session import run_bench

    err = console(stderr=True)
    run = run_bench(BenchOptions(target, load, workload, slo, scale, output), err,
                    live=get_format(output.format).human and err.is_terminal)
    emit(run.report, None, output.format, other_files=run.files)
    if run.problem:
        err.print(f"triage: error: {run.problem}", markup=False, highlight=False)
    return run.exit_code


@funnel
def merge(dirs: list[Path] = typer.Argument(..., help="Shard output directories (each with bench.json and "
                                                         "requests.jsonl)."),
          json_path: Path = json_option(), fmt: str = format_option(ReportKind.BENCH)) -> int:
    """One report from several shards' per-request records: every percentile from all the records."""
    from triage.bench.merge import merged_report

    report = merged_report(list(dirs))
    emit(report, json_path, fmt)
    return 0
