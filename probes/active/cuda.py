"""What the GPU active probes share: whether CUDA is there (and why not), the run over every GPU,
CUDA-event timing, the spec-sheet entry of a device, and NVML's view of a device's PCIe link while it is loaded."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from triage.core.extras import install_line
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.core.specs import GpuSpec, match_nvml_name


def torch_cuda() -> tuple[Any, str | None]:
    """(torch, None) when torch sees a CUDA GPU, else (torch or None, why not)."""
    try:
        import torch
    except ImportError:
        return None, f"torch is not installed: {install_line('engine')}"
    if getattr(torch.version, "cuda", None) is None:
        return torch, (f"torch {torch.__version__} is a CPU-only build (no CUDA); on a GPU host install a CUDA "
                       "build of torch")
    try:
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            return torch, "torch sees no CUDA GPU (no driver, or CUDA_VISIBLE_DEVICES hides them)"
    except RuntimeError as e:
        return torch, f"CUDA failed to initialise: {e}"
    return torch, None


def unsupported(name: str, reason: str, start: float) -> ProbeResult:
    return ProbeResult(name, ProbeStatus.UNSUPPORTED, time.perf_counter() - start, reason, {})


def probe_each_gpu(name: str, budget_s: float, one_gpu: Callable[[Any, int, float], dict[str, Any]],
                   failed_fields: list[str], build: Callable[[list[dict[str, Any]]], Any]) -> ProbeResult:
    """Probe `name` on every GPU torch sees: `one_gpu(torch, index, budget_s / count)` gives a GPU's entry; a
    GPU that raises a CUDA error (or runs out of memory) gets an error entry with `failed_fields` unsupported.
    `build(gpus)` makes the probe's data. UNSUPPORTED, with the reason, when there is no CUDA GPU."""
    start = time.perf_counter()
    torch, why = torch_cuda()
    if why is not None:
        return unsupported(name, why, start)
    n = torch.cuda.device_count()
    gpus = []
    for i in range(n):
        try:
            gpus.append(one_gpu(torch, i, budget_s / n))
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            gpus.append({"index": i, "error": f"{type(e).__name__}: {e}"[:300], "unsupported_fields": list(failed_fields)})
    return ProbeResult(name, ProbeStatus.OK, time.perf_counter() - start, None, build(gpus))


def device_info(torch: Any, i: int) -> dict[str, Any]:
    p = torch.cuda.get_device_properties(i)
    bus = None
    if getattr(p, "pci_bus_id", None) is not None:
        bus = f"{getattr(p, 'pci_domain_id', 0):08x}:{p.pci_bus_id:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"
    return {"index": i, "name": p.name, "memory_total_bytes": int(p.total_memory),
            "compute_capability": [p.major, p.minor], "pci_bus_id": bus}


def spec_of(info: dict[str, Any]) -> GpuSpec | None:
    return match_nvml_name(info["name"], info.get("memory_total_bytes"))


def time_cuda(torch: Any, fn: Callable[[], object], num_repeats: int, max_time_s: float,
              inner: int = 1) -> list[float]:
    """Seconds per call of `fn`, by CUDA events around `inner` back-to-back calls; one warm-up first.
    At least two timings, then more while under `max_time_s`."""
    fn()
    torch.cuda.synchronize()
    times: list[float] = []
    deadline = time.perf_counter() + max_time_s
    while len(times) < 2 or (len(times) < num_repeats and time.perf_counter() < deadline):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / inner)
    return times


def nvml_link(bus_id: str | None) -> dict[str, Any]:
    """NVML's current and maximum PCIe generation and width of the device at `bus_id`; {} when NVML or the
    device is not there. Called while a transfer runs, so an idle downshift cannot hide a bad link."""
    if not bus_id:
        return {}
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError and its subclasses: NVML is not usable here
        return {}
    out: dict[str, Any] = {}
    try:
        h = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode() if isinstance(bus_id, str) else bus_id)
        for key, fn in (("pcie_link_gen_under_load", "nvmlDeviceGetCurrPcieLinkGeneration"),
                        ("pcie_link_width_under_load", "nvmlDeviceGetCurrPcieLinkWidth"),
                        ("pcie_link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                        ("pcie_link_gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
                        ("pcie_link_width_max", "nvmlDeviceGetMaxPcieLinkWidth")):
            try:
                out[key] = int(getattr(pynvml, fn)(h))
            except Exception:
                out[key] = None
    except Exception:
        return {}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def gbps(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else round(bytes_per_s / 1e9, 2)


def share(measured: float | None, expected: float | None) -> float | None:
    if measured is None or not expected:
        return None
    return round(measured / expected, 3)
