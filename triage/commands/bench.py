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
from triage.cli_help import TriageCommand, TriageGroup, manual
from triage.cli_support import console, emit, format_option, funnel, json_option, option_groups
from triage.commands.bench_options import BENCH_GROUPS
from triage.core.report import ReportKind
from triage.formats import get as get_format

# `triage bench` runs without a subcommand; `triage bench merge` is its one subcommand. Its help is cli.py's.
app = typer.Typer(invoke_without_command=True, add_completion=False, cls=TriageGroup,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.callback()
@funnel
@option_groups(**BENCH_GROUPS)
def bench(ctx: typer.Context, target: TargetOptions, load: LoadOptions, workload: WorkloadOptions,
          slo: SloOptions, scale: ScaleOptions, output: OutputOptions) -> int | None:
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


@app.command("merge", cls=TriageCommand, help=manual(
    "One report from the per-request records of several shards or workers (percentiles from all records).",
    "triage bench merge out/shard-0 out/shard-1 --json bench.json",
    "triage bench merge out/shard-* --format markdown"))
@funnel
def merge(dirs: list[Path] = typer.Argument(..., help="Shard output directories (each with bench.json and "
                                                         "requests.jsonl)."),
          json_path: Path = json_option(), fmt: str = format_option(ReportKind.BENCH)) -> int:
    from triage.bench.merge import merged_report

    report = merged_report(list(dirs))
    emit(report, json_path, fmt)
    return 0
