"""The serving process's own limits and user, from its /proc entries (never triage's own): the cgroup v2
CPU quota (`cpu.max`) and memory limit (`memory.max`) of the cgroup it runs in, and the user it runs as.
A container's limits are what its server can use, whatever the host has."""
from __future__ import annotations

import pwd
from dataclasses import dataclass

from triage.probes.sysfs import read_text


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    cgroup_path: str | None = None
    cpu_quota_cores: float | None = None       # cpu.max quota / period; None: no limit or not readable
    memory_max_bytes: int | None = None        # memory.max; None: no limit or not readable
    uid: int | None = None
    user: str | None = None


def _cgroup_v2_path(pid: int, proc_root: str) -> str | None:
    text = read_text(proc_root, str(pid), "cgroup")
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            return parts[2] or "/"
    return None


def _cpu_quota(text: str | None) -> float | None:
    fields = (text or "").split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return round(quota / period, 3) if quota > 0 and period > 0 else None


def _memory_max(text: str | None) -> int | None:
    if not text or text.strip() == "max":
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if 0 < value < 2**62 else None


def _uid(pid: int, proc_root: str) -> int | None:
    for line in (read_text(proc_root, str(pid), "status") or "").splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    return None


def read_limits(pid: int, proc_root: str = "/proc", sys_root: str = "/sys") -> ProcessLimits:
    path = _cgroup_v2_path(pid, proc_root)
    base = ("fs", "cgroup", *[p for p in (path or "").split("/") if p])
    cpu = _cpu_quota(read_text(sys_root, *base, "cpu.max")) if path else None
    mem = _memory_max(read_text(sys_root, *base, "memory.max")) if path else None
    uid = _uid(pid, proc_root)
    try:
        user = pwd.getpwuid(uid).pw_name if uid is not None else None
    except KeyError:
        user = None       # a uid with no name on this host (a container's user)
    return ProcessLimits(path, cpu, mem, uid, user)
