"""probes/prom.py on the real vLLM capture and on hand-written V0 / SGLang / TGI / two-engine V1 texts."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from triage.probes.metrics_window import histogram_delta, histogram_quantile, window_delta
from triage.probes.prom import EngineMetrics, Histogram, detect_engine, normalise, parse_metrics

FIX = Path(__file__).parent / "fixtures" / "prom"


def load(name: str):
    return parse_metrics((FIX / name).read_text())


def test_real_vllm_v1_capture_parses_without_created_timestamps():
    sample = load("vllm_v1_real_capture_idle.txt")
    assert sample.num_bad_lines == 0
    assert not any(s.name.endswith("_created") for s in sample.samples)
    assert detect_engine(sample) == "vllm"
    m = normalise(sample)
    assert m.model_name == "llama-vllm-single"
    assert m.kv_cache_usage_frac == 0.0
    assert m.num_requests_running == 0.0 and m.num_requests_waiting == 0.0
    assert m.prefix_cache_queries_total == 0.0 and m.prefix_cache_hits_total == 0.0
    # Not exported in this capture: None, never 0.
    assert m.spec_decode_draft_tokens_total is None
    assert m.histograms == {}


def test_real_capture_window_has_no_hit_rate_without_queries():
    m = normalise(load("vllm_v1_real_capture_idle.txt"))
    d = window_delta(m, m, 2.0)
    assert d.prefix_cache_queries_delta == 0.0
    assert d.prefix_cache_hit_rate is None
    assert d.preemptions_per_s == 0.0
    assert d.generation_tokens_per_s == 0.0


def test_v1_two_engines_are_summed_and_fractions_maxed():
    before = normalise(load("vllm_v1_two_engines_before.txt"))
    after = normalise(load("vllm_v1_two_engines_after.txt"))
    assert after.engine == "vllm"
    assert after.num_requests_running == 62.0        # 30 + 32
    assert after.kv_cache_usage_frac == 0.97          # max over engines, not 1.85
    assert after.num_requests_finished_total == 140.0  # summed over finished_reason too
    assert after.cache_config["block_size"] == 16
    assert after.cache_config["enable_prefix_caching"] is True
    assert after.cache_config["num_cpu_blocks"] is None
    assert "engine" not in after.cache_config

    d = window_delta(before, after, 10.0)
    assert d.window_s == 10.0
    assert d.kv_cache_usage_frac_max == 0.97
    assert d.num_preemptions_delta == 30.0
    assert d.preemptions_per_s == pytest.approx(3.0)
    assert d.prefix_cache_queries_delta == 4000.0
    assert d.prefix_cache_hits_delta == 1000.0
    assert d.prefix_cache_hit_rate == pytest.approx(0.25)
    assert d.prefix_cache_hit_rate_source == "counters"
    assert d.prompt_tokens_per_s == pytest.approx(2000.0)
    assert d.generation_tokens_per_s == pytest.approx(500.0)
    assert d.spec_decode_acceptance_rate == pytest.approx(90 / 300)
    assert d.counter_resets == ()

    ttft = d.histograms.ttft_s
    # Window deltas: 100 new requests: 0 in (0,0.1], 0 in (0.1,0.5], 50 in (0.5,1], 50 above 1 s.
    assert ttft.count_delta == 100.0
    assert ttft.sum_delta_s == pytest.approx(120.0)
    assert ttft.mean_s == pytest.approx(1.2)
    assert ttft.p50_s == pytest.approx(1.0)     # rank 50 falls at the top of the (0.5, 1] bucket
    assert ttft.p99_s == pytest.approx(1.0)     # in +Inf: the largest finite bound
    itl = d.histograms.itl_s
    assert itl.count_delta == 2500.0
    # rank 1250 of 2500: 2000 in (0.01, 0.05] after 0 below -> 0.01 + 0.04 * 1250/2000
    assert itl.p50_s == pytest.approx(0.035)


def test_v0_detected_and_normalised():
    sample = load("vllm_v0_preempting.txt")
    assert detect_engine(sample) == "vllm-v0"
    m = normalise(sample)
    assert m.kv_cache_usage_frac == pytest.approx(0.994)
    assert m.num_requests_swapped == 2.0
    assert m.num_preemptions_total == 120.0
    assert "itl_s" in m.histograms                       # from time_per_output_token_seconds
    assert m.histograms["itl_s"].count == 1000.0
    assert m.cache_config["cache_dtype"] == "fp8"
    d = window_delta(m, m, 5.0)
    assert d.prefix_cache_hit_rate == 0.25            # V0 only has the gauge
    assert d.prefix_cache_hit_rate_source == "gauge"
    assert d.spec_decode_acceptance_rate == 0.62
    assert d.histograms.itl_s.count_delta == 0.0
    assert d.histograms.itl_s.mean_s is None    # no requests in the window
    assert d.histograms.itl_s.p50_s is None


def test_sglang_normalised():
    sample = load("sglang_busy.txt")
    assert detect_engine(sample) == "sglang"
    m = normalise(sample)
    assert m.kv_cache_usage_frac == 0.28
    assert m.num_requests_running == 162.0
    assert m.num_requests_waiting == 2826.0
    assert m.num_preemptions_total == 3.0                 # the retraction counter, not the per-batch gauge
    assert m.prefix_cache_hits_total == 2000.0 and m.prefix_cache_queries_total == 8000.0
    assert m.spec_decode_mean_accept_length == 2.4
    assert m.kv_cache_capacity_tokens == 161721.0
    assert set(m.histograms) == {"ttft_s", "itl_s", "queue_time_s"}
    after = parse_metrics((FIX / "sglang_busy.txt").read_text()
                          .replace("cached_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 2000.0",
                                   "cached_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 2600.0")
                          .replace("prompt_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 8000.0",
                                   "prompt_tokens_total{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 10000.0"))
    d = window_delta(m, normalise(after), 2.0)
    assert d.prefix_cache_hit_rate == pytest.approx(0.3)
    assert d.prompt_tokens_per_s == pytest.approx(1000.0)


def test_tgi_normalised():
    sample = load("tgi_queueing.txt")
    assert detect_engine(sample) == "tgi"
    m = normalise(sample)
    assert m.num_requests_running == 24.0
    assert m.num_requests_waiting == 7.0
    assert m.prompt_tokens_total == 60000.0
    assert m.generation_tokens_total == 18000.0
    assert m.num_requests_finished_total == 120.0
    assert m.kv_cache_usage_frac is None                  # TGI does not export it
    assert "ttft_s" not in m.histograms
    assert m.histograms["queue_time_s"].count == 120.0


def test_unknown_text_gives_empty_metrics():
    sample = parse_metrics("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3.5\n")
    assert detect_engine(sample) is None
    m = normalise(sample)
    assert m == EngineMetrics(engine=None)


def test_bad_lines_are_skipped_and_counted():
    text = ("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
            "this is { not prometheus\n"
            "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 4.0\n")
    sample = parse_metrics(text)
    assert sample.num_bad_lines == 1
    m = normalise(sample)
    assert m.num_requests_running == 3.0 and m.num_requests_waiting == 4.0


def test_counter_reset_counts_from_zero_and_is_reported():
    after = normalise(load("vllm_v1_two_engines_before.txt"))
    before = dataclasses.replace(after, num_preemptions_total=1000.0)
    d = window_delta(before, after, 1.0)
    assert d.num_preemptions_delta == 5.0
    assert d.counter_resets == ("num_preemptions_total",)


def test_max_over_intermediate_scrapes():
    m = normalise(load("vllm_v1_two_engines_before.txt"))
    peak = dataclasses.replace(m, kv_cache_usage_frac=0.99, num_requests_waiting=40.0)
    d = window_delta(m, m, 3.0, seen=[peak])
    assert d.kv_cache_usage_frac == 0.52
    assert d.kv_cache_usage_frac_max == 0.99
    assert d.num_requests_waiting_max == 40.0
    assert d.num_scrapes == 3


def test_histogram_quantile_interpolates():
    buckets = ((0.1, 10.0), (0.2, 30.0), (math.inf, 30.0))
    assert histogram_quantile(buckets, 0.5) == pytest.approx(0.1 + 0.1 * 5 / 20)
    assert histogram_quantile(buckets, 0.1) == pytest.approx(0.03)   # first bucket starts at 0
    assert histogram_quantile(((0.1, 0.0), (math.inf, 0.0)), 0.5) is None
    assert histogram_quantile((), 0.5) is None


def test_histogram_delta_reset_uses_after():
    before = Histogram(((1.0, 10.0), (math.inf, 10.0)), 10.0, 5.0)
    after = Histogram(((1.0, 2.0), (math.inf, 2.0)), 2.0, 1.0)
    assert histogram_delta(before, after) == after
    assert histogram_delta(None, after) == after
    assert histogram_delta(after, None) is None


def test_real_capture_of_the_reference_engine():
    m = normalise(load("reference_engine_tiny_after_4_requests.txt"))
    assert m.engine == "vllm" and m.model_name == "tiny"
    assert set(m.histograms) == {"ttft_s", "itl_s", "e2e_s", "queue_time_s", "prefill_time_s", "decode_time_s"}
    assert m.histograms["ttft_s"].count == 4.0
    assert m.histograms["itl_s"].count == 20.0
    assert m.num_requests_finished_total == 4.0
    assert (m.prefix_cache_queries_total, m.prefix_cache_hits_total) == (392.0, 288.0)
    assert m.cache_config["num_gpu_blocks"] == 4096 and m.cache_config["num_gpu_blocks_override"] is None
    # Against an idle server that had seen nothing yet: the whole history is the window.
    idle = dataclasses.replace(m, prefix_cache_queries_total=0.0, prefix_cache_hits_total=0.0,
                               prompt_tokens_total=0.0, generation_tokens_total=0.0, histograms={})
    d = window_delta(idle, m, 4.0)
    assert d.prefix_cache_hit_rate == pytest.approx(288 / 392)
    assert d.generation_tokens_per_s == pytest.approx(24 / 4.0)
    assert d.histograms.e2e_s.count_delta == 4.0
    assert d.histograms.e2e_s.p50_s is not None
