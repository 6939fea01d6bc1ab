"""The `memory` probe: RAM and swap from /proc, swap traffic over the window, and a ~1 s host copy bandwidth.

The bandwidth is the host copy of probes/active/host_memory.py (numpy, one thread per CPU) between two
buffers larger than the caches; each copy reads and writes the buffer, so bytes moved = 2 x buffer size. It runs after the window so it does not load
the CPU while the other probes watch it. Keys: docs/SNAPSHOT.md, section `memory`.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

from triage.core.probe_data import MemoryData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.registry import ProbeRun, register
from triage.probes.sysfs import read_text

DEFAULT_BUFFER_BYTES = 64 * 2**20


def parse_meminfo(text: str) -> dict[str, int]:
    """{key: bytes} from /proc/meminfo (values there are kB)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def parse_vmstat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def copy_bandwidth_gbps(budget_s: float = 0.8, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> float | None:
    """Median copy GB/s (1e9 bytes, read + write) from the one host-bandwidth implementation
    (probes/active/host_memory.py, also behind `triage baseline` and `diagnose --active`); `budget_s`
    bounds the timed copies (at least two are always made)."""
    from triage.probes.active.host_memory import measure_host_bandwidth

    bw = measure_host_bandwidth(buffer_bytes=buffer_bytes, max_time_s=budget_s, read=False)
    return round(bw.copy_median_bytes_per_s / 1e9, 2)


def probe_memory(window_s: float = 2.0, proc_root: str = "/proc", bandwidth_budget_s: float = 0.8,
                 sleep: Callable[[float], None] = time.sleep,
                 bandwidth: Callable[[float], float | None] = copy_bandwidth_gbps) -> ProbeResult:
    start = time.perf_counter()
    vm_before = parse_vmstat(read_text(proc_root, "vmstat") or "")
    sleep(window_s)
    vm_after = parse_vmstat(read_text(proc_root, "vmstat") or "")
    meminfo = parse_meminfo(read_text(proc_root, "meminfo") or "")
    if not meminfo:
        return ProbeResult("memory", ProbeStatus.UNSUPPORTED, time.perf_counter() - start,
                           f"{proc_root}/meminfo is not readable (not Linux?)", {})
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    unsupported: list[str] = []

    def swap_delta(key: str, field: str) -> int | None:
        if key in vm_before and key in vm_after:
            return (vm_after[key] - vm_before[key]) * page
        unsupported.append(field)
        return None

    total = meminfo.get("MemTotal")
    available = meminfo.get("MemAvailable")
    swap_total = meminfo.get("SwapTotal")
    swap_free = meminfo.get("SwapFree")
    try:
        gbps = bandwidth(bandwidth_budget_s) if bandwidth_budget_s > 0 else None
    except MemoryError:
        gbps = None
    if gbps is None:
        unsupported.append("copy_bandwidth_gbps")
    data = {
        "total_bytes": total,
        "available_bytes": available,
        "available_pct": round(100.0 * available / total, 1) if total and available is not None else None,
        "swap_total_bytes": swap_total,
        "swap_used_bytes": swap_total - swap_free if swap_total is not None and swap_free is not None else None,
        "swap_in_bytes_delta": swap_delta("pswpin", "swap_in_bytes_delta"),
        "swap_out_bytes_delta": swap_delta("pswpout", "swap_out_bytes_delta"),
        "window_s": window_s,
        "copy_bandwidth_gbps": gbps,
        "unsupported_fields": unsupported,
    }
    return ProbeResult("memory", ProbeStatus.OK, time.perf_counter() - start, None, MemoryData.of(data))


@register("memory", phase=2, order=40, timeout_s=lambda run: run.window_s + run.bandwidth_budget_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_memory(run.window_s, run.proc_root, run.bandwidth_budget_s)
