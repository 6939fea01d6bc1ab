"""ENG001, non batching engine in production (rules/catalog/eng001_non_batching_engine_in_production.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    identity,
    level,
    metrics,
    snapshot,
)
from triage.core.probe_data import LlamaCppSlotsData

CODE = "ENG001"


def cases() -> list[Case]:
    flat = (level(1, output_tokens_per_s=126.0), level(2, output_tokens_per_s=131.0),
            level(3, output_tokens_per_s=133.0))
    tfs = (identity(engine="transformers"), identity("batching", continuous=False),
           cfg(engine=None, model="Qwen/Qwen3-0.6B"))
    slots = LlamaCppSlotsData(total_slots=1, busy_slots=1, ctx_per_slot_tokens=2048, build_info="b0-unknown")
    lcpp = (identity(engine="llama.cpp", version="b0-unknown", llamacpp=slots),
            cfg(engine=None, engine_version=None, model="tiny.gguf"))
    return [
        case("positive_flat_from_load_alone", "Throughput 120 -> 133 tok/s from c=1 to c=64, engine unknown",
             {**FIRES, "severity": "high", "certainty": "confirmed", "kind": "problem",
              "evidence_keys": ["derived.throughput_x", "derived.concurrency_x"]},
             snapshot(drop=("server_config", "server_metrics", "engine_identity", "server_process")), bench(*flat)),
        case("positive_transformers_serve_flat", "transformers serve, as tried live: 26.8 -> 24.3 tok/s at "
             "c=1 -> 4", {**FIRES, "severity": "high", "text_contains": ["transformers", "--continuous-batching"],
                          "commands": ["transformers serve Qwen/Qwen3-0.6B --continuous-batching"]},
             snapshot(*tfs, drop=("server_metrics",)),
             bench(level(0, output_tokens_per_s=26.8), level(1, output_tokens_per_s=24.3), concurrencies=(1, 4))),
        case("positive_llamacpp_one_slot_deferred", "llama-server --parallel 1 with requests deferred "
             "(the real capture under load)", {**FIRES, "severity": "medium", "kind": "problem",
                                               "evidence_keys": ["server_metrics.num_requests_waiting_max"],
                                               "commands": ["llama-server -m tiny.gguf --parallel 4 -c 8192"]},
             snapshot(*lcpp, metrics(num_requests_waiting_max=1, engine="llama.cpp"))),
        case("opportunity_llamacpp_one_slot_idle", "llama-server --parallel 1 at rest: an opportunity only",
             {**FIRES, "severity": "low", "kind": "opportunity", "text_contains": ["--parallel"]},
             snapshot(*lcpp, metrics(num_requests_waiting_max=0, engine="llama.cpp"))),
        case("negative_llamacpp_four_slots", "llama-server with 4 slots batches", PASSES,
             snapshot(*lcpp, identity("llamacpp", total_slots=4), metrics(num_requests_waiting_max=2))),
        case("positive_ollama_one_parallel_under_load", "Ollama with OLLAMA_NUM_PARALLEL=1, load-tested",
             {**FIRES, "severity": "high", "commands": ["OLLAMA_NUM_PARALLEL=16 ollama serve"]},
             snapshot(identity(engine="ollama"), identity("batching", slots=1), cfg(engine=None),
                      drop=("server_metrics",)), bench(*flat)),
        case("negative_vllm", "vLLM batches", PASSES, snapshot(), bench()),
        case("skipped_nothing_known", "No bench pair and no engine identified",
             {"fires": False, "skipped_reason": "needs engine_identity"},
             snapshot(drop=("server_config", "server_metrics", "engine_identity", "server_process"))),
    ]
