"""GPU001, vram spillover (rules/catalog/gpu001_vram_spillover.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    process,
    snapshot,
)
from tests.rule_cases._healthy import GIB

CODE = "GPU001"


def cases() -> list[Case]:
    return [
        case("positive_offload_rss_growth", "VRAM 99% full, server RSS grew 6 GiB, a thread pegged while GPU starves",
             {**FIRES, "severity": "high", "certainty": "likely",
              "evidence_keys": ["gpu.gpus[0].memory_used_frac", "server_process.rss_growth_bytes"],
              "commands": ["--quantization fp8"]},
             snapshot(gpu0(memory_used_bytes=int(79.5 * GIB), utilization_gpu_pct=12.0),
                      process(rss_bytes_end=14 * GIB, max_thread_cpu_pct=100.0))),
        case("positive_cpu_offload_flag", "Explicit --cpu-offload-gb on an A100 with full VRAM",
             {**FIRES, "certainty": "confirmed", "commands": ["triage plan"]},
             snapshot(gpu0(memory_used_bytes=int(79.8 * GIB), compute_capability=(8, 0),
                           name="NVIDIA A100-SXM4-80GB"),
                      process(cmdline=("vllm", "serve", "m", "--cpu-offload-gb", "20")))),
        case("negative_full_but_preallocated", "VRAM 97% used by vLLM's preallocated KV pool, no offload signs",
             PASSES, snapshot(gpu0(memory_used_bytes=int(77.6 * GIB)))),
        case("negative_vram_has_room", "VRAM 90% used", PASSES, snapshot()),
    ]
