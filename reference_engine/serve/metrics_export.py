"""The /metrics registry of the reference server, named and labelled like vLLM's V1 engine.

Dashboards, alerts and `triage diagnose` written for vLLM read these series unchanged: the same
names, the same `model_name` and `engine` labels, the same histogram buckets. The registry is the
server's own (never prometheus_client's global one), so two servers in one process never collide.

Only the engine thread writes here (see server_worker.py); /metrics reads it from the event loop,
which prometheus_client makes safe with its per-metric locks.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

ENGINE_INDEX = "0"
FINISHED_REASONS = ("stop", "length", "abort")

# Bucket layouts as vLLM V1 publishes them, so quantiles computed from either server compare.
TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                  7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                 10.0, 20.0, 40.0, 80.0)
REQUEST_LATENCY_BUCKETS_S = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                             50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def one_two_five_buckets(max_value: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to and including max_value (vLLM's token-count buckets)."""
    buckets: list[int] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * scale
            if value > max_value:
                return tuple(buckets) or (1,)
            buckets.append(value)
        scale *= 10


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """Timings of one request that ended normally (stop or length), in seconds."""

    finish_reason: str
    e2e_s: float
    queue_s: float
    prefill_s: float
    decode_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    max_tokens: int | None


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """Cumulative engine totals; the registry's counters advance by the change between two of these."""

    num_preemptions: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0


class ServerMetrics:
    """vLLM V1 series for one served model, in a registry of its own."""

    def __init__(self, model_name: str, max_model_len: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["model_name", "engine"]
        values = (model_name, ENGINE_INDEX)
        reg = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=reg).labels(*values)

        def histogram(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=reg).labels(*values)

        self.num_requests_running = gauge("vllm:num_requests_running",
                                          "Number of requests in model execution batches.")
        self.num_requests_waiting = gauge("vllm:num_requests_waiting",
                                          "Number of requests waiting to be processed.")
        self.kv_cache_usage_perc = gauge("vllm:kv_cache_usage_perc",
                                         "KV-cache usage. 1 means 100 percent usage.")

        self.prefix_cache_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.")
        self.prefix_cache_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.num_preemptions = counter("vllm:num_preemptions",
                                       "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens",
                                         "Number of generation tokens processed.")
        success = Counter("vllm:request_success", "Count of successfully processed requests.",
                          [*labels, "finished_reason"], registry=reg)
        self.request_success = {reason: success.labels(*values, reason) for reason in FINISHED_REASONS}

        token_buckets = one_two_five_buckets(max_model_len)
        self.request_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets)
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets)
        self.request_params_max_tokens = histogram(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
            token_buckets)
        self.iteration_tokens = histogram(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
            ITERATION_TOKEN_BUCKETS)

        self.time_to_first_token = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            TTFT_BUCKETS_S)
        self.inter_token_latency = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS_S)
        self.request_time_per_output_token = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS_S)
        self.e2e_request_latency = histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS_S)
        self.request_queue_time = histogram(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS_S)
        self.request_inference_time = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.", REQUEST_LATENCY_BUCKETS_S)
        self.request_prefill_time = histogram(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS_S)
        self.request_decode_time = histogram(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS_S)

        self._cache_config_info: Gauge | None = None
        self._last = EngineCounters()

    def set_cache_config(self, info: Mapping[str, object]) -> None:
        """The `vllm:cache_config_info` info gauge: the KV cache configuration as labels, value 1."""
        labels = {key: _label_value(value) for key, value in info.items()}
        labels["engine"] = ENGINE_INDEX
        gauge = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                      sorted(labels), registry=self.registry)
        gauge.labels(**labels).set(1)
        self._cache_config_info = gauge

    def set_scheduler_state(self, num_running: int, num_waiting: int, kv_cache_usage_frac: float) -> None:
        self.num_requests_running.set(num_running)
        self.num_requests_waiting.set(num_waiting)
        self.kv_cache_usage_perc.set(kv_cache_usage_frac)

    def advance_counters(self, now: EngineCounters) -> None:
        """Move each counter by its change since the last call (a counter never goes down)."""
        last = self._last
        for counter, before, after in (
            (self.num_preemptions, last.num_preemptions, now.num_preemptions),
            (self.prefix_cache_queries, last.prefix_cache_queries, now.prefix_cache_queries),
            (self.prefix_cache_hits, last.prefix_cache_hits, now.prefix_cache_hits),
            (self.prompt_tokens, last.prompt_tokens, now.prompt_tokens),
            (self.generation_tokens, last.generation_tokens, now.generation_tokens),
        ):
            if after > before:
                counter.inc(after - before)
        self._last = now

    def observe_iteration(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self.iteration_tokens.observe(num_tokens)

    def observe_first_token(self, ttft_s: float) -> None:
        self.time_to_first_token.observe(max(ttft_s, 0.0))

    def observe_inter_token(self, gap_s: float, num_tokens: int) -> None:
        """One output that carried `num_tokens` tokens `gap_s` after the previous one."""
        if num_tokens <= 0:
            return
        per_token_s = max(gap_s, 0.0) / num_tokens
        for _ in range(num_tokens):
            self.inter_token_latency.observe(per_token_s)

    def observe_finished(self, done: FinishedRequest) -> None:
        self.request_success[done.finish_reason].inc()
        self.e2e_request_latency.observe(max(done.e2e_s, 0.0))
        self.request_queue_time.observe(max(done.queue_s, 0.0))
        self.request_prefill_time.observe(max(done.prefill_s, 0.0))
        self.request_decode_time.observe(max(done.decode_s, 0.0))
        self.request_inference_time.observe(max(done.prefill_s, 0.0) + max(done.decode_s, 0.0))
        self.request_prompt_tokens.observe(done.num_prompt_tokens)
        self.request_generation_tokens.observe(done.num_output_tokens)
        if done.max_tokens:
            self.request_params_max_tokens.observe(done.max_tokens)
        if done.num_output_tokens > 1:
            self.request_time_per_output_token.observe(
                max(done.decode_s, 0.0) / (done.num_output_tokens - 1))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _label_value(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return "None" if value is None else str(value)
