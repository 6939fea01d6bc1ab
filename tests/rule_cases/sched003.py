"""SCHED003, queueing dominates ttft (rules/catalog/sched003_queueing_dominates_ttft.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    level,
    levels,
    snapshot,
)

CODE = "SCHED003"


def cases() -> list[Case]:
    return [
        case("positive_queue_share", "Queue time is 81% of server TTFT at c=64",
             {**FIRES, "evidence_keys": ["bench.c64.server.server_queue_time_ms_mean"]},
             snapshot(), bench(level(3, "server", server_queue_time_ms_mean=820.0, server_ttft_ms_mean=1010.0))),
        case("positive_linear_ttft", "TTFT grows 7x from c=16 to c=64 while TPOT stays flat (no server metrics)",
             {**FIRES, "evidence_keys": ["derived.ttft_growth_x", "bench.c64.ttft_ms.p50"]},
             snapshot(drop=("server_metrics",)),
             bench(levels(server=None), level(3, "ttft_ms", p50=456.0), level(3, "tpot_ms", p50=10.5))),
        case("positive_one_at_a_time_server", "TTFT grows 24x from c=1 to c=4 on a server whose throughput "
             "is flat (transformers serve, live): batching is the first fix, not replicas",
             {**FIRES, "text_contains": ["ENG001"]}, snapshot(drop=("server_metrics",)),
             bench(level(0, output_tokens_per_s=271.0), level(1, output_tokens_per_s=314.0),
                   level(0, "ttft_ms", p50=12.3), level(1, "ttft_ms", p50=290.5), level(0, "tpot_ms", p50=3.4),
                   level(1, "tpot_ms", p50=3.0), concurrencies=(1, 4))),
        case("negative_tiny_queue", "Queue 3.6 of 5.9 ms server TTFT (a real reference-engine run): too "
             "small to matter next to a 40 ms client TTFT", PASSES, snapshot(),
             bench(level(1, "server", server_queue_time_ms_mean=3.63, server_ttft_ms_mean=5.89))),
        case("negative_compute_bound", "TTFT and TPOT grow together: compute, not queueing",
             PASSES, snapshot(), bench()),
    ]
