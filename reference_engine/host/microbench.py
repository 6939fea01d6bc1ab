"""Host microbenchmarks: what this machine's memory and matmul units actually deliver.

- Memory bandwidth: a large device-to-same-device copy (read + write are both counted), sized well
  past the last-level cache so it measures DRAM/HBM and not cache. A read-only pass (a sum) is
  measured too: decode mostly reads weights, and many CPUs read faster than they copy.
- Matmul throughput: square matmuls in fp32 and bf16, plus fp8 (``torch._scaled_mm``) where the
  device has it. FLOPs = 2·n³ per matmul.

Each measurement keeps its repeats' best and median. Unsupported combinations come back with
``supported=False`` and a reason, never as 0.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class BandwidthResult:
    device: str
    buffer_bytes: int
    num_repeats: int
    best_bytes_per_s: float
    median_bytes_per_s: float
    read_best_bytes_per_s: float | None = None
    read_median_bytes_per_s: float | None = None
    method: str = "copy (read + write counted); read = sum over the buffer"


@dataclass(frozen=True, slots=True)
class MatmulResult:
    device: str
    dtype: str
    n: int
    supported: bool
    best_flops_per_s: float | None = None
    median_flops_per_s: float | None = None
    num_repeats: int = 0
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class MicrobenchResult:
    bandwidth: tuple[BandwidthResult, ...]
    matmul: tuple[MatmulResult, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def bandwidth_for(self, device: str) -> BandwidthResult | None:
        return next((b for b in self.bandwidth if b.device == device), None)


def _timer(device: torch.device) -> Callable[[Callable[[], object]], float]:
    """Returns a function that runs ``fn`` once and gives its wall time in seconds."""
    if device.type == "cuda":
        def run_cuda(fn: Callable[[], object]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            return start.elapsed_time(end) / 1e3
        return run_cuda

    def run_cpu(fn: Callable[[], object]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return run_cpu


def _repeat(device: torch.device, fn: Callable[[], object], num_repeats: int, max_time_s: float) -> list[float]:
    timer = _timer(device)
    timer(fn)  # warm-up: first touch of pages, kernel selection, allocator
    times: list[float] = []
    t_end = time.perf_counter() + max_time_s
    while len(times) < num_repeats and (not times or time.perf_counter() < t_end):
        times.append(timer(fn))
    return times


def measure_bandwidth(device: str | torch.device = "cpu", buffer_bytes: int = 1024 * MIB,
                      num_repeats: int = 10, max_time_s: float = 5.0) -> BandwidthResult:
    dev = torch.device(device)
    n = buffer_bytes // 4
    src = torch.ones(n, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    times = _repeat(dev, lambda: dst.copy_(src), num_repeats, max_time_s)
    moved = 2 * n * 4
    rates = [moved / t for t in times]
    read_times = _repeat(dev, lambda: src.sum(), num_repeats, max_time_s)
    read_rates = [n * 4 / t for t in read_times]
    return BandwidthResult(str(dev), n * 4, len(times), max(rates), statistics.median(rates),
                           max(read_rates), statistics.median(read_rates))


def fp8_matmul_support(device: torch.device) -> tuple[bool, str | None]:
    if not hasattr(torch, "_scaled_mm"):
        return False, "this torch has no torch._scaled_mm"
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            return False, f"compute capability {major}.{minor} has no FP8 tensor cores (needs 8.9+)"
        return True, None
    return True, None


def measure_matmul(device: str | torch.device = "cpu", dtype: str = "bf16", n: int = 1024,
                   num_repeats: int = 5, max_time_s: float = 5.0) -> MatmulResult:
    dev = torch.device(device)
    if dtype == "fp8":
        ok, reason = fp8_matmul_support(dev)
        if not ok:
            return MatmulResult(str(dev), dtype, n, supported=False, reason=reason)
        a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=dev)
        out_dtype = torch.bfloat16

        def fn() -> object:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=out_dtype)
    else:
        tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
        if tdtype is None:
            raise ValueError(f"unknown matmul dtype {dtype!r}; use fp32, bf16, fp16 or fp8")
        a = torch.randn(n, n, device=dev, dtype=tdtype)
        b = torch.randn(n, n, device=dev, dtype=tdtype)

        def fn() -> object:
            return a @ b
    try:
        times = _repeat(dev, fn, num_repeats, max_time_s)
    except RuntimeError as e:  # a kernel the build does not have
        return MatmulResult(str(dev), dtype, n, supported=False, reason=f"{type(e).__name__}: {e}"[:200])
    flops = 2.0 * n ** 3
    rates = [flops / t for t in times]
    return MatmulResult(str(dev), dtype, n, True, max(rates), statistics.median(rates), len(times))


def available_devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def run_microbench(devices: list[str] | None = None, quick: bool = False,
                   on_step: Callable[[str], None] | None = None, buffer_bytes: int | None = None,
                   matmul_n: int | None = None,
                   host_bandwidth: Callable[[int, int, float], BandwidthResult] | None = None) -> MicrobenchResult:
    """Bandwidth and matmul FLOP/s on each device. ``quick`` uses smaller sizes and fewer repeats;
    ``buffer_bytes``/``matmul_n`` override the sizes (tests use tiny ones). ``host_bandwidth(buffer_bytes,
    num_repeats, max_time_s)`` measures the CPU's memory instead of the torch copy: `triage baseline` passes
    the host probe's implementation (triage/baseline/host_bandwidth.py), so there is one host figure."""
    devices = devices or available_devices()
    notes: list[str] = []
    bw: list[BandwidthResult] = []
    mm: list[MatmulResult] = []
    for d in devices:
        dev = torch.device(d)
        if dev.type == "cuda" and not torch.cuda.is_available():
            notes.append("cuda requested but torch.cuda.is_available() is False: GPU not measured")
            continue
        gpu = dev.type == "cuda"
        if on_step:
            on_step(f"{d}: memory bandwidth")
        buf = buffer_bytes or (2048 if gpu else 512 if quick else 1024) * MIB
        repeats, max_t = (3, 1.0) if quick else (10, 5.0)
        if host_bandwidth is not None and not gpu:
            bw.append(host_bandwidth(buf, repeats, max_t))
        else:
            bw.append(measure_bandwidth(dev, buf, num_repeats=repeats, max_time_s=max_t))
        n = matmul_n or (4096 if gpu else (512 if quick else 1024))
        for dtype in ("fp32", "bf16", "fp8"):
            if on_step:
                on_step(f"{d}: {dtype} matmul")
            # CPU fp8 goes through an emulated _scaled_mm: keep it small so it stays cheap.
            n_dt = min(n, 128 if quick else 256) if (dtype == "fp8" and not gpu) else n
            mm.append(measure_matmul(dev, dtype, n_dt, num_repeats=3 if quick else 5,
                                     max_time_s=1.0 if quick else 3.0))
            if dtype == "fp8" and not gpu and mm[-1].supported:
                notes.append("cpu fp8: torch._scaled_mm runs on the CPU without native FP8 units, "
                             "so this is an emulation figure, not a hardware FP8 rate")
    return MicrobenchResult(tuple(bw), tuple(mm), tuple(notes))
