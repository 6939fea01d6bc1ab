"""The server probes: `server_metrics` (probes/server_metrics.py, a /metrics window), `server_config`
(probes/server_config.py) and `server_process` (probes/server_process.py)."""
from __future__ import annotations

import dataclasses
from typing import Any

from triage.core.probe_data.base import Payload, payload


@payload
class HistogramWindow:
    """One histogram over the window, from bucket deltas; mean/p* are None when count_delta is 0."""

    count_delta: float | None = None
    sum_delta_s: float | None = None
    mean_s: float | None = None
    p50_s: float | None = None
    p90_s: float | None = None
    p99_s: float | None = None


@payload
class Histograms:
    """The serving latency histograms over the window, by name: the one list of them. Each engine's metric map
    keys its histogram names by these fields (triage/engines/metrics.py); absent where the engine has none."""

    ttft_s: HistogramWindow | None = None
    itl_s: HistogramWindow | None = None
    e2e_s: HistogramWindow | None = None
    queue_time_s: HistogramWindow | None = None
    prefill_time_s: HistogramWindow | None = None
    decode_time_s: HistogramWindow | None = None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


@payload
class RankWindow:
    """One data-parallel rank over the window, from the series whose rank label has this value."""

    rank: str | None = None
    num_requests_running: float | None = None        # at the end
    num_requests_waiting: float | None = None        # at the end
    num_requests_waiting_max: float | None = None    # the most over every scrape
    kv_cache_usage_frac_max: float | None = None
    ttft: HistogramWindow | None = None
    queue_time: HistogramWindow | None = None


@payload
class KvTransferWindow:
    """A KV connector's own transfer metrics over the window (per transfer: one request's KV, or part of it)."""

    connector: str | None = None
    side: str | None = None                          # the instance that records them: prefill | decode
    metric: str | None = None                        # the time series read
    num_transfers_delta: float | None = None
    time_mean_s: float | None = None
    time_p90_s: float | None = None
    bytes_mean: float | None = None
    gbytes_per_s: float | None = None                # bytes moved / seconds spent moving them
    failures_delta: float | None = None


@payload
class KvOffloadWindow:
    """A KV offload tier over the window: how often a lookup found the KV there, and the traffic it caused."""

    tier: str | None = None
    queries_delta: float | None = None               # tokens looked up in the tier
    hits_delta: float | None = None
    hit_rate: float | None = None                    # None without queries
    bytes_delta: float | None = None                 # bytes moved to and from the tier
    transfer_s_delta: float | None = None            # seconds spent moving them
    gbytes_per_s: float | None = None                # bytes_delta over the window: the host link's load
    used_frac: float | None = None                   # the tier's used / total capacity, at the end


@payload
class ServerMetricsData(Payload):
    """Two scrapes of /metrics over `window_s` (plus a few between them for the maxima), in
    engine-neutral terms. Histogram keys: ttft_s, itl_s, e2e_s, queue_time_s, prefill_time_s,
    decode_time_s; a key is absent when the engine does not export it."""

    PROBE = "server_metrics"

    engine: str | None = None                        # "vllm" | "vllm-v0" | "sglang" | "tgi"
    model_name: str | None = None
    window_s: float | None = None
    num_scrapes: int | None = None
    url: str | None = None
    kv_cache_usage_frac: float | None = None         # 0..1, at the end
    kv_cache_usage_frac_max: float | None = None     # max over every scrape (and DP engine)
    num_requests_running: float | None = None
    num_requests_running_max: float | None = None
    num_requests_waiting: float | None = None
    num_requests_waiting_max: float | None = None
    num_requests_swapped: float | None = None        # vLLM V0 only
    num_preemptions_delta: float | None = None       # SGLang: retractions
    preemptions_per_s: float | None = None
    prefix_cache_queries_delta: float | None = None
    prefix_cache_hits_delta: float | None = None
    prefix_cache_hit_rate: float | None = None       # None when there were no queries
    prefix_cache_hit_rate_source: str | None = None  # "counters" | "gauge"
    prompt_tokens_delta: float | None = None
    generation_tokens_delta: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    num_requests_finished_delta: float | None = None
    histograms: Histograms | None = None
    cache_config: dict[str, Any] | None = None       # vllm:cache_config_info labels, typed; {} when absent
    kv_cache_capacity_tokens: float | None = None    # SGLang max_total_num_tokens
    spec_decode_accepted_tokens_delta: float | None = None
    spec_decode_draft_tokens_delta: float | None = None
    spec_decode_acceptance_rate: float | None = None
    spec_decode_mean_accept_length: float | None = None   # SGLang spec_accept_length
    # The deployment's shape (docs/TOPOLOGIES.md): per data-parallel rank when the engine labels its series by
    # rank and there are at least two; the disaggregation role its labels name; its KV connector's transfers;
    # its KV offload tier; the MoE experts' balance (mean/max load, 1.0 even) over the window.
    ranks: tuple[RankWindow, ...] = ()
    role: str | None = None
    kv_transfer: KvTransferWindow | None = None
    kv_offload: KvOffloadWindow | None = None
    expert_balancedness: float | None = None
    counter_resets: tuple[str, ...] = ()              # counters that went down (server restarted)
    num_bad_lines: int | None = None                  # exposition lines the parser skipped
    num_missed_scrapes: int | None = None


