"""Host memory bandwidth: copy and read over a buffer several times the last-level cache, one worker
thread per allowed CPU, per NUMA node when the host has several.

This is the one implementation of the host figure (the `mbw` step of "How to Diagnose and Fix Slow LLM Inference"): the `memory` probe's copy
figure, `triage baseline`'s CPU microbenchmark and `triage diagnose --active` all call
`measure_host_bandwidth`.

Method: each worker thread allocates and first-touches its own slice of the source and destination
buffers (so on a NUMA host the pages land on the node its CPUs belong to), then the slices are copied
(`numpy.copyto`, read + write both counted, as STREAM's copy counts them) and reduced to their maximum
(read only) in parallel; numpy releases the GIL for both. The read is a maximum, not a sum: numpy's sum is
bound by its additions at one thread, not by memory (on the 2-vCPU Xeon, one thread, a 512 MiB buffer: sum
9.2 GB/s, max 15.7 GB/s; 56 MiB, in its cache: 13.3 against 23.9 GB/s). Rates are 1e9 bytes per second
(GB/s); the best and the median of the timed repeats are kept.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from triage.core.probe_data.active import HostMemoryData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.registry import ProbeRun, register
from triage.probes.sysfs import numa_nodes, read_text

MIB = 2**20
MIN_BUFFER_BYTES = 64 * MIB
MAX_BUFFER_BYTES = 2048 * MIB
LLC_MULTIPLE = 4                      # buffer >= 4 x the last-level cache: DRAM, not cache, is measured
DEFAULT_BUDGET_S = 6.0


@dataclass(frozen=True, slots=True)
class HostBandwidth:
    buffer_bytes: int                 # bytes in the source buffer (the copy moves twice that)
    num_threads: int
    cpus: tuple[int, ...]             # the CPUs the workers were allowed to run on
    num_repeats: int
    copy_best_bytes_per_s: float
    copy_median_bytes_per_s: float
    read_best_bytes_per_s: float | None
    read_median_bytes_per_s: float | None
    method: str = "numpy copy (read + write counted) and max (read), one thread per CPU, first touch per thread"


def last_level_cache_bytes(sys_root: str = "/sys") -> int | None:
    """The summed size of the highest-level CPU cache over its distinct instances, from sysfs."""
    base = os.path.join(sys_root, "devices/system/cpu")
    try:
        cpus = sorted(d for d in os.listdir(base) if d.startswith("cpu") and d[3:].isdigit())
    except OSError:
        return None
    best_level, seen, total = 0, set(), 0
    for cpu in cpus:
        cache_dir = os.path.join(base, cpu, "cache")
        try:
            indexes = [d for d in os.listdir(cache_dir) if d.startswith("index")]
        except OSError:
            continue
        for idx in indexes:
            level = read_text(cache_dir, idx, "level")
            size = read_text(cache_dir, idx, "size")
            shared = read_text(cache_dir, idx, "shared_cpu_list") or cpu
            if not (level and level.isdigit() and size):
                continue
            num = _size_bytes(size)
            if num is None:
                continue
            lvl = int(level)
            if lvl > best_level:
                best_level, seen, total = lvl, set(), 0
            if lvl == best_level and shared not in seen:
                seen.add(shared)
                total += num
    return total or None


def _size_bytes(text: str) -> int | None:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper()
    try:
        if text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)
    except (ValueError, IndexError):
        return None


def default_buffer_bytes(sys_root: str = "/sys", llc_bytes: int | None = None) -> int:
    """4 x the last-level cache, at least 64 MiB and at most 2 GiB (and never more than 1/8 of free RAM)."""
    llc = llc_bytes if llc_bytes is not None else last_level_cache_bytes(sys_root)
    size = max(MIN_BUFFER_BYTES, LLC_MULTIPLE * (llc or 0))
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        size = min(size, max(MIN_BUFFER_BYTES, avail // 16))   # src + dst = 2 x size <= 1/8 of free RAM
    except (ValueError, OSError, AttributeError):
        pass
    return int(min(size, MAX_BUFFER_BYTES))


def allowed_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


class _Workers:
    """Persistent worker threads, each owning a slice of both buffers; ops run in lockstep."""

    def __init__(self, buffer_bytes: int, num_threads: int, cpus: Sequence[int]) -> None:
        import numpy as np

        self.n = num_threads
        per = max(1, buffer_bytes // 8 // num_threads)
        self.slices: list[tuple[object, object] | None] = [None] * num_threads
        self.errors: list[BaseException] = []
        self.op: str | None = "alloc"
        self.start = threading.Barrier(num_threads + 1)
        self.done = threading.Barrier(num_threads + 1)
        self.sink = [0.0] * num_threads
        self._np, self._per, self._cpus = np, per, set(cpus)
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True, name=f"membw-{i}")
                        for i in range(num_threads)]
        for t in self.threads:
            t.start()
        self.run("alloc")

    def _run(self, i: int) -> None:
        np = self._np
        if self._cpus and hasattr(os, "sched_setaffinity"):
            try:
                os.sched_setaffinity(0, self._cpus)      # this thread only (Linux affinity is per thread)
            except OSError:
                pass
        while True:
            self.start.wait()
            op = self.op
            try:
                if op == "alloc":
                    src = np.empty(self._per, dtype=np.float64)
                    dst = np.empty_like(src)
                    src.fill(1.0)                        # first touch from this thread: local pages
                    dst.fill(0.0)
                    self.slices[i] = (src, dst)
                elif op == "copy":
                    s, d = self.slices[i]
                    np.copyto(d, s)
                elif op == "read":
                    self.sink[i] = float(self.slices[i][0].max())
                elif op == "stop":
                    self.slices[i] = None
            except BaseException as e:  # MemoryError included: reported by the caller
                self.errors.append(e)
            self.done.wait()
            if op == "stop":
                return

    def run(self, op: str) -> float:
        self.op = op
        t0 = time.perf_counter()
        self.start.wait()
        self.done.wait()
        dt = time.perf_counter() - t0
        if self.errors:
            raise self.errors[0]
        return dt

    @property
    def elem_bytes(self) -> int:
        return self._per * 8 * self.n

    def close(self) -> None:
        self.errors.clear()
        try:
            self.run("stop")
        except BaseException:
            pass


def measure_host_bandwidth(buffer_bytes: int | None = None, num_threads: int | None = None,
                           cpus: Sequence[int] | None = None, num_repeats: int = 10,
                           max_time_s: float = 2.0, read: bool = True) -> HostBandwidth:
    """Copy (and read) bandwidth of host memory. `max_time_s` bounds the timed repeats (at least two of
    each are always made); allocation and the warm-up pass come before it."""
    cpus = list(cpus) if cpus else allowed_cpus()
    threads = max(1, num_threads or len(cpus))
    size = buffer_bytes or default_buffer_bytes()
    w = _Workers(size, threads, cpus)
    try:
        moved = w.elem_bytes
        w.run("copy")                                # warm-up
        copy_t = _timed(lambda: w.run("copy"), num_repeats, max_time_s / (2 if read else 1))
        read_t: list[float] = []
        if read:
            w.run("read")
            read_t = _timed(lambda: w.run("read"), num_repeats, max_time_s / 2)
    finally:
        w.close()
    copy_rates = [2 * moved / t for t in copy_t if t > 0]
    read_rates = [moved / t for t in read_t if t > 0]
    return HostBandwidth(buffer_bytes=moved, num_threads=threads, cpus=tuple(cpus), num_repeats=len(copy_rates),
                         copy_best_bytes_per_s=max(copy_rates), copy_median_bytes_per_s=statistics.median(copy_rates),
                         read_best_bytes_per_s=max(read_rates) if read_rates else None,
                         read_median_bytes_per_s=statistics.median(read_rates) if read_rates else None)


def _timed(fn: Callable[[], float], num_repeats: int, max_time_s: float) -> list[float]:
    times: list[float] = []
    deadline = time.perf_counter() + max_time_s
    while len(times) < 2 or (len(times) < num_repeats and time.perf_counter() < deadline):
        times.append(fn())
    return times


def _gbps(v: float | None) -> float | None:
    return None if v is None else round(v / 1e9, 2)


def _row(bw: HostBandwidth, node: int | None) -> dict:
    return {"node": node, "num_threads": bw.num_threads, "buffer_bytes": bw.buffer_bytes,
            "num_repeats": bw.num_repeats,
            "copy_bandwidth_gbps": _gbps(bw.copy_best_bytes_per_s),
            "copy_bandwidth_gbps_median": _gbps(bw.copy_median_bytes_per_s),
            "read_bandwidth_gbps": _gbps(bw.read_best_bytes_per_s),
            "read_bandwidth_gbps_median": _gbps(bw.read_median_bytes_per_s)}


def probe_host_memory(budget_s: float = DEFAULT_BUDGET_S, sys_root: str = "/sys",
                      buffer_bytes: int | None = None,
                      measure: Callable[..., HostBandwidth] = measure_host_bandwidth) -> ProbeResult:
    """The `host_memory` active probe: whole-host copy/read bandwidth, and each NUMA node's on its own
    CPUs (first-touch local pages) when there are several. Keys: docs/SNAPSHOT.md, `host_memory`."""
    start = time.perf_counter()
    llc = last_level_cache_bytes(sys_root)
    size = buffer_bytes or default_buffer_bytes(sys_root, llc)
    allowed = set(allowed_cpus())
    all_nodes = numa_nodes(sys_root)
    nodes = [n for n in all_nodes if allowed & set(n["cpus"])]
    unsupported: list[str] = []
    notes: list[str] = []
    outside = [n["node"] for n in all_nodes if n not in nodes and n["cpus"]]
    if outside:
        notes.append(f"node(s) {', '.join(map(str, outside))} not measured: none of their CPUs is in this "
                     "process's affinity (run triage unbound to measure every node)")
    slots = 1 + (len(nodes) if len(nodes) > 1 else 0)
    per_s = max(0.3, budget_s / slots / 2)          # half for timing, half for allocation and warm-up
    try:
        whole = measure(buffer_bytes=size, cpus=sorted(allowed), max_time_s=per_s)
    except MemoryError:
        return ProbeResult("host_memory", ProbeStatus.ERROR, time.perf_counter() - start,
                           f"could not allocate 2 x {size / MIB:.0f} MiB for the measurement", {})
    rows = []
    if len(nodes) > 1:
        for n in nodes:
            cpus = sorted(allowed & set(n["cpus"]))
            try:
                rows.append(_row(measure(buffer_bytes=max(MIN_BUFFER_BYTES, size // len(nodes)), cpus=cpus,
                                         max_time_s=per_s), n["node"]))
            except MemoryError:
                rows.append({"node": n["node"], "copy_bandwidth_gbps": None, "read_bandwidth_gbps": None})
                unsupported.append(f"nodes[{n['node']}]")
        notes.append("each node measured alone, threads on its own CPUs, pages first-touched there")
    elif not nodes:
        unsupported.append("nodes")
        notes.append(f"{sys_root}/devices/system/node is not readable: NUMA layout unknown")
    else:
        rows.append(_row(whole, nodes[0]["node"]))
    whole_row = _row(whole, None)
    data = {
        "copy_bandwidth_gbps": whole_row["copy_bandwidth_gbps"],
        "copy_bandwidth_gbps_median": whole_row["copy_bandwidth_gbps_median"],
        "read_bandwidth_gbps": whole_row["read_bandwidth_gbps"],
        "read_bandwidth_gbps_median": whole_row["read_bandwidth_gbps_median"],
        "buffer_bytes": whole.buffer_bytes,
        "llc_bytes": llc,
        "num_threads": whole.num_threads,
        "num_numa_nodes": len(nodes) or None,
        "nodes": rows,
        "method": whole.method,
        "notes": notes,
        "unsupported_fields": unsupported + (["llc_bytes"] if llc is None else []),
    }
    return ProbeResult("host_memory", ProbeStatus.OK, time.perf_counter() - start, None, HostMemoryData.build(data))


BUDGET_S = 4.0


@register("host_memory", phase=4, order=110, timeout_s=lambda run: BUDGET_S + 15.0, active=True, budget_s=BUDGET_S)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_host_memory(BUDGET_S, run.sys_root)

