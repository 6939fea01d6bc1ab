"""The `diagnose --active` probes (probes/active/): host memory, PCIe, GPU memory, matmul and all-reduce
bandwidth, measured by loading the host and its GPUs. Each probe builds its payload strictly from what it
measured, so a renamed field fails where it is written as well as where a rule reads it."""
from __future__ import annotations

from triage.core.probe_data.base import Payload, payload


@payload
class NodeBandwidth:
    """One NUMA node measured alone, its threads on its own CPUs."""

    node: int | None = None
    num_threads: int | None = None
    buffer_bytes: int | None = None
    num_repeats: int | None = None
    copy_bandwidth_gbps: float | None = None
    copy_bandwidth_gbps_median: float | None = None
    read_bandwidth_gbps: float | None = None
    read_bandwidth_gbps_median: float | None = None


@payload
class HostMemoryData(Payload):
    PROBE = "host_memory"

    copy_bandwidth_gbps: float | None = None
    copy_bandwidth_gbps_median: float | None = None
    read_bandwidth_gbps: float | None = None
    read_bandwidth_gbps_median: float | None = None
    buffer_bytes: int | None = None
    llc_bytes: int | None = None
    num_threads: int | None = None
    num_numa_nodes: int | None = None
    nodes: tuple[NodeBandwidth, ...] = ()
    method: str | None = None
    notes: tuple[str, ...] = ()
    unsupported_fields: tuple[str, ...] = ()


@payload
class CudaDevice:
    """What every GPU row starts with (probes/active/cuda.py device_info), or the error that stopped it."""

    index: int | None = None
    name: str | None = None
    memory_total_bytes: int | None = None
    compute_capability: tuple[int, ...] | None = None
    pci_bus_id: str | None = None
    error: str | None = None
    unsupported_fields: tuple[str, ...] = ()


@payload
class PcieGpu(CudaDevice):
    buffer_bytes: int | None = None
    pinned_reason: str | None = None                 # why host memory could not be pinned
    h2d_pinned_gbps: float | None = None             # best of the repeats
    d2h_pinned_gbps: float | None = None
    h2d_pageable_gbps: float | None = None
    d2h_pageable_gbps: float | None = None
    h2d_pinned_gbps_median: float | None = None
    d2h_pinned_gbps_median: float | None = None
    h2d_pageable_gbps_median: float | None = None
    d2h_pageable_gbps_median: float | None = None
    pcie_link_gen_under_load: int | None = None      # NVML, read while pinned copies run
    pcie_link_width_under_load: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_gen_gpu_max: int | None = None
    pcie_link_width_max: int | None = None
    link_theoretical_gbps: float | None = None       # one direction, from the link's max generation and width
    h2d_pinned_share: float | None = None
    d2h_pinned_share: float | None = None
    h2d_pageable_share: float | None = None
    d2h_pageable_share: float | None = None


@payload
class PcieData(Payload):
    PROBE = "pcie"

    gpus: tuple[PcieGpu, ...] = ()
    budget_s: float | None = None
    method: str | None = None


@payload
class HbmGpu(CudaDevice):
    buffer_bytes: int | None = None
    copy_bandwidth_gbps: float | None = None         # read + write counted, best of the repeats
    copy_bandwidth_gbps_median: float | None = None
    spec_bandwidth_gbps: float | None = None
    spec_key: str | None = None
    share_of_spec: float | None = None


@payload
class HbmData(Payload):
    PROBE = "hbm"

    gpus: tuple[HbmGpu, ...] = ()
    method: str | None = None


@payload
class MatmulGpu(CudaDevice):
    n: int | None = None
    spec_key: str | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    fp8_reason: str | None = None
    bf16_spec_tflops: float | None = None
    fp8_spec_tflops: float | None = None
    bf16_share_of_spec: float | None = None
    fp8_share_of_spec: float | None = None


@payload
class MatmulData(Payload):
    PROBE = "matmul"

    gpus: tuple[MatmulGpu, ...] = ()
    method: str | None = None


@payload
class AllreduceRun:
    backend: str | None = None
    world_size: int | None = None
    size_bytes: int | None = None
    dtype: str | None = None
    num_iterations: int | None = None
    time_ms_median: float | None = None
    time_ms_best: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None                  # nccl-tests' bus bandwidth, median time
    busbw_gbps_best: float | None = None


@payload
class AllreduceData(Payload):
    PROBE = "allreduce"

    gloo: AllreduceRun | None = None
    gloo_reason: str | None = None
    nccl: AllreduceRun | None = None
    nccl_reason: str | None = None
    num_gpus: int | None = None
    method: str | None = None
    unsupported_fields: tuple[str, ...] = ()
