"""GPU011, bad cuda env (rules/catalog/gpu011_bad_cuda_env.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    process,
    snapshot,
)

CODE = "GPU011"


def cases() -> list[Case]:
    return [
        case("positive_launch_blocking", "CUDA_LAUNCH_BLOCKING=1 left in the service file",
             {**FIRES, "severity": "high", "commands": ["unset CUDA_LAUNCH_BLOCKING"]},
             snapshot(process(debug_env={"CUDA_LAUNCH_BLOCKING": "1"}))),
        case("positive_vllm_trace", "VLLM_TRACE_FUNCTION=1 and NCCL_DEBUG=INFO",
             {**FIRES, "severity": "high", "text_contains": ["traces every Python function call"]},
             snapshot(process(debug_env={"VLLM_TRACE_FUNCTION": "1", "NCCL_DEBUG": "INFO"}))),
        case("positive_profiler_injected", "An Nsight injection library and the legacy profiler left on",
             {**FIRES, "severity": "medium", "commands": ["unset CUDA_INJECTION64_PATH", "unset CUDA_PROFILE"]},
             snapshot(process(debug_env={"CUDA_INJECTION64_PATH": "/opt/nsight/libToolsInjection64.so",
                                                    "CUDA_PROFILE": "1", "OMP_NUM_THREADS": "8"}))),
        case("negative_harmless_vars", "NCCL_DEBUG=WARN and CUDA_VISIBLE_DEVICES are harmless",
             PASSES, snapshot(process(debug_env={"NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0"}))),
        case("negative_launch_blocking_zero", "CUDA_LAUNCH_BLOCKING=0 is harmless",
             PASSES, snapshot(process(debug_env={"CUDA_LAUNCH_BLOCKING": "0"}))),
    ]
