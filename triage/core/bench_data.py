"""What a bench level records beside its latencies, typed: the server's /metrics window over the level
(triage/bench/server_scrape.py), the GPUs' NVML samples, the connections it opened (triage/bench/level_extras.py)
and, with several --url, each replica's share (triage/bench/fleet.py). And `BenchRunConfig`: the report's
`bench.config`, the whole record of what the run asked for and how it went (written by triage/bench, by
`bench merge` and by the importers of other tools' result files).

Rules read these by attribute; tests/test_bench_rule_contract.py runs real benches and fails when a rule reads
a field no bench fills. Every field defaults to None (not measured): a report from before a field existed reads.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from triage.core.probe_data.base import payload


@payload
class LevelServer:
    """The server's own /metrics over one level: gauges (mean over the scrapes taken while it ran, max over
    all), counter deltas, and its histograms' means and quantiles (ms)."""

    engine: str | None = None
    role: str | None = None                          # prefill | decode | both, where the engine's labels say
    kv_cache_usage_frac_mean: float | None = None
    kv_cache_usage_frac_max: float | None = None
    num_requests_running_mean: float | None = None
    num_requests_running_max: float | None = None
    num_requests_waiting_mean: float | None = None
    num_requests_waiting_max: float | None = None
    num_preemptions_delta: float | None = None
    prefix_cache_hit_rate: float | None = None
    server_ttft_ms_mean: float | None = None
    server_ttft_ms_p50: float | None = None
    server_ttft_ms_p99: float | None = None
    server_queue_time_ms_mean: float | None = None
    server_prefill_time_ms_mean: float | None = None
    server_decode_time_ms_mean: float | None = None
    server_itl_ms_mean: float | None = None
    server_e2e_ms_mean: float | None = None
    kv_transfer_ms_mean: float | None = None         # the KV connector's own time per transfer (disaggregated)
    client_minus_server_ttft_ms: float | None = None
    prompt_tokens_delta: float | None = None
    generation_tokens_delta: float | None = None
    num_requests_finished_delta: float | None = None
    window_s: float | None = None
    num_scrapes: int | None = None
    num_scrape_errors: int | None = None


@payload
class LevelGpu:
    """Every GPU's NVML samples over one level."""

    utilization_gpu_pct_mean: float | None = None
    utilization_gpu_pct_max: float | None = None
    memory_used_bytes_max: float | None = None
    power_usage_w_mean: float | None = None
    sm_clock_mhz_mean: float | None = None
    clock_event_reasons_seen: tuple[str, ...] = ()
    num_samples: int | None = None
    num_gpus: int | None = None
    lost_gpu_indices: tuple[int, ...] = ()           # GPUs that fell off the bus during the level


@payload
class ConnectMs:
    p50: float | None = None
    p99: float | None = None
    max: float | None = None


@payload
class LevelConnections:
    """Connections the level opened (warm-up before its window, and inside it), reuses, retries, connect times."""

    opened: int | None = None
    opened_warm: int | None = None
    opened_in_window: int | None = None
    reused: int | None = None
    retries: int | None = None
    connect_ms: ConnectMs | None = None
    in_window_connect_ms: ConnectMs | None = None
    warm_connect_ms: ConnectMs | None = None


@payload
class ReplicaLatency:
    p50: float | None = None
    p99: float | None = None
    mean: float | None = None


@payload
class Replica:
    """One replica's share of a level when the bench ran against several (`--url A --url B`)."""

    replica: int | None = None
    url: str | None = None
    role: str | None = None                          # from the URL's #fragment or its /metrics labels
    requests: int | None = None
    failed: int | None = None
    ttft_ms: ReplicaLatency | None = None
    tpot_ms: ReplicaLatency | None = None
    e2e_ms: ReplicaLatency | None = None
    output_tokens_per_s: float | None = None
    slo_attainment_pct: float | None = None
    server: LevelServer | None = None
    cache_config: dict[str, Any] | None = None       # vLLM's cache_config_info labels (an external shape)


@payload
class Slo:
    """`triage bench --slo ttft_ms=...,tpot_ms=...,e2e_ms=...`: each a p99 limit in ms."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def __json__(self) -> dict[str, float]:
        """Only the limits given, as --slo named them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


@payload
class WorkloadTrace:
    """`--trace FILE`: the trace replayed (triage/bench/workloads.py)."""

    file: str | None = None
    sha256: str | None = None
    num_requests: int | None = None                  # the rows replayed
    num_requests_in_file: int | None = None
    time_scales: tuple[float, ...] = ()              # one level per scale
    block_tokens: int | None = None
    cut: bool | None = None                          # fewer rows replayed than the file holds


