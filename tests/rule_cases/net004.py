"""NET004, slow connect under load (rules/catalog/net004_slow_connect_under_load.py): its fixture cases."""
from __future__ import annotations

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
from triage.core.bench_data import ConnectMs, LevelConnections

CODE = "NET004"


def conns(in_window_p50: float | None, opened: int) -> LevelConnections:
    """A level's connections: `opened` in its window, each connecting in `in_window_p50` ms."""
    stats = ConnectMs(p50=in_window_p50, p99=in_window_p50, max=in_window_p50)
    return LevelConnections(opened=opened, opened_warm=0, opened_in_window=opened, reused=0, retries=0,
                            connect_ms=stats, in_window_connect_ms=stats, warm_connect_ms=ConnectMs())


def cases() -> list[Case]:
    return [
        case("positive_syn_drops_under_load", "Idle connect 0.4 ms, 1 s at c=64 (SYNs dropped)",
             {**FIRES, "evidence_keys": ["bench.config.idle_connect_ms_p50",
                                         "bench.c64.connections.in_window_connect_ms.p50"], "text_contains": ["1003 ms"]},
             snapshot(), bench(run_config(idle_connect_ms_p50=0.4), level(3, connections=conns(1003.0, 12)),
                               level(0, connections=conns(0.5, 1)))),
        case("negative_fast_connects", "Connections under load as fast as idle", PASSES, snapshot(),
             bench(run_config(idle_connect_ms_p50=0.4), level(3, connections=conns(0.9, 12)))),
        case("skipped_old_report", "A report from before connect_ms",
             {"fires": False, "skipped_reason": "no idle connect time"}, snapshot(),
             # An old report has no idle_connect_ms_p50 and no connections: in the types, None (written as null).
             bench()),
    ]
