"""`triage baseline`: measure the before/after gain of each serving optimization (continuous batching, paged KV, flash attention, FP8/INT4, prefix caching, chunked prefill) on this host with the reference engine."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from triage.baseline.config import ROW_KEYS, BaselineConfig, BaselineOptions
from triage.cli_support import OptionSpec, console, emit, format_option, funnel, json_option, option_groups
from triage.core.errors import UsageError, require_extra
from triage.core.report import ReportKind, Target, new_report
from triage.engines.reference import REFERENCE
from triage.probes.host import host_info

BASELINE_OPTIONS: OptionSpec = {
    "quick": (bool, typer.Option(None, "--quick", help="Small sizes: about 80 s on a 2-core CPU, half of it the compile row.")),
    "model": (str, typer.Option(None, "--model", "-m", envvar="TRIAGE_BASELINE_MODEL",
                                help="A reference-engine preset (tiny, small) or a local HF model directory.")),
    "device": (str, typer.Option(None, "--device", help="cpu or cuda.")),
    "dtype": (str, typer.Option(None, "--dtype", help="Compute dtype: auto (time a matmul per dtype the weights "
                                "allow and take the fastest), bfloat16, float16 or float32.")),
    "threads": (int, typer.Option(None, "--threads", envvar="TRIAGE_BASELINE_THREADS",
                                  help="CPU threads for torch. Default: what fits the host (one core left free, "
                                  "none beyond the idle cores), since a thread per core stalls on a busy host; "
                                  "the report notes the choice.")),
    "rows": (str, typer.Option(None, "--rows", help=f"'all', or comma-separated rows: {', '.join(ROW_KEYS)}.")),
}


@funnel
@option_groups(opts=(BaselineOptions, BASELINE_OPTIONS))
def baseline(opts: BaselineOptions, json_path: Path = json_option(),
             fmt: str = format_option(ReportKind.BASELINE)) -> int:
    quick, model, device, dtype, threads, rows = (opts.quick, opts.model, opts.device, opts.dtype, opts.threads,
                                                  opts.rows)
    selected = ROW_KEYS if rows.strip() == "all" else tuple(r.strip() for r in rows.split(",") if r.strip())
    if not selected:
        raise UsageError("--rows is empty; name at least one row")
    require_extra("engine", "triage baseline")
    from triage.baseline.runner import num_steps, run_baseline

    make = BaselineConfig.quick if quick else BaselineConfig.full
    cfg = make(model=model, device=device, dtype=dtype, rows=selected, num_threads=threads)
    out = console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("[bold]baseline[/]"), BarColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=out, transient=True, disable=fmt == "json" and not out.is_terminal) as bar:
        task = bar.add_task("starting", total=num_steps(cfg))
        section = run_baseline(cfg, on_step=lambda msg: bar.update(task, description=msg),
                               on_row_done=lambda _key: bar.advance(task))
    report = new_report(ReportKind.BASELINE, host_info(), Target(engine=REFERENCE.name, model=model),
                        baseline=section)
    emit(report, json_path, fmt)
    return 0
