"""`triage bench merge DIR...`: one bench report from the per-request records of several shards or workers.

Each DIR holds a shard's `bench.json` and `requests.jsonl` (what `--shard i/N --output-dir DIR` writes).
Level k of the merged report is the union of every shard's level k records; its latencies, percentiles,
throughput and goodput are computed from all of them (never by averaging percentiles), on one time base:
each record's start is moved from its shard's clock to the earliest shard start (epoch seconds), and the
report states the clock-skew bound (shards.py) and the spread of the shards' level starts.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from triage.bench import saturation
from triage.bench.records import RequestRecord, read_records
from triage.bench.run_config import LevelSpec
from triage.bench.shards import skew_bound_s
from triage.bench.stats import summarize
from triage.core.bench_data import BenchRunConfig, BenchShard, MergeClock
from triage.core.convert import to_dict
from triage.core.errors import UsageError
from triage.core.report import BenchLevel, BenchSection, ClientStats, level_name
from triage.core.report_io import read_report

_MUST_MATCH = ("url", "model", "endpoint", "slo", "input_len", "output_len")    # BenchRunConfig's fields


@dataclasses.dataclass(frozen=True, slots=True)
class Shard:
    path: Path
    config: BenchRunConfig
    shard: BenchShard
    started_epoch_s: float
    levels: tuple[BenchLevel, ...]
    records: list[RequestRecord]

    @property
    def index(self) -> int:
        return self.shard.index

    @property
    def count(self) -> int:
        return self.shard.count


def _load(path: Path) -> Shard:
    if not path.is_dir():
        raise UsageError(f"bench merge {path}: not a directory (give the --output-dir of each shard)")
    report_path, records_path = path / "bench.json", path / "requests.jsonl"
    for f in (report_path, records_path):
        if not f.is_file():
            raise UsageError(f"bench merge {path}: no {f.name} (was the shard run with --output-dir {path}?)")
    report = read_report(report_path)
    if report.bench is None:
        raise UsageError(f"bench merge {report_path}: not a bench report")
    config = report.bench.config
    if config.shard is None or not config.shard.levels or config.started_epoch_s is None:
        raise UsageError(f"bench merge {report_path}: not a shard's report (run it with --shard i/N or --workers)")
    return Shard(path, config, config.shard, config.started_epoch_s, report.bench.levels, read_records(records_path))


def _client(levels: list[BenchLevel]) -> ClientStats:
    invalid = [lv.client.invalid_reason for lv in levels if not lv.client.valid]

    def worst(values):
        values = [v for v in values if v is not None]
        return max(values) if values else None

    achieved = [lv.client.achieved_concurrency for lv in levels]
    return ClientStats(cpu_pct=worst(lv.client.cpu_pct for lv in levels),
                       event_loop_lag_ms_p99=worst(lv.client.event_loop_lag_ms_p99 for lv in levels),
                       achieved_concurrency=sum(achieved) if None not in achieved else None,
                       valid=not invalid, invalid_reason="; ".join(r for r in invalid if r) or None)


def _check_same_bench(shards: list[Shard]) -> list[str]:
    """Every shard ran the same bench, each index once; warnings for the shards missing."""
    first = shards[0]
    for s in shards[1:]:
        for key in _MUST_MATCH:
            mine, theirs = getattr(s.config, key), getattr(first.config, key)
            if mine != theirs:
                raise UsageError(f"bench merge: {s.path} ran {key}={mine!r}, {first.path} {theirs!r}: "
                                 "not the same bench")
        if s.shard.levels != first.shard.levels:
            raise UsageError(f"bench merge: {s.path} ran other levels than {first.path}")
    indices = [s.index for s in shards]
    if len(set(indices)) != len(indices):
        raise UsageError(f"bench merge: shard index given twice ({indices})")
    missing = sorted(set(range(first.count)) - set(indices))
    if missing:
        return [f"shards {missing} of {first.count} are missing: the merged load is only the shards given"]
    return []


def _merged_level(k: int, shards: list[Shard], start: float, warnings: list[str]) -> BenchLevel | None:
    """Level k from every shard's records (times shifted to the earliest shard's clock); None when no shard
    finished it."""
    first = shards[0]
    whole = first.shard.levels[k]
    spec = LevelSpec(concurrency=whole.concurrency, request_rate=whole.request_rate, input_len=whole.input_len)
    records: list[RequestRecord] = []
    parts: list[BenchLevel] = []
    starts: list[float] = []
    for s in shards:
        if k >= len(s.levels):
            warnings.append(f"{s.path}: level {level_name(spec)} did not finish there (interrupted?)")
            continue
        part = s.levels[k]
        parts.append(part)
        shift = s.started_epoch_s - start
        name = level_name(part)
        mine = [dataclasses.replace(r, t0_s=r.t0_s + shift) for r in s.records if r.level == name and not r.warmup]
        if mine:
            starts.append(min(r.t0_s for r in mine))
        records.extend(mine)
    if not parts:
        return None
    slo = first.config.slo
    level = summarize(spec, records, to_dict(slo) if slo is not None else None, _client(parts), server=parts[0].server,
                      gpu=parts[0].gpu)
    spread = round(max(starts) - min(starts), 3) if len(starts) > 1 else 0.0
    return dataclasses.replace(level, notes=(
        *level.notes, f"merged from {len(parts)} shards; their first requests started within {spread:g} s of "
                      "each other; server and GPU windows are shard 0's"))


def merge_dirs(paths: list[Path]) -> tuple[BenchSection, BenchRunConfig, list[str]]:
    """(the merged bench section, the first shard's config, warnings)."""
    if not paths:
        raise UsageError("bench merge: give at least one shard directory")
    shards = sorted((_load(p) for p in paths), key=lambda s: s.index)
    first = shards[0]
    warnings = _check_same_bench(shards)
    start = min(s.started_epoch_s for s in shards)
    merged = [_merged_level(k, shards, start, warnings) for k in range(len(first.shard.levels))]
    levels = [lv for lv in merged if lv is not None]
    offsets = tuple(s.shard.clock_offset_s for s in shards)
    bound = skew_bound_s(offsets)
    clock = MergeClock(offsets_s=offsets, skew_bound_s=bound, note=(
        "each shard's offset from the server's Date header (1 s resolution); the skew bound is the widest gap "
        "between two shards' offset intervals" if bound is not None
        else "a shard read no Date header from the server: the skew between machines is not bounded"))
    config = dataclasses.replace(first.config, shard=None, num_shards=first.count,
                                 merged_from=tuple(str(s.path) for s in shards), started_epoch_s=start, clock=clock,
                                 warnings=(*first.config.warnings, *warnings))
    section = BenchSection(config=config, levels=tuple(levels), summary=saturation.summary(levels))
    return section, first.config, warnings


def merged_report(paths: list[Path]):
    """The merged bench report, its findings from the bench rules, its target from the first shard."""
    from triage.bench.app import evaluate_rules
    from triage.core.report import ReportKind, new_report
    from triage.probes.host import host_info

    section, _, _ = merge_dirs(paths)
    first = read_report(sorted(paths)[0] / "bench.json")
    findings, skipped = evaluate_rules(section)
    return new_report(ReportKind.BENCH, host_info(), first.target, bench=section, findings=findings,
                      skipped_rules=skipped)
