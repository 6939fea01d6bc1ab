"""ENG004, tensor parallel oversized (rules/catalog/eng004_tensor_parallel_oversized.py): its fixture cases."""
from __future__ import annotations

import dataclasses

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    gpu,
    logs,
    metrics,
    process,
    snapshot,
)
from tests.rule_cases._healthy import GIB, healthy_gpu0
from triage.core.probe_data import GpuProcess, ProcessInfo

CODE = "ENG004"


def cases() -> list[Case]:
    gpus = tuple(dataclasses.replace(healthy_gpu0(), index=i, compute_processes=(
        GpuProcess(pid=1235 + i, used_memory_bytes=70 * GIB, name="w"),)) for i in range(4))
    workers = tuple(ProcessInfo(pid=1234 + i, name="w", cpu_pct=50.0, num_threads=8, rss_bytes=GIB) for i in range(5))
    tp4 = (gpu(gpus=gpus), process(processes=workers), cfg(tensor_parallel_size=4), metrics(kv_cache_usage_frac_max=0.1),
           logs(kv_cache_tokens=1_400_000))
    return [
        case("positive_tp4_for_8b", "An 8B model at TP=4 peaking at 10% KV",
             {**FIRES, "commands": ["--tensor-parallel-size 1"]}, snapshot(*tp4), config={"model_weight_bytes": 16e9}),
        case("negative_tp4_needed", "A 140 GB model at TP=4 using 85% of its KV",
             PASSES, snapshot(*tp4, metrics(kv_cache_usage_frac_max=0.85), logs(kv_cache_tokens=300_000)),
             config={"model_weight_bytes": 140e9}),
    ]
