"""ENG009, warmup out of proportion (rules/catalog/eng009_warmup_out_of_proportion.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    logs,
    snapshot,
)
from tests.rule_cases._healthy import startup_log

CODE = "ENG009"


def cases() -> list[Case]:
    return [
        case("positive_short_lived_replicas", "Replicas restart every ~3.6 min; each spends 59 s compiling and "
             "capturing (27%)", {**FIRES, "severity": "medium", "kind": "problem", "commands": ["--enforce-eager"],
                                 "evidence_keys": ["logs.startup.start_gaps_s", "derived.warmup_share_of_life"]},
             snapshot(logs(startup=startup_log(compile_s=(41.0, 40.2, 41.0), graphs_s=(18.0, 17.5, 18.0),
                                                   gaps_s=(220.0, 215.0))))),
        case("opportunity_seven_minute_replicas", "Replicas live ~7 min: 14% warming up, an opportunity",
             {**FIRES, "severity": "low", "kind": "opportunity"},
             snapshot(logs(startup=startup_log(compile_s=(41.0, 40.2), graphs_s=(18.0, 17.5), gaps_s=(410.0,))))),
        case("negative_long_lived", "Replicas restart every 10 h: the warm-up is noise", PASSES,
             snapshot(logs(startup=startup_log(compile_s=(41.0, 40.2), graphs_s=(18.0, 17.5), gaps_s=(36000.0,))))),
        case("skipped_one_start", "One start: how long a replica lives is unknown",
             {"fires": False, "skipped_reason": "one start"},
             snapshot(logs(startup=startup_log(compile_s=(41.0,), graphs_s=(18.0,))))),
    ]
