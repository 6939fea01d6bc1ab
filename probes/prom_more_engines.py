"""Metric normalisers for the engines beyond vLLM, SGLang and TGI: llama.cpp's `llama-server`,
LMDeploy and TensorRT-LLM's `trtllm-serve`. Same engine-neutral `EngineMetrics` as the others.

Names, from each engine's source:
- llama.cpp (tools/server/server.cpp, README "/metrics"): `llamacpp:requests_processing` (slots busy),
  `llamacpp:requests_deferred` (requests waiting for a slot), `prompt_tokens_total` (excluding cached),
  `prompt_tokens_cached_total`, `tokens_predicted_total`, `n_busy_slots_per_decode`, speculative
  counters; older builds also `kv_cache_usage_ratio` and `kv_cache_tokens`.
- LMDeploy (lmdeploy/metrics/loggers.py): `lmdeploy:num_requests_running|waiting`,
  `gpu_cache_usage_perc` (0..1), token counters and vLLM-shaped latency histograms.
- TensorRT-LLM (tensorrt_llm/serve/metrics/metrics.py): the same shape under `tensorrt_llm:`.
"""
from __future__ import annotations

from triage.probes.prom import EngineMetrics, MetricsSample, _histogram, _max, _mean, _present, _sum


def llamacpp(sample: MetricsSample) -> EngineMetrics:
    p = "llamacpp:"
    uncached = _sum(sample, [p + "prompt_tokens_total"])
    cached = _sum(sample, [p + "prompt_tokens_cached_total"])
    queries = uncached + cached if uncached is not None and cached is not None else None
    return EngineMetrics(
        engine="llama.cpp",
        kv_cache_usage_frac=_max(sample, [p + "kv_cache_usage_ratio"]),
        num_requests_running=_sum(sample, [p + "requests_processing"]),
        num_requests_waiting=_sum(sample, [p + "requests_deferred"]),
        prefix_cache_queries_total=queries,
        prefix_cache_hits_total=cached if queries is not None else None,
        prompt_tokens_total=queries if queries is not None else uncached,
        generation_tokens_total=_sum(sample, [p + "tokens_predicted_total"]),
        spec_decode_accepted_tokens_total=_sum(sample, [p + "spec_decode_num_accepted_tokens_total"]),
        spec_decode_draft_tokens_total=_sum(sample, [p + "spec_decode_num_draft_tokens_total"]),
        spec_decode_num_drafts_total=_sum(sample, [p + "spec_decode_num_drafts_total"]),
        batch_occupancy_mean=_mean(sample, [p + "n_busy_slots_per_decode"]),
    )


def _vllm_shaped(sample: MetricsSample, engine: str, p: str) -> EngineMetrics:
    return EngineMetrics(
        engine=engine,
        kv_cache_usage_frac=_max(sample, [p + "gpu_cache_usage_perc"]),
        num_requests_running=_sum(sample, [p + "num_requests_running"]),
        num_requests_waiting=_sum(sample, [p + "num_requests_waiting"]),
        num_preemptions_total=_sum(sample, [p + "num_preemptions_total"]),
        prompt_tokens_total=_sum(sample, [p + "prompt_tokens_total"]),
        generation_tokens_total=_sum(sample, [p + "generation_tokens_total"]),
        histograms=_present({
            "ttft_s": _histogram(sample, [p + "time_to_first_token_seconds"]),
            "itl_s": _histogram(sample, [p + "time_per_output_token_seconds"]),
            "e2e_s": _histogram(sample, [p + "e2e_request_latency_seconds"]),
            "queue_time_s": _histogram(sample, [p + "request_queue_time_seconds"]),
            "prefill_time_s": _histogram(sample, [p + "request_prefill_time_seconds"]),
            "decode_time_s": _histogram(sample, [p + "request_decode_time_seconds"]),
        }),
    )


def lmdeploy(sample: MetricsSample) -> EngineMetrics:
    return _vllm_shaped(sample, "lmdeploy", "lmdeploy:")


def trtllm(sample: MetricsSample) -> EngineMetrics:
    return _vllm_shaped(sample, "trtllm", "tensorrt_llm:")


# prefix -> normaliser, checked in order after vLLM, SGLang and TGI
NORMALISERS = (("llamacpp:", "llama.cpp", llamacpp), ("lmdeploy:", "lmdeploy", lmdeploy),
               ("tensorrt_llm:", "trtllm", trtllm))
