"""CPU004, slow tokenizer (rules/catalog/cpu004_slow_tokenizer.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    logs,
    snapshot,
)

CODE = "CPU004"


def cases() -> list[Case]:
    return [
        case("positive_slow_tokenizer", "Log says 'Using a slow tokenizer'",
             {**FIRES, "certainty": "confirmed"}, snapshot(logs(slow_tokenizer=True))),
        case("negative_fast_tokenizer", "Fast tokenizer", PASSES, snapshot()),
        case("skipped_no_log", "No --log given", {"fires": False, "skipped_reason": "logs"},
             snapshot(drop=("logs",))),
    ]
