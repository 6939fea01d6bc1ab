"""The `diagnose --active` measurements of the healthy host (rules/catalog/gpu014, gpu015, mem003 and
_active_shared.py, and GPU004/GPU010 confirmed by measurement): one H100 SXM on a Gen5 x16 slot in a
two-socket host, as typed payloads, and the edits that change them."""
from __future__ import annotations

from typing import Any

from tests.rule_cases._build import Edit, edit, snapshot
from tests.rule_cases._healthy import GIB, MIB, healthy_probes
from triage.core.probe_data import (
    AllreduceData,
    AllreduceRun,
    HbmData,
    HbmGpu,
    HostMemoryData,
    MatmulData,
    MatmulGpu,
    NodeBandwidth,
    Payload,
    PcieData,
    PcieGpu,
)
from triage.core.snapshot import Snapshot

DEVICE: dict[str, Any] = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GIB,
                          "compute_capability": (9, 0), "pci_bus_id": "00000000:3b:00.0"}


def healthy_active() -> dict[str, Payload]:
    """probe name -> payload of each active measurement on the healthy host."""
    return {
        "host_memory": HostMemoryData(
            copy_bandwidth_gbps=310.0, read_bandwidth_gbps=340.0, buffer_bytes=2 * GIB, llc_bytes=210 * MIB,
            num_threads=112, num_numa_nodes=2, unsupported_fields=(),
            nodes=(NodeBandwidth(node=0, num_threads=56, copy_bandwidth_gbps=158.0, read_bandwidth_gbps=170.0),
                   NodeBandwidth(node=1, num_threads=56, copy_bandwidth_gbps=152.0, read_bandwidth_gbps=166.0))),
        "pcie": PcieData(gpus=(PcieGpu(
            **DEVICE, buffer_bytes=256 * MIB, h2d_pinned_gbps=53.6, d2h_pinned_gbps=54.1, h2d_pageable_gbps=21.0,
            d2h_pageable_gbps=17.5, pcie_link_gen_under_load=5, pcie_link_width_under_load=16, pcie_link_gen_max=5,
            pcie_link_gen_gpu_max=5, pcie_link_width_max=16, link_theoretical_gbps=63.02, h2d_pinned_share=0.851,
            d2h_pinned_share=0.858, unsupported_fields=()),)),
        "hbm": HbmData(gpus=(HbmGpu(**DEVICE, buffer_bytes=GIB, copy_bandwidth_gbps=2905.0, spec_bandwidth_gbps=3350.0,
                                    spec_key="h100-sxm", share_of_spec=0.867, unsupported_fields=()),)),
        "matmul": MatmulData(gpus=(MatmulGpu(**DEVICE, n=8192, spec_key="h100-sxm", bf16_tflops=720.0, fp8_tflops=1310.0,
                                             bf16_spec_tflops=989.4, fp8_spec_tflops=1978.9, bf16_share_of_spec=0.728,
                                             fp8_share_of_spec=0.662, unsupported_fields=()),)),
        "allreduce": AllreduceData(
            gloo=AllreduceRun(backend="gloo", world_size=2, size_bytes=32 * MIB, busbw_gbps=4.1, algbw_gbps=4.1),
            nccl=None, nccl_reason="1 GPU visible: an all-reduce needs two or more", num_gpus=1,
            unsupported_fields=("nccl",)),
    }


def active_snapshot(*edits: Edit) -> Snapshot:
    """The healthy snapshot with the active measurements after the passive probes, `edits` applied to either."""
    return snapshot(*edits, base={**healthy_probes(), **healthy_active()})


def pcie0(**changes: Any) -> Edit:
    return edit("pcie", "gpus[0]", **changes)


def hbm0(**changes: Any) -> Edit:
    return edit("hbm", "gpus[0]", **changes)


def matmul0(**changes: Any) -> Edit:
    return edit("matmul", "gpus[0]", **changes)


def host_memory(path: str = "", /, **changes: Any) -> Edit:
    return edit("host_memory", path, **changes)


def allreduce(path: str = "", /, **changes: Any) -> Edit:
    return edit("allreduce", path, **changes)
