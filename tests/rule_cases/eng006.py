"""ENG006, long uptime degradation (rules/catalog/eng006_long_uptime_degradation.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    bench_report,
    case,
    level,
    metrics,
    process,
    snapshot,
)

CODE = "ENG006"


def cases() -> list[Case]:
    base_report = bench_report(bench(level(2, output_tokens_per_s=1500.0)))
    return [
        case("positive_degraded", "c=16 fell 1500 -> 1050 tok/s with 55 preemptions after 5 days up",
             {**FIRES, "certainty": "likely", "evidence_keys": ["derived.throughput_drop_frac"]},
             snapshot(process(uptime_s=5 * 86400)),
             bench(level(2, output_tokens_per_s=1050.0), level(2, "server", num_preemptions_delta=55)),
             baseline=base_report),
        case("positive_kv_stuck_at_idle", "Slower with preemptions, and 30% of the KV cache still held with "
             "nothing running: a leak; a restart is called a workaround",
             {**FIRES, "evidence_keys": ["server_metrics.kv_cache_usage_frac"],
              "text_contains": ["a leak", "workaround until then, not a fix"]},
             snapshot(process(uptime_s=5 * 86400),
                      metrics(kv_cache_usage_frac=0.30, num_requests_running_max=0, num_requests_waiting_max=0)),
             bench(level(2, output_tokens_per_s=1050.0), level(2, "server", num_preemptions_delta=55)),
             baseline=base_report),
        case("negative_same_speed", "Same throughput as last week", PASSES, snapshot(), bench(),
             baseline=base_report),
        case("negative_drop_without_preemptions", "Slower, but no preemptions: another cause",
             PASSES, snapshot(), bench(level(2, output_tokens_per_s=1050.0)), baseline=base_report),
    ]
