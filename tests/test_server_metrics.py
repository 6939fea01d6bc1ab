"""The /metrics registry on its own: vLLM V1 names, types and labels, and counters that move by deltas."""
from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from triage.reference_engine.serve.metrics_export import (
    EngineCounters,
    FinishedRequest,
    ServerMetrics,
    one_two_five_buckets,
)

CAPTURE = Path(__file__).parent / "fixtures" / "vllm_v1_metrics_head.txt"


def _families(metrics: ServerMetrics) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}


def _samples(metrics: ServerMetrics) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _labels(**extra: str) -> tuple:
    return tuple(sorted({"model_name": "m", "engine": "0", **extra}.items()))


def test_names_types_and_labels_match_a_real_vllm_capture():
    """Every series in the captured vLLM V1 /metrics exists here with the same type and label names."""
    ours = {}
    for family in text_string_to_metric_families(ServerMetrics("m", 1024).render().decode()):
        for s in family.samples:
            ours[s.name] = (family.type, set(s.labels))
    theirs = {}
    for family in text_string_to_metric_families(CAPTURE.read_text()):
        for s in family.samples:
            theirs[s.name] = (family.type, set(s.labels))
    assert len(theirs) >= 10
    missing = sorted(set(theirs) - set(ours))
    assert not missing, f"series in the vLLM capture that we do not export: {missing}"
    for name, (kind, labels) in theirs.items():
        assert ours[name] == (kind, labels), name


def test_every_series_the_issue_names_is_exported():
    fams = _families(ServerMetrics("m", 1024))
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert fams[name].type == "gauge"
    for name in ("vllm:num_preemptions", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                 "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success"):
        assert fams[name].type == "counter"
    for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                 "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
                 "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
                 "vllm:iteration_tokens_total"):
        assert fams[name].type == "histogram", name


def test_counters_advance_by_deltas_and_never_go_down():
    m = ServerMetrics("m", 1024)
    m.advance_counters(EngineCounters(prompt_tokens=10, generation_tokens=4, prefix_cache_queries=10,
                                      prefix_cache_hits=0, num_preemptions=1))
    m.advance_counters(EngineCounters(prompt_tokens=25, generation_tokens=9, prefix_cache_queries=25,
                                      prefix_cache_hits=8, num_preemptions=1))
    m.advance_counters(EngineCounters(prompt_tokens=20, generation_tokens=9, prefix_cache_queries=25,
                                      prefix_cache_hits=8, num_preemptions=1))   # an engine reset
    s = _samples(m)
    assert s[("vllm:prompt_tokens_total", _labels())] == 25
    assert s[("vllm:generation_tokens_total", _labels())] == 9
    assert s[("vllm:prefix_cache_hits_total", _labels())] == 8
    assert s[("vllm:num_preemptions_total", _labels())] == 1


def test_finished_request_fills_success_and_latency_histograms():
    m = ServerMetrics("m", 1024)
    m.set_scheduler_state(3, 2, 0.25)
    m.observe_first_token(0.03)
    m.observe_inter_token(0.2, 2)
    m.observe_iteration(48)
    m.observe_finished(FinishedRequest(finish_reason="length", e2e_s=1.2, queue_s=0.1, prefill_s=0.05,
                                       decode_s=1.05, num_prompt_tokens=30, num_output_tokens=8,
                                       max_tokens=8))
    s = _samples(m)
    assert s[("vllm:num_requests_running", _labels())] == 3
    assert s[("vllm:num_requests_waiting", _labels())] == 2
    assert s[("vllm:kv_cache_usage_perc", _labels())] == 0.25
    assert s[("vllm:request_success_total", _labels(finished_reason="length"))] == 1
    assert s[("vllm:request_success_total", _labels(finished_reason="stop"))] == 0
    assert s[("vllm:time_to_first_token_seconds_count", _labels())] == 1
    assert s[("vllm:time_to_first_token_seconds_bucket", _labels(le="0.04"))] == 1
    assert s[("vllm:time_to_first_token_seconds_bucket", _labels(le="0.02"))] == 0
    assert s[("vllm:inter_token_latency_seconds_count", _labels())] == 2     # the gap split over 2 tokens
    assert abs(s[("vllm:inter_token_latency_seconds_sum", _labels())] - 0.2) < 1e-9
    assert s[("vllm:iteration_tokens_total_bucket", _labels(le="64.0"))] == 1
    assert s[("vllm:iteration_tokens_total_bucket", _labels(le="32.0"))] == 0
    assert s[("vllm:e2e_request_latency_seconds_sum", _labels())] == 1.2
    assert s[("vllm:request_queue_time_seconds_sum", _labels())] == 0.1
    assert abs(s[("vllm:request_decode_time_seconds_sum", _labels())] - 1.05) < 1e-9
    assert s[("vllm:request_generation_tokens_sum", _labels())] == 8
    assert abs(s[("vllm:request_time_per_output_token_seconds_sum", _labels())] - 0.15) < 1e-9


def test_cache_config_info_carries_the_kv_configuration():
    m = ServerMetrics("m", 1024)
    m.set_cache_config({"block_size": 16, "cache_dtype": "auto", "enable_prefix_caching": True,
                        "gpu_memory_utilization": 0.9, "num_gpu_blocks": 512})
    (family,) = [f for f in text_string_to_metric_families(m.render().decode())
                 if f.name == "vllm:cache_config_info"]
    (sample,) = family.samples
    assert sample.value == 1
    assert sample.labels == {"block_size": "16", "cache_dtype": "auto", "enable_prefix_caching": "True",
                             "gpu_memory_utilization": "0.9", "num_gpu_blocks": "512", "engine": "0"}


def test_token_buckets_are_vllms_1_2_5_ladder():
    assert one_two_five_buckets(100) == (1, 2, 5, 10, 20, 50, 100)
    assert one_two_five_buckets(1024)[-1] == 1000
    assert one_two_five_buckets(0) == (1,)


def test_two_servers_in_one_process_do_not_collide():
    a, b = ServerMetrics("a", 64), ServerMetrics("b", 64)
    a.observe_first_token(0.5)
    assert b"model_name=\"a\"" in a.render() and b"model_name=\"a\"" not in b.render()
