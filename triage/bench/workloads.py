"""The workload flags beyond one synthetic prompt mix: multi-turn chat (`--turns`), trace replay (`--trace`,
Mooncake's format), prefix groups (`--prefix-groups/--prefix-len`) and ramps (`--ramp`). Parsed and checked
here, before any load is sent: a bad trace line or ramp shape is a UsageError (exit 2) naming the line or text.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.bench.options import LoadOptions, WorkloadOptions
from triage.bench.run_config import BenchConfig, Endpoint, LevelSpec
from triage.core.bench_data import WorkloadTrace
from triage.core.durations import parse_duration_s
from triage.core.errors import UsageError

MOONCAKE_BLOCK_TOKENS = 512  # Mooncake's traces hash prompts in blocks of 512 tokens
@dataclass(frozen=True, slots=True)
class Ramp:
    """`step:2,4,8:20s` (each step a closed-loop level of 20 s) or `linear:1:20:60s` (concurrency rising
    from 1 to 20 over 60 s, reported in fixed windows)."""

    text: str
    shape: str  # step | linear
    steps: tuple[int, ...] = ()
    start: int = 1
    end: int = 1
    duration_s: float = 0.0

    def target_at(self, t_s: float) -> float:
        """Linear: the concurrency aimed at t_s seconds into the ramp."""
        frac = min(1.0, max(0.0, t_s / self.duration_s))
        return self.start + (self.end - self.start) * frac

    def workers_at(self, t_s: float) -> int:
        """Linear: the workers running at t_s (one more each time the target passes an integer)."""
        return max(self.start, math.floor(self.target_at(t_s)))

    def windows(self, window_s: float) -> list[tuple[float, float, int]]:
        """Linear: (start s, end s, concurrency of the level) per window; the level's concurrency is the mean
        number of workers over the window, rounded down (what the client does hold throughout)."""
        out = []
        count = max(1, math.ceil(self.duration_s / window_s - 1e-9))
        for k in range(count):
            lo, hi = k * window_s, min(self.duration_s, (k + 1) * window_s)
            samples = [self.workers_at(lo + (hi - lo) * (j + 0.5) / 200) for j in range(200)]
            out.append((lo, hi, max(1, math.floor(sum(samples) / len(samples)))))
        return out


def parse_ramp(text: str) -> Ramp:
    parts = text.strip().split(":")
    shape = parts[0].strip().lower()
    if shape == "step" and len(parts) == 3:
        try:
            steps = tuple(int(p) for p in parts[1].split(",") if p.strip())
        except ValueError:
            steps = ()
        if not steps or any(s < 1 for s in steps):
            raise UsageError(f"--ramp {text!r}: the steps must be concurrencies >= 1, e.g. step:2,4,8:20s")
        if len(set(steps)) != len(steps):
            raise UsageError(f"--ramp {text!r} names a step twice")
        return Ramp(text=text, shape="step", steps=steps, duration_s=parse_duration_s(parts[2], "--ramp"))
    if shape == "linear" and len(parts) == 4:
        try:
            start, end = int(parts[1]), int(parts[2])
        except ValueError:
            start = end = 0
        if start < 1 or end < start:
            raise UsageError(f"--ramp {text!r}: linear:START:END:DURATION with 1 <= START <= END, "
                             "e.g. linear:1:20:60s")
        return Ramp(text=text, shape="linear", start=start, end=end, duration_s=parse_duration_s(parts[3], "--ramp"))
    raise UsageError(f"--ramp {text!r}: unknown ramp shape; use step:C1,C2,...:DURATION (e.g. step:2,4,8:20s) "
                     "or linear:START:END:DURATION (e.g. linear:1:20:60s)")


@dataclass(frozen=True, slots=True)
class TraceRow:
    line: int  # 1-based line number in the file
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Trace:
    path: Path
    sha256: str
    rows: tuple[TraceRow, ...]
    num_rows_in_file: int
    block_tokens: int = MOONCAKE_BLOCK_TOKENS

    def schedule_s(self, time_scale: float) -> list[float]:
        t0 = self.rows[0].timestamp_ms if self.rows else 0.0
        return [(r.timestamp_ms - t0) / 1000.0 * time_scale for r in self.rows]

    def request_rate(self, time_scale: float) -> float:
        """The trace's mean arrival rate at this time scale (names its level)."""
        sched = self.schedule_s(time_scale)
        span = sched[-1] - sched[0] if len(sched) > 1 else 0.0
        return round(len(sched) / span, 3) if span > 0 else float(len(sched))

    def report_record(self, time_scales: tuple[float, ...]) -> WorkloadTrace:
        return WorkloadTrace(file=str(self.path), sha256=self.sha256, num_requests=len(self.rows),
                             num_requests_in_file=self.num_rows_in_file, time_scales=tuple(time_scales),
                             block_tokens=self.block_tokens, cut=len(self.rows) < self.num_rows_in_file)


