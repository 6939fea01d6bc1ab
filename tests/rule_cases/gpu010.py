"""GPU010, tp without nvlink (rules/catalog/gpu010_tp_without_nvlink.py): its fixture cases."""
from __future__ import annotations

import dataclasses

from tests.rule_cases._active import active_snapshot, allreduce
from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    Edit,
    case,
    cfg,
    gpu,
    process,
    snapshot,
)
from tests.rule_cases._healthy import GIB, MIB, healthy_gpu0
from triage.core.probe_data import AllreduceRun, GpuPair, GpuProcess, ProcessInfo

CODE = "GPU010"


def pair(common_ancestor: str, nvlink: bool) -> Edit:
    """GPUs 0 and 1 joined at `common_ancestor`, with or without an NVLink between them."""
    return gpu(topology=(GpuPair(gpu_a=0, gpu_b=1, common_ancestor=common_ancestor, nvlink=nvlink),))


def cases() -> list[Case]:
    gpu1 = dataclasses.replace(healthy_gpu0(), index=1, uuid="GPU-2222",
                               compute_processes=(GpuProcess(pid=1236, used_memory_bytes=71 * GIB,
                                                             name="VLLM::Worker"),))
    two_gpus = (gpu(gpus=(healthy_gpu0(), gpu1)),
                process(processes=(ProcessInfo(pid=1234, name="vllm", cpu_pct=40.0, num_threads=64, rss_bytes=GIB),
                                   ProcessInfo(pid=1235, name="w0", cpu_pct=60.0, num_threads=8, rss_bytes=GIB),
                                   ProcessInfo(pid=1236, name="w1", cpu_pct=60.0, num_threads=8, rss_bytes=GIB))),
                cfg(tensor_parallel_size=2))
    return [
        case("positive_tp2_over_system", "TP=2 across sockets, no NVLink",
             {**FIRES, "severity": "high", "commands": ["nvidia-smi topo -m"]},
             snapshot(*two_gpus, pair("system", False))),
        case("negative_tp2_nvlink", "TP=2 over NVLink",
             PASSES, snapshot(*two_gpus, pair("system", True))),
        case("negative_tp1", "No tensor parallelism", PASSES, snapshot()),
        *measured(),
    ]


def measured() -> list[Case]:
    """By measurement (`diagnose --active`): the NCCL all-reduce's bus bandwidth."""
    two = (gpu(gpus=tuple(dataclasses.replace(healthy_gpu0(), index=i, uuid=f"GPU-{i}") for i in (0, 1))),
           cfg(tensor_parallel_size=2))
    nccl = (allreduce(nccl=AllreduceRun(backend="nccl", world_size=2, size_bytes=256 * MIB, algbw_gbps=21.0,
                                        busbw_gbps=21.0), num_gpus=2),)
    return [
        case("positive_nvlink_unused", "TP=2 on NVLink-connected H100s, but NCCL all-reduce measures 21 GB/s "
             "bus bandwidth (5% of NVLink)",
             {**FIRES, "certainty": "confirmed", "text_contains": ["NVLink is there, but the traffic does not use it"],
              "evidence_keys": ["allreduce.nccl.busbw_gbps", "derived.allreduce_busbw_frac"]},
             active_snapshot(*nccl, *two, pair("nvlink", True))),
        case("positive_pcie_confirmed_by_measurement", "TP=2 across sockets without NVLink; the measured "
             "all-reduce confirms it",
             {**FIRES, "certainty": "confirmed", "evidence_keys": ["gpu.topology[0,1].common_ancestor",
                                                                   "allreduce.nccl.busbw_gbps"],
              "text_contains": ["Measured: NCCL all-reduce moves 21.0 GB/s"]},
             active_snapshot(*nccl, *two, pair("system", False))),
        case("negative_nvlink_measured_fast", "TP=2 on NVLink; all-reduce measures 370 GB/s (82% of NVLink)",
             PASSES, active_snapshot(*nccl, allreduce("nccl", busbw_gbps=370.0), *two, pair("nvlink", True))),
    ]
