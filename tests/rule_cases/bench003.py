"""BENCH003, slo missed (rules/catalog/bench003_slo_missed.py): its fixture cases."""
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
from triage.core.bench_data import Slo

CODE = "BENCH003"


def cases() -> list[Case]:
    return [
        case("positive_ttft_missed", "Chat defaults: c=64 TTFT p99 2.4 s",
             {**FIRES, "evidence_keys": ["bench.c64.ttft_ms.p99"], "text_contains": ["bench.c16"]},
             snapshot(), bench(level(3, "ttft_ms", p99=2400.0))),
        case("positive_user_slo", "User SLO ttft_ms=100 is missed from c=16",
             {**FIRES, "evidence_keys": ["slo.ttft_ms", "bench.c16.ttft_ms.p99"]},
             snapshot(), bench(run_config(slo=Slo(ttft_ms=100)))),
        case("negative_within_slo", "All levels within the chat defaults", PASSES, snapshot(), bench()),
        case("skipped_completions_no_slo", "Completions endpoint, no SLO",
             {"fires": False, "skipped_reason": "no SLO"}, snapshot(), bench(run_config(endpoint="completions"))),
    ]