def _row(obj: Any, line_no: int, text: str, where: str) -> TraceRow:
    def bad(problem: str) -> UsageError:
        return UsageError(f"{where}:{line_no}: {problem}: {text.strip()[:120]}")

    if not isinstance(obj, dict):
        raise bad("not a JSON object")
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts) or ts < 0:
        raise bad("'timestamp' must be a number of milliseconds >= 0")
    values = {}
    for key in ("input_length", "output_length"):
        v = obj.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(f"{key!r} must be an integer >= 1")
        values[key] = v
    hash_ids = obj.get("hash_ids", [])
    if not isinstance(hash_ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hash_ids):
        raise bad("'hash_ids' must be a list of integers")
    return TraceRow(line=line_no, timestamp_ms=float(ts), input_length=values["input_length"],
                    output_length=values["output_length"], hash_ids=tuple(hash_ids))


def load_trace(path: Path, num_requests: int | None, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Trace:
    """A Mooncake-format JSONL trace, every line checked; `num_requests` keeps the first N (by time)."""
    where = f"--trace {path}"
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"{where}: cannot read it ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where}: not UTF-8 text ({e})") from None
    rows = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise UsageError(f"{where}:{line_no}: not JSON ({e}): {line.strip()[:120]}") from None
        rows.append(_row(obj, line_no, line, where))
    if not rows:
        raise UsageError(f"{where}: no requests in it (expected JSONL lines like "
                         '{"timestamp": 0, "input_length": 512, "output_length": 64, "hash_ids": [0]})')
    rows.sort(key=lambda r: r.timestamp_ms)
    kept = rows[:num_requests] if num_requests is not None else rows
    return Trace(path=path, sha256=hashlib.sha256(raw).hexdigest(), rows=tuple(kept), num_rows_in_file=len(rows),
                 block_tokens=block_tokens)


def parse_time_scales(text: str | float) -> tuple[float, ...]:
    """--time-scale 1 or a comma list (1,0.5): one trace-replay level per scale."""
    try:
        values = tuple(float(p) for p in str(text).split(",") if p.strip())
    except ValueError:
        values = ()
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values) or len(set(values)) != len(values):
        raise UsageError(f"--time-scale {text!r}: expected distinct numbers > 0, e.g. 1 or 1,0.5")
    return values


def _check_combinations(cfg: BenchConfig, w: WorkloadOptions, load: LoadOptions,
                        time_scales: tuple[float, ...]) -> None:
    """The workload flags against each other: one workload at a time, and each helper flag with its own."""
    if w.turns < 1 or w.think_time_ms < 0 or w.prefix_groups < 0 or w.prefix_len < 0:
        raise UsageError("--turns must be >= 1, --think-time-ms and --prefix-groups/--prefix-len >= 0")
    chosen = [flag for flag, given in (("--turns", w.turns > 1), ("--trace", w.trace is not None),
                                       ("--ramp", load.ramp is not None), ("--dataset", cfg.dataset is not None))
              if given]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} are separate workloads: pick one")
    if w.think_time_ms and w.turns == 1:
        raise UsageError("--think-time-ms is the pause between turns of a conversation: add --turns N (N >= 2)")
    if w.turns > 1 and load.duration_s is not None:
        raise UsageError("--turns plays whole conversations: size the level with --num-requests, not --duration")
    if time_scales != (1.0,) and w.trace is None:
        raise UsageError("--time-scale scales a trace's timestamps: add --trace FILE")
    _check_prefix_groups(cfg, w)
    if load.window is not None and (load.ramp is None or not load.ramp.strip().lower().startswith("linear")):
        raise UsageError("--ramp-window sets the report windows of a linear ramp: add --ramp linear:START:END:DURATION")


