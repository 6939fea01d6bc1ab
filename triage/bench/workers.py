"""`--shard i/N` (this process runs share i of N) and `--workers N` (N processes on this host, each with its
own event loop and a 1/N share, merged at the end). Each shard writes bench.json and requests.jsonl into its
own directory; `bench merge` (merge.py) makes one report of them."""
from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Callable
from pathlib import Path

from triage.bench.app import OutputPaths, execute
from triage.bench.run_config import BenchConfig
from triage.bench.shards import clock_offset_s, shard_config
from triage.core.bench_data import BenchShard, ShardLevel
from triage.core.errors import UsageError


def as_shard(cfg: BenchConfig, index: int, count: int) -> BenchConfig:
    """This shard's config, carrying the whole run's levels and this host's clock offset for the merge."""
    if cfg.ramp is not None or cfg.trace is not None:
        raise UsageError("--shard/--workers split closed-loop or rate levels; they cannot split a --ramp or a --trace")
    shard = shard_config(cfg, index, count)
    levels = tuple(ShardLevel(**dataclasses.asdict(lv)) for lv in cfg.levels)
    offset = clock_offset_s(cfg.url, cfg.headers)
    return dataclasses.replace(shard, shard=BenchShard(
        index=index, count=count, levels=levels, clock_offset_s=tuple(offset) if offset is not None else None,
        burstiness_note=None if cfg.burstiness == 1.0 else
        "N gamma streams do not sum to one gamma stream of the same shape"))


def run_shard(cfg: BenchConfig, out_dir: Path) -> int:
    """Run one shard into out_dir (bench.json, requests.jsonl); its exit code."""
    from triage.core.report_io import write_report

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = OutputPaths(json=out_dir / "bench.json", jsonl=out_dir / "requests.jsonl")
    outcome = execute(cfg, paths, embedded=False)
    write_report(outcome.report, paths.json)
    return outcome.exit_code


def _worker(cfg: BenchConfig, out_dir: str) -> None:
    raise SystemExit(run_shard(cfg, Path(out_dir)))


def run_workers(cfg: BenchConfig, count: int, out_dir: Path, log: Callable[[str], None]) -> list[Path]:
    """N spawned processes, one shard each; the directories they wrote."""
    if count < 2:
        raise UsageError(f"--workers {count}: use 2 or more (1 is the ordinary run)")
    context = multiprocessing.get_context("spawn")
    dirs = [out_dir / f"worker-{i}" for i in range(count)]
    procs = []
    for i, d in enumerate(dirs):
        proc = context.Process(target=_worker, args=(as_shard(cfg, i, count), str(d)), name=f"triage-bench-{i}")
        proc.start()
        procs.append(proc)
    log(f"bench: {count} worker processes started (pids {', '.join(str(p.pid) for p in procs)}); output in {out_dir}")
    try:
        for i, proc in enumerate(procs):
            proc.join()
            log(f"bench: worker {i} finished (exit {proc.exitcode})")
    except KeyboardInterrupt:
        for proc in procs:
            proc.terminate()
        raise
    failed = [i for i, p in enumerate(procs) if p.exitcode not in (0, 130)]
    if len(failed) == count:
        raise UsageError(f"bench: every worker failed (exit codes {[p.exitcode for p in procs]}); see the messages above")
    return [d for i, d in enumerate(dirs) if i not in failed and (d / "bench.json").is_file()]
