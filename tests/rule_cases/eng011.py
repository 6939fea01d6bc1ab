"""ENG011, one start dominated by capture (rules/catalog/eng011_start_dominated_by_capture.py): its fixture cases.
The figures are vLLM issues 16961 (11412 s of capture) and 16716 (65 s)."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case, logs, snapshot
from tests.rule_cases._healthy import startup_log

CODE = "ENG011"


def cases() -> list[Case]:
    return [
        case("positive_hours_of_capture", "11412 s of CUDA-graph capture in an 11630 s start",
             {**FIRES, "severity": "medium", "kind": "problem", "commands": ["--enforce-eager"],
              "evidence_keys": ["derived.capture_share_of_start"]},
             snapshot(logs(startup=startup_log(graphs_s=(11412.0,), load=(60.0, 16 * 2**30), ready_s=11630.0)))),
        case("opportunity_a_minute_of_capture", "65 s of capture in a 100 s start: an opportunity",
             {**FIRES, "severity": "low", "kind": "opportunity"},
             snapshot(logs(startup=startup_log(graphs_s=(65.0,), load=(20.0, 16 * 2**30), ready_s=100.0)))),
        case("negative_quick_capture", "17 s of capture and 7.5 s of compile in a 34 s start: below the floor",
             PASSES, snapshot(logs(startup=startup_log(compile_s=(7.5,), graphs_s=(17.0,), load=(1.0, 2**30),
                                                       ready_s=34.0)))),
        case("negative_load_dominates", "A 900 s start whose weight load took 800 s: not capture", PASSES,
             snapshot(logs(startup=startup_log(graphs_s=(40.0,), load=(800.0, 140 * 2**30), ready_s=900.0)))),
    ]
