"""BENCH001, client bottleneck (rules/catalog/bench001_client_bottleneck.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    level,
    snapshot,
)
from triage.core.report import ClientStats

CODE = "BENCH001"


def cases() -> list[Case]:
    return [
        case("positive_client_lag", "c=64: achieved 41.5, loop lag 38 ms, marked invalid",
             {**FIRES, "evidence_keys": ["bench.c64.client.achieved_concurrency", "bench.c64.client.event_loop_lag_ms_p99"]},
             snapshot(), bench(level(3, client=ClientStats(cpu_pct=97.0, event_loop_lag_ms_p99=38.0, achieved_concurrency=41.5,
                                                               valid=False, invalid_reason="client event loop lagged")))),
        case("negative_client_fine", "Client kept up", PASSES, snapshot(), bench()),
    ]
