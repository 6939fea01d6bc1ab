"""CUDA as the GPU active probes (probes/active/pcie.py, hbm.py, matmul.py) see it, on a CPU-only host: the
real torch does the copies and matmuls on the CPU, and this layer answers the CUDA questions (device count and
properties, events, free memory) the way one NVML scenario's GPUs would, with fixed event timings. With the fake
pynvml of that scenario in `sys.modules`, the probes read the PCIe link too. Used by the probe -> rule contract
test, so the payload fields rules read are shown filled by the probes' own code, not by hand-written fixtures.
The figures it gives are made up (every event says `elapsed_ms`); they measure nothing."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from tests.fixtures.nvml.fake_pynvml import load as load_nvml


class _Event:
    def __init__(self, elapsed_ms: float) -> None:
        self.elapsed_ms = elapsed_ms

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: _Event) -> float:
        return self.elapsed_ms


class _Cuda:
    class OutOfMemoryError(RuntimeError):
        pass

    def __init__(self, gpus: list[dict[str, Any]], elapsed_ms: float, failing: tuple[int, ...] = ()) -> None:
        self.gpus, self.elapsed_ms, self.failing = gpus, elapsed_ms, failing

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return len(self.gpus)

    def get_device_properties(self, i: int) -> Any:
        if i in self.failing:
            raise RuntimeError(f"CUDA error: an illegal memory access was encountered (fake, GPU {i})")
        g = self.gpus[i]
        domain, bus, device = g["pci_bus_id"].split(":")
        return SimpleNamespace(name=g["name"], total_memory=g["memory"]["total"], major=g["compute_capability"][0],
                               minor=g["compute_capability"][1], pci_domain_id=int(domain, 16),
                               pci_bus_id=int(bus, 16), pci_device_id=int(device.split(".")[0], 16))

    def device(self, dev: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def synchronize(self, dev: Any = None) -> None:
        pass

    def mem_get_info(self, dev: Any = None) -> tuple[int, int]:
        return 8 * 2**30, 80 * 2**30

    def Event(self, enable_timing: bool = False) -> _Event:   # noqa: N802 - torch's own name
        return _Event(self.elapsed_ms)


class FakeCudaTorch:
    """The real torch module, with `cuda`, `version.cuda` and `device('cuda', i)` answered for the scenario."""

    def __init__(self, torch: Any, gpus: list[dict[str, Any]], elapsed_ms: float = 0.5,
                 failing: tuple[int, ...] = ()) -> None:
        self._torch = torch
        self.cuda = _Cuda(gpus, elapsed_ms, failing)
        self.version = SimpleNamespace(cuda="12.8")

    def device(self, kind: str, index: int = 0) -> Any:
        return self._torch.device("cpu")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


@contextlib.contextmanager
def fake_cuda(scenario: str = "h100_x2_healthy_nvlink.json", failing: tuple[int, ...] = ()) -> Iterator[FakeCudaTorch]:
    """Inside: the GPU active probes see the scenario's GPUs (torch_cuda() answers the fake), pinned memory
    is plain CPU memory, and `import pynvml` gives the scenario's fake NVML. The GPUs in `failing` raise a CUDA
    error when the probe starts on them, as a GPU that falls over mid-measurement does."""
    import torch

    from triage.probes.active import cuda, matmul
    nvml = load_nvml(scenario)
    fake = FakeCudaTorch(torch, nvml.s["gpus"], failing=failing)
    modules = (cuda, matmul)      # hbm and pcie reach torch_cuda through cuda.probe_each_gpu
    saved = ([m.torch_cuda for m in modules], torch.Tensor.pin_memory, sys.modules.get("pynvml"))
    for m in modules:
        m.torch_cuda = lambda: (fake, None)
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    sys.modules["pynvml"] = nvml
    try:
        yield fake
    finally:
        for m, fn in zip(modules, saved[0], strict=True):
            m.torch_cuda = fn
        torch.Tensor.pin_memory = saved[1]
        if saved[2] is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved[2]
