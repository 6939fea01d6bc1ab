"""HIST001, latency jump against history (rules/catalog/hist001_latency_jump_against_history.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    put,
    snapshot,
)
from triage.core.probe_data import PromHistoryData

CODE = "HIST001"


BEFORE = {"ttft_p50_s": 0.30, "ttft_p90_s": 0.60, "ttft_p99_s": 0.95, "requests_per_s": 20.0,
          "prompt_tokens_per_s": 20000.0, "prompt_tokens_per_request": 1000.0, "kv_cache_usage_mean": 0.5,
          "requests_waiting_mean": 1.0, "preemptions_per_s": 0.0, "gpu_sm_clock_mhz_mean": 1980.0}


def history(now: dict[str, float], then: dict[str, float | None] | None = None) -> PromHistoryData:
    """The user's Prometheus over the last hour (`now`: changes from BEFORE) and a week earlier (`then`).
    now/then are signal -> value dicts in the type too (probes/history_queries.py names the signals)."""
    return PromHistoryData(url="http://prometheus:9090", engine="vllm", window_s=3600.0, against_s=7 * 86400.0,
                           at_epoch_s=1795000000.0, now={**BEFORE, **now}, then=BEFORE if then is None else then)


def cases() -> list[Case]:
    return [
        case("positive_server_side", "TTFT p99 0.95 -> 1.9 s at the same traffic, SM clock down 30%",
             {**FIRES, "severity": "high", "text_contains": ["traffic did not grow", "the server or the hardware changed", "GPU SM clock -30%"],
              "evidence_keys": ["derived.latency_rise_x", "prometheus_history.now.gpu_sm_clock_mhz_mean"]},
             snapshot(put("prometheus_history",
                          history({"ttft_p99_s": 1.9, "requests_per_s": 20.5, "gpu_sm_clock_mhz_mean": 1386.0})))),
        case("positive_traffic", "TTFT p99 0.95 -> 1.9 s with prompts twice as long: traffic",
             {**FIRES, "severity": "medium", "text_contains": ["traffic grew", "prompt tokens per request +100%", "Capacity, not a regression"]},
             snapshot(put("prometheus_history",
                          history({"ttft_p99_s": 1.9, "prompt_tokens_per_request": 2000.0, "prompt_tokens_per_s": 40000.0})))),
        case("negative_noise", "TTFT p99 +5% week over week", PASSES,
             snapshot(put("prometheus_history", history({"ttft_p99_s": 1.0})))),
        case("skipped_no_history_then", "Prometheus keeps less than a week",
             {"fires": False, "skipped_reason": "comparison window"},
             snapshot(put("prometheus_history", history({}, then={"ttft_p99_s": None})))),
    ]
