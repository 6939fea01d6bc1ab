"""BENCH002, request errors (rules/catalog/bench002_request_errors.py): its fixture cases."""
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
from triage.core.report import RequestCounts

CODE = "BENCH002"


def cases() -> list[Case]:
    return [
        case("positive_503s", "37 of 500 failed at c=64",
             {**FIRES, "severity": "high", "text_contains": ["429/503"]},
             snapshot(), bench(level(3, requests=RequestCounts(completed=463, failed=37,
                                                                 errors_by_kind={"http_503": 30, "timeout": 7})))),
        case("negative_half_percent", "2 of 512 failed (0.4%)", PASSES, snapshot(),
             bench(level(3, requests=RequestCounts(completed=510, failed=2, errors_by_kind={"timeout": 2})))),
    ]
