"""One `triage bench` invocation as a library call: the option groups in, the report and the files written
out. Checks the options and builds the run's BenchConfig once, then runs it in this process, as one shard
(--shard), over N worker processes (--workers), or as a --find-max search."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from triage.bench.app import OutputPaths, execute
from triage.bench.fleet import BALANCES, read_urls, split_roles
from triage.bench.options import BenchOptions
from triage.bench.run_config import EMBEDDED_DEFAULTS, URL_DEFAULTS, BenchConfig, base_config
from triage.bench.workloads import apply_workloads
from triage.core.errors import UsageError, require_extra
from triage.core.report import Report


@dataclass(frozen=True)
class BenchRun:
    report: Report
    exit_code: int
    files: dict[str, Path | None]  # {"per-request JSONL": path, ...}: where each written file went
    problem: str | None = None     # why it exits 2 although it wrote a report (every request of a level failed)


def run_config(opts: BenchOptions) -> tuple[BenchConfig, bool]:
    """(the run's config, whether it starts the embedded reference engine): every option checked once."""
    all_urls, roles = split_roles(read_urls(list(opts.target.urls), opts.target.urls_file))
    if opts.target.balance not in BALANCES:
        raise UsageError(f"--balance {opts.target.balance!r}: use {' or '.join(BALANCES)}")
    url = all_urls[0] if all_urls else None
    embedded = url is None
    if embedded:
        require_extra("engine", "triage bench without --url (the bundled reference engine)")
    if opts.output.html is not None:
        require_extra("html", "triage bench --html")
    cfg = base_config(opts, url, EMBEDDED_DEFAULTS if embedded else URL_DEFAULTS)
    if len(all_urls) > 1:
        cfg = dataclasses.replace(cfg, urls=tuple(all_urls), balance=opts.target.balance, roles=roles)
    return apply_workloads(cfg, opts.workload, opts.load), embedded


def run_bench(opts: BenchOptions, err: Console, live: bool) -> BenchRun:
    """Run the bench the options describe; `live`: draw the live table on `err` (not during --find-max)."""
    cfg, embedded = run_config(opts)
    out = opts.output
    paths = OutputPaths.resolve(out.output_dir, out.json, out.jsonl, out.csv, out.html)
    if opts.scale.shard is not None or opts.scale.workers != 1:
        if opts.scale.shard is None:
            _check_scale(opts, embedded)
            return _bench_workers(cfg, opts.scale.workers, paths, out.output_dir, embedded, err)
        cfg = _as_shard(cfg, opts, embedded)
    search, progress = _find_max(cfg, opts, err)
    if search is not None and opts.load.num_requests is None and opts.load.duration_s is None:
        cfg = dataclasses.replace(cfg, num_requests=None)  # each load sends 4x its concurrency, not a fixed count
    outcome = execute(cfg, paths, embedded=embedded, live_console=err if live and search is None else None,
                      find_max=search, progress=progress)
    _write_json(outcome.report, paths.json)
    return BenchRun(outcome.report, outcome.exit_code,
                    {"report": paths.json, "per-request JSONL": paths.jsonl, "levels CSV": paths.csv,
                     "HTML report": paths.html, **paths.write_copies()}, outcome.problem)


def _check_scale(opts: BenchOptions, embedded: bool) -> None:
    if opts.slo.find_max is not None:
        raise UsageError("--find-max runs one search from one process; drop --shard/--workers")
    if opts.scale.shard is not None and (opts.scale.workers != 1 or embedded or opts.output.output_dir is None):
        raise UsageError("--shard needs --url and --output-dir, and no --workers")


def _as_shard(cfg: BenchConfig, opts: BenchOptions, embedded: bool) -> BenchConfig:
    from triage.bench.shards import parse_shard
    from triage.bench.workers import as_shard

    _check_scale(opts, embedded)
    assert opts.scale.shard is not None
    return as_shard(cfg, *parse_shard(opts.scale.shard))


def _find_max(cfg: BenchConfig, opts: BenchOptions, err: Console) -> tuple[Any, Any]:
    """--find-max: the search's spec (checked against the config) and its progress lines on `err`."""
    if opts.slo.find_max is None:
        return None, None
    from triage.bench.find_max_cli import find_max_spec, progress_printer

    slo = opts.slo
    search = find_max_spec(slo.find_max, cfg, slo.attainment, slo.max_requests, slo.max_duration,
                           levels_given=opts.load.levels_given or opts.load.ramp is not None)
    return search, progress_printer(err)


def _write_json(report: Report, path: Path | None) -> None:
    from triage.core.report_io import write_report

    if path is not None:
        write_report(report, path)


def _bench_workers(cfg: BenchConfig, workers: int, paths: OutputPaths, output_dir: Path | None, embedded: bool,
                   err: Console) -> BenchRun:
    """--workers N: N processes, their shards merged into one report."""
    import contextlib
    import tempfile

    from triage.bench.app import embedded_server
    from triage.bench.extra_files import write_csv
    from triage.bench.merge import merged_report
    from triage.bench.workers import run_workers

    with contextlib.ExitStack() as stack:
        if embedded:
            handle = stack.enter_context(embedded_server(cfg.model or "tiny"))
            cfg = dataclasses.replace(cfg, url=handle.url)
        out = output_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="triage-bench-")))
        dirs = run_workers(cfg, workers, out, lambda line: err.print(line, markup=False))
        report = merged_report(dirs)
    if paths.csv is not None and report.bench is not None:
        write_csv(report.bench, paths.csv)
    _write_json(report, paths.json)
    return BenchRun(report, 0, {"report": paths.json, "levels CSV": paths.csv, **paths.write_copies()})
