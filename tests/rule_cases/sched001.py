"""SCHED001, chunked prefill off (rules/catalog/sched001_chunked_prefill_off.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    level,
    levels,
    snapshot,
)

CODE = "SCHED001"


def cases() -> list[Case]:
    return [
        case("positive_disabled_v0", "vLLM 0.6 without chunked prefill",
             {**FIRES, "commands": ["--enable-chunked-prefill"]},
             snapshot(cfg(engine_version="0.6.3", enable_chunked_prefill=False),
                      cfg("sources", enable_chunked_prefill="cmdline"))),
        case("positive_spikes_on_v1", "vLLM 0.18 (chunked prefill on): TPOT p99 6x p50 with 8K prompts",
             {**FIRES, "commands": ["--max-num-batched-tokens 2048"], "text_contains": ["already on"]},
             snapshot(), bench(levels(input_tokens_mean=8192.0), level(2, "tpot_ms", p99=60.0))),
        case("negative_v1_default", "vLLM 0.18 default: the source says 'default', which is on in V1",
             {"fires": False, "skipped_reason": "needs a bench"},
             snapshot(cfg(enable_chunked_prefill=None))),
        case("negative_smooth_long_prompts", "Long prompts, smooth TPOT",
             PASSES, snapshot(), bench(levels(input_tokens_mean=8192.0))),
    ]
