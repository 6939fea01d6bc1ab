"""ENG012, partial GPU offload (rules/catalog/eng012_partial_gpu_offload.py): its fixture cases. The figures
are Ollama issues 3301 (30 of 81 layers), 9181 (44 of 81; 127.4 GiB needed, 4 x 22 GiB available) and 11039."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case, logs, snapshot

CODE = "ENG012"
GIB = 2**30


def cases() -> list[Case]:
    return [
        case("positive_30_of_81", "llama.cpp put 30 of 81 layers on the one CUDA device it found",
             {**FIRES, "severity": "high", "evidence_keys": ["logs.gpu_layers_offloaded", "logs.gpu_devices"]},
             snapshot(logs(engine="llama.cpp", gpu_layers_offloaded=30, gpu_layers_total=81, gpu_devices=1))),
        case("positive_does_not_fit", "Ollama: all layers with this context need 127.4 GiB, the GPUs offer 88",
             {**FIRES, "text_contains": ["smaller context", "short"]},
             snapshot(logs(engine="ollama", gpu_layers_offloaded=44, gpu_layers_total=81,
                           offload_available_bytes=88 * GIB, offload_required_bytes=127.4 * GIB,
                           offload_kv_bytes=19.5 * GIB))),
        case("positive_memory_to_spare", "Ollama kept layers on the CPU although the memory is there",
             {**FIRES, "text_contains": ["-ngl all"]},
             snapshot(logs(engine="ollama", gpu_layers_offloaded=30, gpu_layers_total=37,
                           offload_available_bytes=6.8 * GIB, offload_required_bytes=4.9 * GIB))),
        case("negative_all_on_gpu", "41 of 41 layers on the GPU", PASSES,
             snapshot(logs(engine="ollama", gpu_layers_offloaded=41, gpu_layers_total=41))),
        case("negative_cpu_only_build", "0 of 33 layers and no GPU backend: a CPU deployment", PASSES,
             snapshot(logs(engine="llama.cpp", gpu_layers_offloaded=0, gpu_layers_total=33))),
    ]
