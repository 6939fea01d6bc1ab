"""The `cpu` probe: model, cores, governor and frequency, per-core utilization over a window, NUMA nodes.

Per-core utilization comes from two reads of `/proc/stat` (a rate needs an interval: psutil's first
`cpu_percent()` returning 0.0 is the warning). Keys: docs/SNAPSHOT.md, section `cpu`.
"""
from __future__ import annotations

import collections
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from triage.core.probe_data import CpuData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.host import cpu_model
from triage.probes.registry import ProbeRun, register
from triage.probes.sysfs import numa_nodes, read_text


def parse_proc_stat(text: str) -> dict[int, tuple[float, float]]:
    """{cpu index: (busy ticks, total ticks)} from /proc/stat's `cpuN` lines."""
    out: dict[int, tuple[float, float]] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        try:
            values = [float(v) for v in fields]
            index = int(name[3:])
        except ValueError:
            continue
        idle = values[3] + (values[4] if len(values) > 4 else 0.0)  # idle + iowait
        total = sum(values[:8])  # guest time is already inside user/nice
        out[index] = (total - idle, total)
    return out


def per_core_util_pct(before: str, after: str) -> list[float | None]:
    a, b = parse_proc_stat(before), parse_proc_stat(after)
    out: list[float | None] = []
    for cpu in sorted(b):
        if cpu not in a:
            out.append(None)
            continue
        busy = b[cpu][0] - a[cpu][0]
        total = b[cpu][1] - a[cpu][1]
        out.append(round(100.0 * busy / total, 1) if total > 0 else None)
    return out


def _physical_cores(proc_root: str) -> int | None:
    text = read_text(proc_root, "cpuinfo")
    if text:
        pairs, phys, core = set(), None, None
        for line in text.splitlines() + [""]:
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                phys = value.strip()
            elif key == "core id":
                core = value.strip()
            elif not line.strip():
                if core is not None:
                    pairs.add((phys, core))
                phys, core = None, None
        if pairs:
            return len(pairs)
    try:
        return psutil.cpu_count(logical=False)
    except Exception:  # psutil may not know on odd platforms: the field degrades alone
        return None


def _cpufreq(sys_root: str) -> tuple[dict[str, int], float | None, float | None, int]:
    governors: collections.Counter[str] = collections.Counter()
    cur_khz, max_khz = [], []
    cpus = sorted(Path(sys_root, "devices/system/cpu").glob("cpu[0-9]*"))
    for cpu in cpus:
        gov = read_text(str(cpu), "cpufreq", "scaling_governor")
        if gov:
            governors[gov] += 1
        for name, bucket in (("scaling_cur_freq", cur_khz), ("cpuinfo_max_freq", max_khz)):
            value = read_text(str(cpu), "cpufreq", name)
            if value and value.isdigit():
                bucket.append(int(value))
    cur = round(sum(cur_khz) / len(cur_khz) / 1000.0, 1) if cur_khz else None
    mx = round(max(max_khz) / 1000.0, 1) if max_khz else None
    return dict(governors), cur, mx, len(cpus)


def probe_cpu(window_s: float = 2.0, proc_root: str = "/proc", sys_root: str = "/sys",
              sleep: Callable[[float], None] = time.sleep) -> ProbeResult:
    start = time.perf_counter()
    unsupported: list[str] = []
    stat_before = read_text(proc_root, "stat")
    sleep(window_s)
    stat_after = read_text(proc_root, "stat")

    governors, freq_cur, freq_max, num_sysfs_cpus = _cpufreq(sys_root)
    if freq_cur is None or freq_max is None:
        try:
            freq = psutil.cpu_freq()
            if freq is not None:
                freq_cur = freq_cur if freq_cur is not None else (round(freq.current, 1) or None)
                freq_max = freq_max if freq_max is not None else (round(freq.max, 1) or None)
        except Exception:  # no cpufreq at all in many VMs and containers
            pass
    util = per_core_util_pct(stat_before, stat_after) if stat_before and stat_after else None
    num_logical = len(parse_proc_stat(stat_after)) if stat_after else None
    data = {
        "model": cpu_model(proc_root),
        "num_physical_cores": _physical_cores(proc_root),
        "num_logical_cpus": num_logical or num_sysfs_cpus or psutil.cpu_count(logical=True),
        "governor": max(governors, key=governors.get) if governors else None,
        "governors": governors,
        "freq_mhz_current": freq_cur,
        "freq_mhz_max": freq_max,
        "window_s": window_s,
        "per_core_util_pct": util,
        "numa_nodes": numa_nodes(sys_root),
    }
    for key in ("governor", "freq_mhz_current", "freq_mhz_max", "per_core_util_pct", "model"):
        if data[key] is None:
            unsupported.append(key)
    data["unsupported_fields"] = unsupported
    status = ProbeStatus.OK if util is not None or data["model"] else ProbeStatus.UNSUPPORTED
    reason = None if status is ProbeStatus.OK else f"no readable {proc_root}/stat or cpuinfo (not Linux?)"
    return ProbeResult("cpu", status, time.perf_counter() - start, reason, CpuData.of(data))


@register("cpu", phase=2, order=30, timeout_s=lambda run: run.window_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_cpu(run.window_s, run.proc_root, run.sys_root)
