"""GPU009, foreign gpu process (rules/catalog/gpu009_foreign_gpu_process.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    snapshot,
)
from tests.rule_cases._healthy import GIB
from triage.core.probe_data import GpuProcess

CODE = "GPU009"


def cases() -> list[Case]:
    return [
        case("positive_foreign_job", "A notebook holds 9 GiB on the serving GPU",
             {**FIRES, "severity": "medium", "evidence_keys": ["gpu.gpus[0].compute_processes[1].pid"]},
             snapshot(gpu0(compute_processes=(GpuProcess(pid=1235, used_memory_bytes=60 * GIB,
                                                         name="VLLM::EngineCore"),
                                                  GpuProcess(pid=4242, used_memory_bytes=9 * GIB, name="python"),)))),
        case("negative_engine_child", "The engine core child process is the server's own",
             PASSES, snapshot()),
        case("skipped_pid_namespace", "Container PID namespace: NVML pids do not match the server's",
             {"fires": False, "skipped_reason": "namespace"},
             snapshot(gpu0(compute_processes=(GpuProcess(pid=88, used_memory_bytes=71 * GIB, name="python"),)))),
    ]
