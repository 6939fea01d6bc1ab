"""NVML access (nvidia-ml-py), shared by the `gpu` probe (probes/gpu.py) and `triage bench`'s GPU sampler:
the reader that turns NotSupported / NoPermission / FunctionNotFound into None plus a listed field,
the decoders, and the per-device reads. The NVML module is always injected, so tests replay a fake one
with pynvml's real function names (tests/fixtures/nvml/).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from triage.core.snapshot import ProbeStatus
from triage.probes.sysfs import numa_nodes_of_cpus

# NVML return codes (nvml.h; the same numbers in pynvml).
_ERROR_NOT_SUPPORTED = 3
_ERROR_NO_PERMISSION = 4
_ERROR_DRIVER_NOT_LOADED = 9
_ERROR_LIBRARY_NOT_FOUND = 12
_ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15

_CLOCK_SM, _CLOCK_MEM = 1, 2
_TEMPERATURE_GPU = 0
_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
_MEMORY_ERROR_CORRECTED, _MEMORY_ERROR_UNCORRECTED = 0, 1
_VOLATILE_ECC, _AGGREGATE_ECC = 0, 1
_RETIRE_SBE, _RETIRE_DBE = 0, 1
_VALUE_NOT_AVAILABLE = 2**64 - 1

CLOCK_EVENT_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

# NVML_FI_DEV_PERF_POLICY_* field ids: cumulative time held below clocks, per reason, in ns.
THROTTLE_FIELDS = {
    "power": 74, "thermal": 75, "sync_boost": 76, "board_limit": 77, "low_util": 78,
    "reliability": 79, "total_app_clocks": 80, "total_base_clocks": 81,
}

TOPOLOGY = {0: "internal", 10: "single", 20: "multiple", 30: "hostbridge", 40: "node", 50: "system"}
_NVLINK_ERRORS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
_FIELD_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class GpuLost(Exception):
    """NVML said GPU_IS_LOST: the device fell off the bus."""


def error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def text_of(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def decode_clock_event_reasons(bitmask: int) -> list[str]:
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if bitmask & bit]
    unknown = bitmask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        names.append(f"unknown_{unknown:#x}")
    return names


class NvmlReader:
    """Calls NVML functions by name; a failure gives None and names the field, a lost GPU raises."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.unsupported: list[str] = []

    def call(self, field: str, fn_name: str, *args: Any, record: bool = True) -> Any:
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:  # an nvidia-ml-py too old to know the call
            if record:
                self.mark(field)
            return None
        try:
            return fn(*args)
        except Exception as e:  # NVMLError and whatever a broken binding raises
            if error_code(e) == ERROR_GPU_IS_LOST:
                raise GpuLost(str(e)) from None
            if record:
                self.mark(field)
            return None

    def mark(self, field: str) -> None:
        if field not in self.unsupported:
            self.unsupported.append(field)


def nvml_status(e: BaseException) -> tuple[ProbeStatus, str]:
    code = error_code(e)
    if code in (_ERROR_LIBRARY_NOT_FOUND, _ERROR_DRIVER_NOT_LOADED):
        return ProbeStatus.UNSUPPORTED, f"no NVIDIA driver here: NVML says {e}"
    if code == _ERROR_NO_PERMISSION:
        return ProbeStatus.PERMISSION_DENIED, f"NVML refused access ({e}); run as a user that can open /dev/nvidia*"
    return ProbeStatus.ERROR, f"NVML failed to start: {type(e).__name__}: {e}"


def import_nvml() -> Any:
    import pynvml  # nvidia-ml-py

    return pynvml


def _mib(value: Any) -> int | None:
    return int(value) if value is not None else None


def read_field_values(r: NvmlReader, handle: Any) -> dict[str, int | None] | None:
    values = r.call("throttle_time_delta_us", "nvmlDeviceGetFieldValues", handle, list(THROTTLE_FIELDS.values()))
    if values is None:
        r.mark("throttle_time_frac")
        return None
    by_id: dict[int, int | None] = {}
    for fv in values:
        if getattr(fv, "nvmlReturn", 1) != 0:
            by_id[int(fv.fieldId)] = None
            continue
        attr = _FIELD_VALUE_ATTR.get(int(getattr(fv, "valueType", 3)), "ullVal")
        by_id[int(fv.fieldId)] = int(getattr(fv.value, attr))
    return {name: by_id.get(fid) for name, fid in THROTTLE_FIELDS.items()}


def _pci_sysfs_name(bus_id: str) -> str:
    """NVML's "00000000:17:00.0" as sysfs's "0000:17:00.0"."""
    domain, _, rest = bus_id.lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else bus_id.lower()


