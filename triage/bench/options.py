"""`triage bench`'s options as given on the command line, in the groups its --help shows: frozen, typed, and
not yet checked. `run_config.config_from_options` checks them and builds the run's BenchConfig, once."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TargetOptions:
    urls: tuple[str, ...] = ()          # --url, once per replica
    urls_file: Path | None = None       # --urls
    balance: str = "round-robin"
    model: str | None = None
    endpoint: str = "completions"
    api_key: str | None = None
    headers: tuple[str, ...] = ()       # --header NAME:VALUE
    timeout_s: float = 60.0
    warm_connections: bool = True
    request_id_header: str | None = "X-Request-Id"


@dataclass(frozen=True, slots=True)
class LoadOptions:
    concurrency: str | None = None      # closed-loop levels, e.g. "1,4,16"
    rate: str | None = None             # open-loop levels in requests/s
    burstiness: float = 1.0
    num_requests: int | None = None
    duration_s: float | None = None
    warmup: int | None = None
    repeat: int = 1
    repeat_order: str = "rounds"
    seed: int = 0
    max_in_flight: int = 512
    ramp: str | None = None
    window: str | None = None           # a linear ramp's report window, e.g. "10s"

    @property
    def levels_given(self) -> bool:
        """--concurrency or --rate named the levels (a ramp, a trace or find-max must not be given too)."""
        return self.concurrency is not None or self.rate is not None


@dataclass(frozen=True, slots=True)
class WorkloadOptions:
    input_len: str | None = None        # one length, or a comma list for a sweep
    output_len: int | None = None
    len_dist: str = "fixed"
    shared_prefix_len: int = 0
    dataset: Path | None = None
    turns: int = 1
    think_time_ms: float = 0.0
    trace: Path | None = None
    time_scale: str = "1"
    prefix_groups: int = 0
    prefix_len: int = 0


@dataclass(frozen=True, slots=True)
class SloOptions:
    slo: str | None = None              # e.g. "ttft_ms=500,tpot_ms=50"
    find_max: str | None = None         # concurrency | rate
    attainment: float = 0.99
    max_requests: int | None = None
    max_duration: str | None = None


@dataclass(frozen=True, slots=True)
class ScaleOptions:
    workers: int = 1
    shard: str | None = None            # INDEX/COUNT or env


@dataclass(frozen=True, slots=True)
class OutputOptions:
    json: Path | None = None
    jsonl: Path | None = None
    csv: Path | None = None
    html: Path | None = None
    format: str = "text"
    output_dir: Path | None = None


@dataclass(frozen=True, slots=True)
class BenchOptions:
    target: TargetOptions = TargetOptions()
    load: LoadOptions = LoadOptions()
    workload: WorkloadOptions = WorkloadOptions()
    slo: SloOptions = SloOptions()
    scale: ScaleOptions = ScaleOptions()
    output: OutputOptions = OutputOptions()
