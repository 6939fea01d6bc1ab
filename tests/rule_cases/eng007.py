"""ENG007, multi gpu communication stalls (rules/catalog/eng007_multi_gpu_communication_stalls.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    logs,
    snapshot,
)

CODE = "ENG007"


def cases() -> list[Case]:
    return [
        case("positive_shm_stalls", "vLLM TP=2 log: 14 shared-memory broadcast stalls",
             {**FIRES, "severity": "medium", "evidence_keys": ["logs.num_shm_broadcast_stalls"]},
             snapshot(logs(num_shm_broadcast_stalls=14))),
        case("positive_nccl", "NCCL errors in the log", {**FIRES, "severity": "high"},
             snapshot(logs(num_nccl_errors=3))),
        case("positive_stalls_nccl_not_counted", "Stalls counted, NCCL lines not: no '0 NCCL errors' claim",
             {**FIRES, "severity": "medium", "text_contains": ["The server log has 5 shared-memory broadcast stall"]},
             snapshot(logs(num_shm_broadcast_stalls=5, num_nccl_errors=None))),
        case("negative_startup_only", "14 shm broadcast warnings, all while vLLM compiled at startup",
             PASSES, snapshot(logs(num_shm_broadcast_stalls=14, num_shm_broadcast_stalls_startup=14))),
        case("negative_clean_log", "No communication trouble", PASSES, snapshot()),
    ]