@payload
class Workload:
    """What shaped the load besides the levels, for `compare` to check that two runs are comparable."""

    kind: str | None = None                          # synthetic | dataset | prefix_groups | ramp | multi_turn | trace
    turns: int | None = None
    think_time_ms: float | None = None
    prefix_groups: int | None = None
    prefix_len: int | None = None
    ramp: str | None = None                          # the --ramp text
    window_s: float | None = None
    trace: WorkloadTrace | None = None


@payload
class ShardLevel:
    """One level of the whole run, before it was split over the shards."""

    concurrency: int | None = None
    request_rate: float | None = None
    input_len: int | None = None


@payload
class BenchShard:
    """`--shard i/N` and `--workers N` (triage/bench/workers.py): this shard's place in the whole run."""

    index: int
    count: int
    levels: tuple[ShardLevel, ...] = ()              # the whole run's levels
    clock_offset_s: tuple[float, ...] | None = None  # [low, high] of this host's clock minus the server's
    burstiness_note: str | None = None


@payload
class MergeClock:
    """`bench merge`: how far apart the shards' clocks may be."""

    offsets_s: tuple[tuple[float, ...] | None, ...] = ()   # each shard's clock_offset_s
    skew_bound_s: float | None = None
    note: str | None = None


# The keys a report carries only when they are set (a run of one URL has no `urls`, one not sharded no
# `shard`, ...): absent, never null, as the bench has always written them. Every other key is written, null
# when unset.
WRITTEN_WHEN_SET = frozenset({
    "input_len_sweep", "shard", "urls", "balance", "roles", "interrupted", "partial_level",
    "num_shards", "merged_from", "clock", "source", "streaming", "turns", "prefix", "ramp", "missing_fields"})


@payload
class BenchRunConfig:
    """A bench report's `bench.config`: what the run asked for (secrets redacted), what the client learned of
    the server, when it ran; a merged or imported report's own keys last. Rules read it as `ctx.bench_config()`."""

    url: str | None = None                           # redacted (triage.core.redact)
    model: str | None = None
    endpoint: str | None = None                      # completions | chat
    concurrency: tuple[int, ...] | None = None       # the closed-loop levels
    request_rate: tuple[float, ...] | None = None    # the open-loop levels (requests/s)
    burstiness: float | None = None
    num_requests: int | None = None                  # per level
    duration_s: float | None = None                  # per level
    warmup: int | None = None                        # requests
    repeat: int | None = None
    seed: int | None = None
    input_len: int | float | list[int] | None = None  # tokens: the first length of a sweep (a list in old reports)
    input_len_sweep: tuple[int, ...] | None = None   # --input-len A,B,...: every length, in run order
    output_len: int | float | None = None            # tokens
    len_dist: str | None = None                      # fixed | uniform | normal | lognormal
    shared_prefix_len: int | None = None             # tokens
    dataset: str | None = None
    slo: Slo | None = None
    timeout_s: float | None = None
    max_in_flight: int | None = None
    api_key: str | None = None                       # "***" when one was given
    headers: dict[str, str] | None = None            # values that look like auth masked
    warm_connections: bool | None = None
    request_id_header: str | None = None
    repeat_order: str | None = None                  # rounds | back-to-back
    workload: Workload | None = None
    shard: BenchShard | None = None
    urls: tuple[str, ...] | None = None              # several --url: every one (redacted), url is the first
    balance: str | None = None                       # several --url: round-robin | least-in-flight
    roles: tuple[str | None, ...] | None = None      # each URL's role (prefill | decode | both) from its #fragment
    # What the preflight learned of the server (triage/bench/preflight.py).
    max_model_len: int | None = None                 # tokens
    ignore_eos_sent: bool | None = None
    continuous_usage_sent: bool | None = None
    usage_reported: bool | None = None
    tokens_per_word: float | None = None
    prompt_lengths_calibrated: bool | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    started_at: str | None = None                    # UTC, ISO 8601
    started_epoch_s: float | None = None
    idle_connect_ms_p50: float | None = None         # connects to the idle server before the levels
    # Ctrl-C (triage/bench/app.py): the level it cut, when that level was kept partial.
    interrupted: bool | None = None
    partial_level: str | None = None
    # `bench merge` (triage/bench/merge.py).
    num_shards: int | None = None
    merged_from: tuple[str, ...] | None = None       # the shards' directories
    clock: MergeClock | None = None
    # `triage import` (triage/importers/): the peer tool, what its file records that a bench keeps elsewhere,
    # and what it lacked.
    source: str | None = None
    streaming: bool | None = None
    turns: int | None = None
    prefix: Any = None                               # GuideLLM's prefix_buckets (its own shape)
    ramp: str | None = None                          # vLLM's ramp_up_strategy
    missing_fields: tuple[str, ...] | None = None

    def __json__(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in WRITTEN_WHEN_SET or getattr(self, f.name) is not None}