@payload
class ServerConfigData(Payload):
    """The serving engine's settings. Precedence: what the engine reports (cache_config_info,
    /v1/models, /version, TGI /info), then its command line, then defaults stable across versions."""

    PROBE = "server_config"

    engine: str | None = None
    engine_version: str | None = None
    model: str | None = None
    served_model_name: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_batch_total_tokens: int | None = None        # TGI's token budget of a batch (--max-batch-total-tokens)
    max_concurrent_requests: int | None = None       # TGI's refusal limit (/info), not a batch size
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    enforce_eager: bool | None = None
    speculative_config: Any = None                   # vLLM's JSON object, or SGLang/TGI's method name
    block_size: int | None = None
    api_server_count: int | None = None
    swap_space_gib: float | None = None
    # The deployment's shape (docs/TOPOLOGIES.md), from the command line:
    dp_load_balance: str | None = None               # vLLM internal|hybrid|external; SGLang --load-balance-method
    dp_attention: bool | None = None                 # SGLang --enable-dp-attention
    expert_parallel: bool | None = None              # vLLM --enable-expert-parallel
    expert_parallel_size: int | None = None          # SGLang --ep-size
    enable_eplb: bool | None = None                  # expert-parallel load balancing
    disaggregation_role: str | None = None           # prefill | decode | both (vLLM kv_role kv_both)
    kv_connector: str | None = None                  # vLLM kv_connector; SGLang --disaggregation-transfer-backend
    kv_offload: str | None = None                    # vLLM native|lmcache|<offload connector>; SGLang hicache
    kv_offload_size_gib: float | None = None
    metrics_engine: str | None = None                # "vllm" | "vllm-v0" | "sglang" | "tgi"
    cache_config: dict[str, Any] | None = None
    sources: dict[str, str] | None = None            # field -> cache_config_info|/v1/models|cmdline|default...
    unparsed_flags: tuple[str, ...] = ()


@payload
class ProcessInfo:
    pid: int | None = None
    name: str | None = None
    cpu_pct: float | None = None
    num_threads: int | None = None
    rss_bytes: int | None = None


@payload
class ServerProcessData(Payload):
    """The serving process, found by listening port or command line (probes/discovery.py)."""

    PROBE = "server_process"

    pid: int | None = None
    engine: str | None = None                        # vllm|sglang|tgi|reference|ollama|llama.cpp
    cmdline: tuple[str, ...] | None = None           # redacted
    uptime_s: float | None = None
    cpu_affinity: tuple[int, ...] | None = None
    affinity_numa_nodes: tuple[int, ...] | None = None
    memory_numa_nodes: tuple[int, ...] | None = None  # Mems_allowed_list
    window_s: float | None = None
    processes: tuple[ProcessInfo, ...] = ()           # the tree, at most 64
    max_thread_cpu_pct: float | None = None           # ~100: one thread is pegged
    rss_bytes_start: int | None = None
    rss_bytes_end: int | None = None
    debug_env: dict[str, str] | None = None           # debugging/profiling variables that are set, redacted
    hf_home: str | None = None
    cgroup_path: str | None = None                    # its cgroup v2 path (/proc/PID/cgroup)
    cgroup_cpu_quota_cores: float | None = None       # cpu.max quota / period: None when unlimited
    cgroup_memory_max_bytes: int | None = None        # memory.max: None when unlimited
    uid: int | None = None                            # the user it runs as (/proc/PID/status)
    user: str | None = None
    unsupported_fields: tuple[str, ...] = ()


@payload
class BatchingSettings:
    """How many requests a non-vLLM engine may batch, from its argv and environment (docs/ENGINES.md):
    llama.cpp `--parallel`/`-c`/`-nocb`, Ollama OLLAMA_NUM_PARALLEL/OLLAMA_MAX_QUEUE, `transformers serve
    --continuous-batching`. None: not set (the engine's default)."""

    slots: int | None = None
    continuous: bool | None = None
    ctx_tokens: int | None = None
    max_queue: int | None = None
    evidence: tuple[str, ...] = ()
    from_cmdline: bool | None = None


@payload
class LlamaCppSlotsData:
    """llama-server's own view of its slots: /props and /slots."""

    total_slots: int | None = None
    busy_slots: int | None = None
    ctx_per_slot_tokens: int | None = None
    build_info: str | None = None
    model_path: str | None = None


@payload
class EngineIdentityData(Payload):
    """Which engine serves the URL and which version, on what evidence: the command line, the `Server`
    header, /version, /api/version, /props, /info, /openapi.json routes, /v1/models `owned_by` and the
    metric names (each engine module in triage/engines/ names its signals and their source)."""

    PROBE = "engine_identity"

    engine: str | None = None          # vllm, sglang, tgi, llama.cpp, ollama, transformers, lmdeploy, trtllm, reference
    version: str | None = None
    evidence: tuple[str, ...] = ()
    server_header: str | None = None
    says: str | None = None                          # what the server says of itself (Server header, owned_by, /version)
    batching: BatchingSettings | None = None
    llamacpp: LlamaCppSlotsData | None = None