def _numa_node(r: NvmlReader, handle: Any, bus_id: str | None, sys_root: str) -> tuple[int | None, str | None]:
    node = r.call("numa_node", "nvmlDeviceGetNumaNodeId", handle, record=False)
    if isinstance(node, int) and node >= 0:
        return node, "nvml"
    if bus_id:
        try:
            value = int(Path(sys_root, "bus/pci/devices", _pci_sysfs_name(bus_id), "numa_node").read_text())
            if value >= 0:
                return value, "sysfs"
        except (OSError, ValueError):
            pass
    num_cpus = os.cpu_count() or 64
    words = r.call("numa_node", "nvmlDeviceGetCpuAffinity", handle, math.ceil(num_cpus / 64), record=False)
    if words is not None:
        cpus = [w * 64 + b for w, word in enumerate(list(words)) for b in range(64) if int(word) >> b & 1]
        nodes = numa_nodes_of_cpus(cpus, sys_root)
        if len(nodes) == 1:
            return nodes[0], "affinity"
    r.mark("numa_node")
    return None, None


def read_nvlinks(r: NvmlReader, handle: Any) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """Active-or-not links with their error counters, and {link: remote PCI bus id} for active ones."""
    links: list[dict[str, Any]] = []
    remotes: dict[int, str] = {}
    max_links = int(getattr(r.nvml, "NVML_NVLINK_MAX_LINKS", 18))
    for link in range(max_links):
        state = r.call("nvlink", "nvmlDeviceGetNvLinkState", handle, link, record=False)
        if state is None:
            break  # NotSupported / InvalidArgument: no more links (none at all on a PCIe-only GPU)
        errors = {name: r.call(f"nvlink[{link}].{name}", "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
                  for name, counter in _NVLINK_ERRORS.items()}
        links.append({"link": link, "active": bool(state), "errors": errors})
        if state:
            info = r.call("nvlink_remote", "nvmlDeviceGetNvLinkRemotePciInfo", handle, link, record=False)
            if info is not None:
                remotes[link] = text_of(getattr(info, "busId", "")).lower()
    return links, remotes


def read_processes(r: NvmlReader, handle: Any) -> list[dict[str, Any]] | None:
    procs = r.call("compute_processes", "nvmlDeviceGetComputeRunningProcesses", handle)
    if procs is None:
        return None
    out = []
    for p in procs:
        used = getattr(p, "usedGpuMemory", None)
        name = None
        try:
            import psutil

            name = psutil.Process(int(p.pid)).name()
        except Exception:  # the process may be in another container or gone
            pass
        out.append({"pid": int(p.pid), "name": name,
                    "used_memory_bytes": None if used in (None, _VALUE_NOT_AVAILABLE) else int(used)})
    return out


def read_static(r: NvmlReader, h: Any, index: int, sys_root: str) -> dict[str, Any]:
    nv = r.nvml
    pci = r.call("pci_bus_id", "nvmlDeviceGetPciInfo", h)
    bus_id = text_of(pci.busId) if pci is not None else None
    cc = r.call("compute_capability", "nvmlDeviceGetCudaComputeCapability", h)
    mem_v2 = getattr(nv, "nvmlMemory_v2", None)
    mem = r.call("memory", "nvmlDeviceGetMemoryInfo", h, mem_v2, record=False) if mem_v2 else None
    if mem is None:  # no v2 (older driver or binding): v1 has no `reserved`
        mem = r.call("memory_total_bytes", "nvmlDeviceGetMemoryInfo", h)
    if mem is not None and getattr(mem, "reserved", None) is None:
        r.mark("memory_reserved_bytes")
    ecc = r.call("ecc_mode_enabled", "nvmlDeviceGetEccMode", h)
    mig = r.call("mig_mode_enabled", "nvmlDeviceGetMigMode", h)
    remapped = r.call("remapped_rows_correctable", "nvmlDeviceGetRemappedRows", h)
    if remapped is None:
        for key in ("remapped_rows_uncorrectable", "remapped_rows_pending", "remapped_rows_failure"):
            r.mark(key)
    sbe = r.call("retired_pages_sbe", "nvmlDeviceGetRetiredPages", h, _RETIRE_SBE)
    dbe = r.call("retired_pages_dbe", "nvmlDeviceGetRetiredPages", h, _RETIRE_DBE)
    pending = r.call("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h)
    persistence = r.call("persistence_mode_enabled", "nvmlDeviceGetPersistenceMode", h)
    power_mw = {
        "power_limit_enforced_w": r.call("power_limit_enforced_w", "nvmlDeviceGetEnforcedPowerLimit", h),
        "power_limit_default_w": r.call("power_limit_default_w", "nvmlDeviceGetPowerManagementDefaultLimit", h),
    }
    numa_node, numa_source = _numa_node(r, h, bus_id, sys_root)
    return {
        "index": index,
        "name": text_of(n) if (n := r.call("name", "nvmlDeviceGetName", h)) is not None else None,
        "uuid": text_of(u) if (u := r.call("uuid", "nvmlDeviceGetUUID", h)) is not None else None,
        "pci_bus_id": bus_id,
        "compute_capability": list(cc) if cc is not None else None,
        "memory_total_bytes": _mib(getattr(mem, "total", None)),
        "memory_used_bytes": _mib(getattr(mem, "used", None)),
        "memory_reserved_bytes": _mib(getattr(mem, "reserved", None)),
        "memory_free_bytes": _mib(getattr(mem, "free", None)),
        "sm_clock_max_mhz": r.call("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", h, _CLOCK_SM),
        "mem_clock_max_mhz": r.call("mem_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", h, _CLOCK_MEM),
        **{k: (v / 1000.0 if v is not None else None) for k, v in power_mw.items()},
        "temperature_slowdown_c": r.call("temperature_slowdown_c", "nvmlDeviceGetTemperatureThreshold", h,
                                         _TEMPERATURE_THRESHOLD_SLOWDOWN),
        "pcie_link_gen_max": r.call("pcie_link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h),
        "pcie_link_gen_gpu_max": r.call("pcie_link_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration", h),
        "pcie_link_width_max": r.call("pcie_link_width_max", "nvmlDeviceGetMaxPcieLinkWidth", h),
        "pcie_replay_count": r.call("pcie_replay_count", "nvmlDeviceGetPcieReplayCounter", h),
        "ecc_mode_enabled": bool(ecc[0]) if ecc is not None else None,
        "ecc_corrected_volatile": r.call("ecc_corrected_volatile", "nvmlDeviceGetTotalEccErrors", h,
                                         _MEMORY_ERROR_CORRECTED, _VOLATILE_ECC),
        "ecc_uncorrected_volatile": r.call("ecc_uncorrected_volatile", "nvmlDeviceGetTotalEccErrors", h,
                                           _MEMORY_ERROR_UNCORRECTED, _VOLATILE_ECC),
        "ecc_uncorrected_aggregate": r.call("ecc_uncorrected_aggregate", "nvmlDeviceGetTotalEccErrors", h,
                                            _MEMORY_ERROR_UNCORRECTED, _AGGREGATE_ECC),
        "retired_pages_sbe": len(sbe) if sbe is not None else None,
        "retired_pages_dbe": len(dbe) if dbe is not None else None,
        "retired_pages_pending": bool(pending) if pending is not None else None,
        "remapped_rows_correctable": remapped[0] if remapped is not None else None,
        "remapped_rows_uncorrectable": remapped[1] if remapped is not None else None,
        "remapped_rows_pending": bool(remapped[2]) if remapped is not None else None,
        "remapped_rows_failure": bool(remapped[3]) if remapped is not None else None,
        "persistence_mode_enabled": bool(persistence) if persistence is not None else None,
        "mig_mode_enabled": bool(mig[0]) if mig is not None else None,
        "numa_node": numa_node,
        "numa_node_source": numa_source,
    }


def read_clock_events(r: NvmlReader, h: Any) -> tuple[int | None, str | None]:
    """(the clock-event reasons bitmask, which call gave it): the newer ClocksEvent call, else ThrottleReasons."""
    value = r.call("clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons", h, record=False)
    if value is not None:
        return int(value), "clocks_event"
    value = r.call("clock_event_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    return (int(value), "throttle_reasons") if value is not None else (None, None)


def read_utilization(r: NvmlReader, h: Any) -> tuple[int | None, int | None]:
    """(GPU busy %, memory-controller busy %) over NVML's last sample period."""
    util = r.call("utilization_gpu_pct", "nvmlDeviceGetUtilizationRates", h)
    return (int(util.gpu), int(util.memory)) if util is not None else (None, None)


def read_moment(r: NvmlReader, h: Any) -> dict[str, Any]:
    """Values read at one instant, at the end of the window."""
    gen = r.call("pcie_link_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration", h)
    width = r.call("pcie_link_width_current", "nvmlDeviceGetCurrPcieLinkWidth", h)
    util_at_link, _ = read_utilization(r, h)  # an idle GPU drops its link speed: say how busy it was
    bitmask, source = read_clock_events(r, h)
    power_mw = r.call("power_usage_w", "nvmlDeviceGetPowerUsage", h)
    return {
        "sm_clock_mhz": r.call("sm_clock_mhz", "nvmlDeviceGetClockInfo", h, _CLOCK_SM),
        "mem_clock_mhz": r.call("mem_clock_mhz", "nvmlDeviceGetClockInfo", h, _CLOCK_MEM),
        "clock_event_reasons_bitmask": bitmask,
        "clock_event_reasons": decode_clock_event_reasons(bitmask) if bitmask is not None else None,
        "clock_event_reasons_source": source,
        "power_usage_w": power_mw / 1000.0 if power_mw is not None else None,
        "temperature_c": r.call("temperature_c", "nvmlDeviceGetTemperature", h, _TEMPERATURE_GPU),
        "pcie_link_gen_current": gen,
        "pcie_link_width_current": width,
        "pcie_read_utilization_gpu_pct": util_at_link,
    }


def throttle_delta(before: dict | None, after: dict | None, window_s: float
                    ) -> tuple[dict[str, float | None] | None, dict[str, float | None] | None]:
    if before is None or after is None:
        return None, None
    delta_us: dict[str, float | None] = {}
    frac: dict[str, float | None] = {}
    for name in THROTTLE_FIELDS:
        a, b = before.get(name), after.get(name)
        if a is None or b is None or b < a:
            delta_us[name], frac[name] = None, None
            continue
        delta_us[name] = (b - a) / 1000.0  # NVML counts ns
        frac[name] = min(1.0, delta_us[name] / (window_s * 1e6)) if window_s > 0 else None
    return delta_us, frac
