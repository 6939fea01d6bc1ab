"""The `gpu` probe: every NVIDIA GPU through NVML (nvidia-ml-py), each field degrading on its own.

The NVML module is injected (`nvml=`), so tests replay a fake one with pynvml's real function names.
A call that fails with NotSupported, NoPermission or FunctionNotFound (an old driver) gives None and
its field is listed in that GPU's `unsupported_fields`; a GPU that fell off the bus is `lost`; no NVML
at all gives status `unsupported` with the reason. The payload: `GpuData` (docs/SNAPSHOT.md, `gpu`).
The NVML calls themselves (shared with `triage bench`'s GPU sampler) are in probes/nvml.py.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from triage.core.probe_data import GpuData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.nvml import (
    ERROR_GPU_IS_LOST,
    TOPOLOGY,
    GpuLost,
    NvmlReader,
    error_code,
    import_nvml,
    nvml_status,
    read_field_values,
    read_moment,
    read_nvlinks,
    read_processes,
    read_static,
    read_utilization,
    text_of,
    throttle_delta,
)
from triage.probes.registry import ProbeRun, register


class _Gpu:
    def __init__(self, nvml: Any, index: int) -> None:
        self.index = index
        self.reader = NvmlReader(nvml)
        self.handle: Any = None
        self.data: dict[str, Any] = {"index": index}
        self.lost = False
        self.util_samples: list[int] = []
        self.mem_util_samples: list[int] = []
        self.throttle_before: dict | None = None

    def guard(self, step: Callable[[], None]) -> None:
        if self.lost:
            return
        try:
            step()
        except GpuLost:
            self.lost = True

    def sample_util(self) -> None:
        gpu, mem = read_utilization(self.reader, self.handle)
        if gpu is not None:
            self.util_samples.append(gpu)
        if mem is not None:
            self.mem_util_samples.append(mem)


def _open(nvml: Any, index: int, sys_root: str) -> _Gpu:
    gpu = _Gpu(nvml, index)

    def step() -> None:
        try:
            gpu.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as e:
            if error_code(e) == ERROR_GPU_IS_LOST:
                raise GpuLost(str(e)) from None
            raise
        gpu.data.update(read_static(gpu.reader, gpu.handle, index, sys_root))
        gpu.throttle_before = read_field_values(gpu.reader, gpu.handle)
        gpu.sample_util()

    gpu.guard(step)
    return gpu


def _finish(gpu: _Gpu, window_s: float) -> dict[str, Any]:
    def step() -> None:
        gpu.data.update(read_moment(gpu.reader, gpu.handle))
        after = read_field_values(gpu.reader, gpu.handle)
        gpu.data["throttle_time_delta_us"], gpu.data["throttle_time_frac"] = throttle_delta(
            gpu.throttle_before, after, window_s)
        gpu.data["compute_processes"] = read_processes(gpu.reader, gpu.handle)
        links, remotes = read_nvlinks(gpu.reader, gpu.handle)
        gpu.data["nvlink"] = links
        gpu.data["_nvlink_remotes"] = remotes

    gpu.guard(step)
    util = gpu.util_samples
    gpu.data["utilization_gpu_pct"] = statistics.fmean(util) if util else None
    gpu.data["utilization_gpu_pct_max"] = max(util) if util else None
    gpu.data["utilization_memory_pct"] = statistics.fmean(gpu.mem_util_samples) if gpu.mem_util_samples else None
    gpu.data["lost"] = gpu.lost
    if gpu.lost:
        gpu.reader.mark("*")  # everything not read before the loss
    gpu.data["unsupported_fields"] = gpu.reader.unsupported
    return gpu.data


def _topology(nvml: Any, gpus: list[_Gpu]) -> list[dict[str, Any]]:
    pairs = []
    alive = [g for g in gpus if not g.lost and g.handle is not None]
    for i, a in enumerate(alive):
        for b in alive[i + 1:]:
            level = None
            try:
                level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(a.handle, b.handle))
            except Exception:  # NotSupported on some platforms: leave it unknown
                pass
            bus_b = (b.data.get("pci_bus_id") or "").lower()
            remotes = a.data.get("_nvlink_remotes") or {}
            pairs.append({
                "gpu_a": a.index, "gpu_b": b.index,
                "common_ancestor": TOPOLOGY.get(level) if level is not None else None,
                "nvlink": bool(bus_b) and bus_b in remotes.values(),
            })
    return pairs


def _sample_window(gpus: list, window_s: float, sample_interval_s: float, sleep: Callable[[float], None]) -> float:
    """Sample every GPU's utilization over the window; the window actually observed (at least `window_s`)."""
    window_start = time.perf_counter()
    num_steps = max(1, math.ceil(window_s / sample_interval_s)) if window_s > 0 else 0
    for _ in range(num_steps):
        sleep(window_s / num_steps)
        for g in gpus:
            g.guard(g.sample_util)
    return max(window_s, time.perf_counter() - window_start)


def _versions(driver: Any, cuda: Any, nvml_version: Any) -> dict[str, str | None]:
    return {
        "driver_version": text_of(driver) if driver is not None else None,
        "cuda_driver_version": f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda is not None else None,
        "nvml_version": text_of(nvml_version) if nvml_version is not None else None,
    }


def probe_gpu(nvml: Any = None, window_s: float = 2.0, sys_root: str = "/sys",
              sample_interval_s: float = 0.25, sleep: Callable[[float], None] = time.sleep) -> ProbeResult:
    """Read every GPU, sample utilization over `window_s`, diff the throttle counters over it."""
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("gpu", status, time.perf_counter() - start, reason, GpuData.of(data))

    if nvml is None:
        try:
            nvml = import_nvml()
        except ImportError:
            return done(ProbeStatus.UNSUPPORTED, "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py")
    try:
        nvml.nvmlInit()
    except Exception as e:
        status, reason = nvml_status(e)
        return done(status, reason)
    try:
        system = NvmlReader(nvml)
        driver = system.call("driver_version", "nvmlSystemGetDriverVersion")
        cuda = system.call("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")
        nvml_version = system.call("nvml_version", "nvmlSystemGetNVMLVersion")
        count = system.call("count", "nvmlDeviceGetCount")
        if count is None:
            return done(ProbeStatus.ERROR, "NVML started but could not count the GPUs")
        gpus = [_open(nvml, i, sys_root) for i in range(int(count))]
        window_s = _sample_window(gpus, window_s, sample_interval_s, sleep)
        entries = [_finish(g, window_s) for g in gpus]
        topology = _topology(nvml, gpus)
        for entry in entries:
            entry.pop("_nvlink_remotes", None)
        data = {
            **_versions(driver, cuda, nvml_version),
            "window_s": window_s,
            "num_gpus": len(entries),
            "gpus": entries,
            "topology": topology,
            "unsupported_fields": system.unsupported,
        }
        if not entries:
            return done(ProbeStatus.UNSUPPORTED, "NVML found no GPU on this host", data)
        return done(ProbeStatus.OK, None, data)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down a half-started NVML must not hide the result
            pass


@register("gpu", phase=2, order=20, timeout_s=lambda run: run.window_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_gpu(nvml=run.nvml, window_s=run.window_s, sys_root=run.sys_root)
