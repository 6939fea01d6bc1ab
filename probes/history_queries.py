"""The PromQL `diagnose --prometheus` runs, per engine. Every engine metric name comes from that engine's
source: vLLM, SGLang and TGI through the engine-truth tables (tests/test_history_queries.py checks each
name against them), llama.cpp from tools/server/server.cpp (its metric map in triage/engines/others.py), and the GPU from
dcgm-exporter's DCGM fields (DCGM_FI_DEV_CLOCKS_EVENT_REASONS is field 112, the DCGM >= 3.3 name of
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS; both are tried).

Templates take `{sel}` (the label matcher, e.g. `{instance="10.0.0.5:8000"}` or empty) and `{w}` (the
window, e.g. `1h`). Each query returns one number for the window.
"""
from __future__ import annotations

# Which engine a Prometheus holds, by a metric only that engine exports (checked in this order).
ENGINE_MARKERS = (
    ("vllm", ("vllm:num_requests_running",)),
    ("sglang", ("sglang:num_running_reqs",)),
    ("tgi", ("tgi_queue_size",)),
    ("llama.cpp", ("llamacpp:requests_processing",)),
)


def _quantile(q: float, *histograms: str) -> str:
    rates = " or ".join(f"rate({h}_bucket{{sel}}[{{w}}])" for h in histograms)
    return f"histogram_quantile({q}, sum by (le) ({rates}))"


def _rate(*counters: str) -> str:
    return "sum(" + " or ".join(f"rate({c}{{sel}}[{{w}}])" for c in counters) + ")"


def _avg(*gauges: str) -> str:
    return "sum(" + " or ".join(f"avg_over_time({g}{{sel}}[{{w}}])" for g in gauges) + ")"


def _max(*gauges: str) -> str:
    return "max(" + " or ".join(f"max_over_time({g}{{sel}}[{{w}}])" for g in gauges) + ")"


def _mean_of(*gauges: str) -> str:
    return "avg(" + " or ".join(f"avg_over_time({g}{{sel}}[{{w}}])" for g in gauges) + ")"


