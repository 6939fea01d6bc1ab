"""What a bench level records beside its latencies, typed: the server's /metrics window over the level
(triage/bench/server_scrape.py), the GPUs' NVML samples, the connections it opened (triage/bench/level_extras.py)
and, with several --url, each replica's share (triage/bench/fleet.py). And `BenchRunConfig`: the part of a
bench's config that rules read, as one typed view of the config's JSON object.

Rules read these by attribute; tests/test_bench_rule_contract.py runs real benches and fails when a rule reads
a field no bench fills. Every field defaults to None (not measured): a report from before a field existed reads.
"""
from __future__ import annotations

from typing import Any

from triage.core.convert import from_dict
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


@payload
class BenchRunConfig:
    """The bench config's keys that rules read (the config object itself records the whole run)."""

    model: str | None = None
    endpoint: str | None = None
    slo: Slo | None = None
    shared_prefix_len: int | None = None
    input_len: Any = None                            # one length, or the list of an --input-len sweep
    output_len: int | None = None
    balance: str | None = None                       # several --url: round-robin | least-in-flight
    idle_connect_ms_p50: float | None = None

    @classmethod
    def of(cls, config: dict[str, Any] | None) -> BenchRunConfig:
        return from_dict(cls, config or {}, "bench.config")
