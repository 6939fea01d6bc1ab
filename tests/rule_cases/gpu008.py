"""GPU008, gpu underutilized under load (rules/catalog/gpu008_gpu_underutilized_under_load.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    level,
    snapshot,
)

CODE = "GPU008"


def cases() -> list[Case]:
    return [
        case("positive_bench_low_util", "16 in flight, GPU at 25%, one request running at a time",
             {**FIRES, "evidence_keys": ["bench.c16.gpu.utilization_gpu_pct_mean"]},
             snapshot(), bench(level(2, "gpu", utilization_gpu_pct_mean=25.0),
                               level(2, "server", num_requests_running_mean=1.0),
                               level(3, "gpu", utilization_gpu_pct_mean=27.0))),
        case("positive_capped_batch", "max_num_seqs=4 caps the batch under 16 in flight",
             {**FIRES, "commands": ["--max-num-seqs 256"]},
             snapshot(cfg(max_num_seqs=4)),
             bench(level(2, "gpu", utilization_gpu_pct_mean=30.0), level(2, "server", num_requests_running_max=4))),
        case("negative_busy_under_load", "Healthy bench: 55-96% under load", PASSES, snapshot(), bench()),
        case("negative_low_util_low_load", "Low util at concurrency 1 is expected",
             PASSES, snapshot(), bench(level(0, "gpu", utilization_gpu_pct_mean=10.0))),
    ]