# signal -> PromQL, per engine. Latencies in seconds, rates per second, usage 0..1.
ENGINE_QUERIES: dict[str, dict[str, str]] = {
    "vllm": {
        "ttft_p50_s": _quantile(0.5, "vllm:time_to_first_token_seconds"),
        "ttft_p90_s": _quantile(0.9, "vllm:time_to_first_token_seconds"),
        "ttft_p99_s": _quantile(0.99, "vllm:time_to_first_token_seconds"),
        "tpot_p50_s": _quantile(0.5, "vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"),
        "tpot_p99_s": _quantile(0.99, "vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"),
        "queue_time_p99_s": _quantile(0.99, "vllm:request_queue_time_seconds"),
        "requests_per_s": _rate("vllm:request_success_total"),
        "prompt_tokens_per_s": _rate("vllm:prompt_tokens_total"),
        "generation_tokens_per_s": _rate("vllm:generation_tokens_total"),
        "preemptions_per_s": _rate("vllm:num_preemptions_total"),
        "requests_waiting_mean": _avg("vllm:num_requests_waiting"),
        "requests_waiting_max": _max("vllm:num_requests_waiting"),
        "requests_running_mean": _avg("vllm:num_requests_running"),
        "requests_running_max": _max("vllm:num_requests_running"),
        "kv_cache_usage_mean": _mean_of("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "kv_cache_usage_max": _max("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    "sglang": {
        "ttft_p50_s": _quantile(0.5, "sglang:time_to_first_token_seconds"),
        "ttft_p90_s": _quantile(0.9, "sglang:time_to_first_token_seconds"),
        "ttft_p99_s": _quantile(0.99, "sglang:time_to_first_token_seconds"),
        "tpot_p50_s": _quantile(0.5, "sglang:inter_token_latency_seconds",
                                "sglang:request_time_per_output_token_seconds"),
        "tpot_p99_s": _quantile(0.99, "sglang:inter_token_latency_seconds",
                                "sglang:request_time_per_output_token_seconds"),
        "queue_time_p99_s": _quantile(0.99, "sglang:queue_time_seconds"),
        "requests_per_s": _rate("sglang:num_requests_total"),
        "prompt_tokens_per_s": _rate("sglang:prompt_tokens_total"),
        "generation_tokens_per_s": _rate("sglang:generation_tokens_total"),
        "preemptions_per_s": _rate("sglang:num_retracted_requests_total"),
        "requests_waiting_mean": _avg("sglang:num_queue_reqs"),
        "requests_waiting_max": _max("sglang:num_queue_reqs"),
        "requests_running_mean": _avg("sglang:num_running_reqs"),
        "requests_running_max": _max("sglang:num_running_reqs"),
        "kv_cache_usage_mean": _mean_of("sglang:token_usage"),
        "kv_cache_usage_max": _max("sglang:token_usage"),
    },
    "tgi": {   # no TTFT histogram in TGI: queue time and end-to-end duration stand in
        "queue_time_p99_s": _quantile(0.99, "tgi_request_queue_duration"),
        "e2e_p99_s": _quantile(0.99, "tgi_request_duration"),
        "tpot_p50_s": _quantile(0.5, "tgi_request_mean_time_per_token_duration"),
        "tpot_p99_s": _quantile(0.99, "tgi_request_mean_time_per_token_duration"),
        "requests_per_s": _rate("tgi_request_success"),
        "prompt_tokens_per_s": _rate("tgi_request_input_length_sum"),
        "generation_tokens_per_s": _rate("tgi_request_generated_tokens_sum"),
        "requests_waiting_mean": _avg("tgi_queue_size"),
        "requests_waiting_max": _max("tgi_queue_size"),
        "requests_running_mean": _avg("tgi_batch_current_size"),
        "requests_running_max": _max("tgi_batch_current_size"),
    },
    "llama.cpp": {   # counters and gauges only; no latency histograms
        "prompt_tokens_per_s": _rate("llamacpp:prompt_tokens_total"),
        "generation_tokens_per_s": _rate("llamacpp:tokens_predicted_total"),
        "requests_waiting_mean": _avg("llamacpp:requests_deferred"),
        "requests_waiting_max": _max("llamacpp:requests_deferred"),
        "requests_running_mean": _avg("llamacpp:requests_processing"),
        "requests_running_max": _max("llamacpp:requests_processing"),
        "kv_cache_usage_mean": _mean_of("llamacpp:kv_cache_usage_ratio"),
        "kv_cache_usage_max": _max("llamacpp:kv_cache_usage_ratio"),
    },
}

GPU_QUERIES = {   # dcgm-exporter; {sel} here is the --gpu-selector
    "gpu_sm_clock_mhz_mean": _mean_of("DCGM_FI_DEV_SM_CLOCK"),
    "gpu_sm_clock_mhz_min": "min(" + "min_over_time(DCGM_FI_DEV_SM_CLOCK{sel}[{w}])" + ")",
    "gpu_power_w_mean": _mean_of("DCGM_FI_DEV_POWER_USAGE"),
    "gpu_temp_c_max": _max("DCGM_FI_DEV_GPU_TEMP"),
    "gpu_clock_event_reasons_max": _max("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
}

# Signals that measure the traffic (what users send), apart from how the server copes with it.
TRAFFIC_SIGNALS = ("requests_per_s", "prompt_tokens_per_request")
LATENCY_SIGNALS = ("ttft_p99_s", "ttft_p90_s", "ttft_p50_s", "queue_time_p99_s", "e2e_p99_s", "tpot_p99_s")


def render(template: str, selector: str, window: str) -> str:
    sel = "{" + selector.strip().strip("{}") + "}" if selector and selector.strip().strip("{}") else ""
    return template.replace("{sel}", sel).replace("{w}", window)
