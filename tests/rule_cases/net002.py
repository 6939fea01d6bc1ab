"""NET002, model redownloaded on start (rules/catalog/net002_model_redownloaded_on_start.py): its fixture cases."""
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

CODE = "NET002"


def cases() -> list[Case]:
    return [
        case("positive_ephemeral_cache", "Hub model with HF cache in the container layer",
             {**FIRES, "evidence_keys": ["storage.hf_cache_persistent"]},
             snapshot(storage(hf_cache_fstype="overlay", hf_cache_persistent=False))),
        case("negative_persistent", "Persistent, warm cache", PASSES, snapshot()),
        case("negative_local_path", "A local model path never downloads", PASSES,
             snapshot(storage(serves_hub_model_id=False, hf_cache_persistent=False))),
        case("positive_download_in_log", "vLLM logged 508 s downloading the weights at start",
             {**FIRES, "certainty": "confirmed", "evidence_keys": ["logs.weights_download_s"]},
             snapshot(logs(weights_download_s=508.6))),
        case("negative_empty_cache_is_not_evidence", "An empty cache on a persistent disk (someone "
             "else's, or not yet used) is no evidence of a download on every start", PASSES,
             snapshot(storage(hf_cache_empty=True, hf_cache_persistent=True))),
        case("positive_download_every_start", "Two starts in the log, each downloading the weights (the "
             "start-up timeline)", {**FIRES, "certainty": "confirmed",
                                    "evidence_keys": ["logs.startup.download_s_each_start", "logs.startup.ready_s"],
                                    "commands": ["--download-dir /mnt/persistent/hf"]},
             snapshot(logs(startup=startup_log(download_s=(92.5, 88.0), ready_s=160.0)))),
        case("negative_timeline_without_download", "A start-up timeline with no download phase", PASSES,
             snapshot(logs(startup=startup_log(compile_s=(25.0,))))),
    ]
