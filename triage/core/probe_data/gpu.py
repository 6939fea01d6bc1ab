"""The `gpu` probe (probes/nvml.py): NVML per device, each field degrading on its own."""
from __future__ import annotations

from dataclasses import field

from triage.core.probe_data.base import Payload, payload


@payload
class ThrottleTimes:
    """NVML_FI_DEV_PERF_POLICY_* counters (as µs deltas, or as fractions of the window); None when that
    counter is NotSupported."""

    power: float | None = None
    thermal: float | None = None
    sync_boost: float | None = None
    board_limit: float | None = None
    low_util: float | None = None
    reliability: float | None = None
    total_app_clocks: float | None = None
    total_base_clocks: float | None = None


@payload
class GpuProcess:
    pid: int | None = None
    used_memory_bytes: int | None = None
    name: str | None = None              # None when the pid is not visible from here


@payload
class NvLinkErrors:
    replay: int | None = None
    recovery: int | None = None
    crc_flit: int | None = None
    crc_data: int | None = None


@payload
class NvLink:
    link: int | None = None
    active: bool | None = None
    errors: NvLinkErrors | None = None


@payload
class GpuDevice:
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, ...] | None = None      # (major, minor)
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    memory_free_bytes: int | None = None
    utilization_gpu_pct: float | None = None               # mean over the window
    utilization_gpu_pct_max: float | None = None
    utilization_memory_pct: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    clock_event_reasons_bitmask: int | None = None
    clock_event_reasons: tuple[str, ...] | None = None     # "gpu_idle", "sw_power_cap", "hw_slowdown", ...
    clock_event_reasons_source: str | None = None          # "clocks_event" | "throttle_reasons" (old drivers)
    throttle_time_delta_us: ThrottleTimes | None = None    # diffed over the window
    throttle_time_frac: ThrottleTimes | None = None        # delta / window, 0..1
    power_usage_w: float | None = None
    power_limit_enforced_w: float | None = None
    power_limit_default_w: float | None = None
    temperature_c: float | None = None
    temperature_slowdown_c: float | None = None
    pcie_link_gen_current: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_gen_gpu_max: int | None = None
    pcie_link_width_current: int | None = None
    pcie_link_width_max: int | None = None
    pcie_read_utilization_gpu_pct: float | None = None     # GPU utilization when the link was read
    pcie_replay_count: int | None = None
    ecc_mode_enabled: bool | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    persistence_mode_enabled: bool | None = None
    mig_mode_enabled: bool | None = None
    compute_processes: tuple[GpuProcess, ...] | None = None
    nvlink: tuple[NvLink, ...] | None = None               # () on a GPU without NVLink
    numa_node: int | None = None
    numa_node_source: str | None = None                    # "nvml" | "sysfs" | "affinity"
    unsupported_fields: tuple[str, ...] = ()               # fields that failed alone ("*": the GPU was lost)
    lost: bool | None = None                               # fell off the bus (NVML GPU_IS_LOST)


@payload
class GpuPair:
    gpu_a: int | None = None
    gpu_b: int | None = None
    common_ancestor: str | None = None   # internal|single|multiple|hostbridge|node|system
    nvlink: bool | None = None           # an active link of gpu_a reaches gpu_b


@payload
class GpuData(Payload):
    """Every NVIDIA GPU through NVML. With no NVML (no driver, no nvidia-ml-py) the status is
    `unsupported` and `data` is empty; a refused NVML is `permission_denied`. A GPU that fell off the bus
    (`lost`) keeps the fields read before the loss; the rest are null and `*` is in its `unsupported_fields`."""

    PROBE = "gpu"

    driver_version: str | None = None
    cuda_driver_version: str | None = None    # "12.4"
    nvml_version: str | None = None
    window_s: float | None = None
    num_gpus: int | None = None
    unsupported_fields: tuple[str, ...] = ()  # system-level calls that failed
    gpus: tuple[GpuDevice, ...] = field(default=())
    topology: tuple[GpuPair, ...] = ()        # pairs of GPUs that are not lost
