"""FLEET001, replica imbalance (rules/catalog/fleet001_replica_imbalance.py): its fixture cases."""
from __future__ import annotations

import dataclasses

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    level,
    run_config,
    snapshot,
)
from triage.core.bench_data import LevelServer, Replica, ReplicaLatency

CODE = "FLEET001"


def replica(i: int, ttft_p99: float, waiting: float, kv: float, blocks: int) -> Replica:
    """Replica `i`'s share of the c=64 level: 256 requests, its TTFT, its server's queue and KV use."""
    return Replica(replica=i, url=f"http://10.0.0.{i + 1}:8000", requests=256, failed=0,
                   ttft_ms=ReplicaLatency(p50=ttft_p99 / 3, p99=ttft_p99, mean=ttft_p99 / 2.5),
                   tpot_ms=ReplicaLatency(p50=20.0, p99=30.0), e2e_ms=ReplicaLatency(p99=4000.0),
                   output_tokens_per_s=900.0, slo_attainment_pct=None,
                   server=LevelServer(num_requests_waiting_mean=waiting, kv_cache_usage_frac_max=kv),
                   # vLLM's cache_config_info labels: an engine's own shape, a plain dict in the type too.
                   cache_config={"num_gpu_blocks": blocks, "block_size": 16, "gpu_memory_utilization": 0.92})


def cases() -> list[Case]:
    return [
        case("positive_undersized_replica", "Replica 1 started with a 12-block KV cache: TTFT p99 490 ms vs "
             "11 ms, 4 waiting", {**FIRES, "certainty": "confirmed", "text_contains": ["num_gpu_blocks 12 vs 4096",
                                                                                        "round robin"]},
             snapshot(), bench(run_config(balance="round-robin"),
                               level(3,
                                     replicas=(replica(0, 11.0, 0.0, 0.2, 4096), replica(1, 490.0, 4.3, 0.97, 12))))),
        case("positive_same_flags_slow_hardware", "Same flags, least-in-flight, one replica 3x slower",
             {**FIRES, "certainty": "likely", "text_contains": ["hardware may be slower"]},
             snapshot(), bench(run_config(balance="least-in-flight"), level(3, replicas=(replica(0, 200.0, 1.0, 0.5,
                                                                                                 4096), replica(1,
                                                                                                                650.0,
                                                                                                                1.5,
                                                                                                                0.55,
                                                                                                                4096),
                                                      replica(2, 210.0, 1.0, 0.5, 4096))))),
        case("positive_replica_down", "Replica 1 refuses every connection: 64 of 64 failed",
             {**FIRES, "text_contains": ["64 of its 64 requests failed", "take it out of the balancer"]},
             snapshot(), bench(level(3, replicas=(replica(0, 200.0, 1.0, 0.5, 4096),
                                                      dataclasses.replace(replica(1, 0.0, 0.0, 0.0, 4096), requests=64, failed=64,
                                                                          ttft_ms=ReplicaLatency(), server=None,
                                                                          cache_config=None))))),
        case("negative_balanced", "Three replicas within 20% of each other", PASSES,
             snapshot(), bench(level(3, replicas=(replica(0, 200.0, 1.0, 0.5, 4096), replica(1, 240.0, 1.2, 0.55,
                                                                                             4096),
                                                      replica(2, 210.0, 1.0, 0.5, 4096))))),
        case("skipped_one_replica", "A bench against one server", {"fires": False, "skipped_reason": "one replica"},
             snapshot(), bench()),
    ]
