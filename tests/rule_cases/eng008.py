"""ENG008, compile repeated every start (rules/catalog/eng008_compile_repeated_every_start.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    logs,
    snapshot,
    storage,
)
from tests.rule_cases._healthy import startup_log

CODE = "ENG008"


def cases() -> list[Case]:
    return [
        case("positive_compile_recurs", "Two starts in the log, each compiling for ~41 s",
             {**FIRES, "certainty": "confirmed", "evidence_keys": ["logs.startup.compile_s_each_start"],
              "commands": ["export VLLM_CACHE_ROOT=/mnt/persistent/compile-cache"]},
             snapshot(logs(startup=startup_log(compile_s=(41.2, 40.8))))),
        case("positive_cache_ephemeral", "One 38 s compile with ~/.cache in the container layer",
             {**FIRES, "certainty": "likely", "evidence_keys": ["storage.hf_cache_persistent"]},
             snapshot(logs(startup=startup_log(compile_s=(38.0,))),
                      storage(hf_cache_fstype="overlay", hf_cache_persistent=False, hf_home_set=False))),
        case("negative_second_start_hits_the_cache", "41 s, then 6 s: the cache worked", PASSES,
             snapshot(logs(startup=startup_log(compile_s=(41.2, 6.0))))),
        case("negative_persistent_cache", "One 38 s compile on a persistent cache (the first ever)", PASSES,
             snapshot(logs(startup=startup_log(compile_s=(38.0,))))),
        case("skipped_no_start_in_log", "A log with no server start", {"fires": False, "skipped_reason": "start"},
             snapshot()),
    ]
