"""SCHED006, ttft superlinear in context (rules/catalog/sched006_ttft_superlinear_in_context.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    level,
    snapshot,
)

CODE = "SCHED006"


def cases() -> list[Case]:
    ctx_sweep = (level(0, input_tokens_mean=2048.0), level(0, "ttft_ms", p50=180.0),
                 level(1, concurrency=1, input_tokens_mean=16384.0), level(1, "ttft_ms", p50=4900.0))
    return [
        case("positive_quadratic", "TTFT 180 ms at 2K, 4.9 s at 16K at batch 1 (exponent ~1.6)",
             {**FIRES, "evidence_keys": ["derived.ttft_growth_exponent"]},
             snapshot(cfg(engine_version="0.5.4")), bench(*ctx_sweep, concurrencies=(1, 4))),
        case("negative_linear", "TTFT 180 ms at 2K, 1.5 s at 16K (linear)",
             PASSES, snapshot(), bench(*ctx_sweep, level(1, "ttft_ms", p50=1500.0), concurrencies=(1, 4))),
        case("negative_small_model_at_32k", "8K -> 32K at batch 1 grows as len^1.6: the O(N^2) FLOPs of "
             "a FlashAttention prefill for a small model, not a missing flash kernel", PASSES, snapshot(),
             bench(level(0, input_tokens_mean=8192.0), level(0, "ttft_ms", p50=1000.0),
                   level(1, concurrency=1, input_tokens_mean=32768.0), level(1, "ttft_ms", p50=9100.0),
                   concurrencies=(1, 4))),
        case("skipped_no_sweep", "One prompt length only",
             {"fires": False, "skipped_reason": "context sweep"}, snapshot(), bench()),
    ]
