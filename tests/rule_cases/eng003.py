"""ENG003, spec decode low acceptance (rules/catalog/eng003_spec_decode_low_acceptance.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    metrics,
    snapshot,
)

CODE = "ENG003"


def cases() -> list[Case]:
    # speculative_config is vLLM's own JSON object (or SGLang/TGI's method name): Any in the type.
    spec = cfg(speculative_config={"method": "eagle", "num_speculative_tokens": 5})
    return [
        case("positive_low_acceptance", "31% acceptance with 5 speculative tokens",
             {**FIRES, "commands": ["--speculative-config '{\"method\": \"eagle\", \"num_speculative_tokens\": 2}'"]},
             snapshot(spec, metrics(spec_decode_acceptance_rate=0.31))),
        case("negative_good_acceptance", "78% acceptance",
             PASSES, snapshot(spec, metrics(spec_decode_acceptance_rate=0.78))),
        case("skipped_not_configured", "No speculative decoding",
             {"fires": False, "skipped_reason": "not configured"}, snapshot()),
    ]