def _check_prefix_groups(cfg: BenchConfig, w: WorkloadOptions) -> None:
    if (w.prefix_groups > 0) != (w.prefix_len > 0):
        raise UsageError("--prefix-groups G and --prefix-len L go together (G shared prefixes of L tokens each)")
    if w.prefix_groups and (cfg.shared_prefix_len or w.trace is not None or cfg.dataset is not None):
        raise UsageError("--prefix-groups replaces --shared-prefix-len (one group), and a --trace or --dataset "
                         "brings its own prompts: drop one")
    if w.prefix_groups and w.prefix_len >= cfg.input_len:
        raise UsageError(f"--prefix-len {w.prefix_len} must be below --input-len {cfg.input_len}: the prefix is "
                         "part of the prompt")


def _with_trace(cfg: BenchConfig, trace: Path, load: LoadOptions, time_scale: str) -> BenchConfig:
    """--trace: one open-loop level per --time-scale, the trace's own request count, no duration."""
    if load.levels_given:
        raise UsageError("--trace sets its own arrival times: drop --concurrency/--rate")
    if load.duration_s is not None:
        raise UsageError("--trace runs until its last request: drop --duration (--num-requests cuts it)")
    loaded = load_trace(trace, load.num_requests)
    levels = tuple(LevelSpec(request_rate=loaded.request_rate(s)) for s in cfg.time_scales)
    if len(set(levels)) != len(levels):
        raise UsageError(f"--time-scale {time_scale}: two scales give the trace the same mean rate")
    return dataclasses.replace(cfg, trace=loaded, levels=levels, num_requests=len(loaded.rows), duration_s=None)


def _with_ramp(cfg: BenchConfig, load: LoadOptions) -> BenchConfig:
    """--ramp: a step ramp's steps as levels, or a linear ramp's report windows as levels."""
    assert load.ramp is not None
    if load.levels_given:
        raise UsageError("--ramp sets the levels: drop --concurrency/--rate")
    if load.num_requests is not None or load.duration_s is not None:
        raise UsageError("--ramp runs for its own durations: drop --num-requests/--duration")
    parsed = parse_ramp(load.ramp)
    if parsed.shape == "step":
        return dataclasses.replace(cfg, ramp=parsed, levels=tuple(LevelSpec(concurrency=c) for c in parsed.steps),
                                   duration_s=parsed.duration_s, num_requests=None)
    window_s = parse_duration_s(load.window, "--ramp-window") if load.window is not None else min(10.0, parsed.duration_s)
    concs = [c for _, _, c in parsed.windows(window_s)]
    if len(set(concs)) != len(concs):
        raise UsageError(f"--ramp {load.ramp} with --ramp-window {window_s:g}s gives two windows the same concurrency "
                         f"({', '.join(map(str, concs))}): use a longer --ramp-window or a steeper ramp")
    return dataclasses.replace(cfg, ramp=parsed, window_s=window_s, num_requests=None, duration_s=parsed.duration_s,
                               levels=tuple(LevelSpec(concurrency=c) for c in concs))


def apply_workloads(cfg: BenchConfig, workload: WorkloadOptions, load: LoadOptions) -> BenchConfig:
    """The workload options checked against each other and folded into the config (levels included)."""
    time_scales = parse_time_scales(workload.time_scale)
    _check_combinations(cfg, workload, load, time_scales)
    out = dataclasses.replace(cfg, turns=workload.turns, think_time_ms=workload.think_time_ms,
                              time_scales=time_scales, prefix_groups=workload.prefix_groups,
                              prefix_len=workload.prefix_len)
    if workload.turns > 1:
        out = dataclasses.replace(out, endpoint=Endpoint.CHAT)
    if workload.trace is not None:
        out = _with_trace(out, workload.trace, load, workload.time_scale)
    if load.ramp is not None:
        out = _with_ramp(out, load)
    return out
