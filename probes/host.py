"""The report's `host` block: who ran this. Best effort; a field we cannot read is None."""
from __future__ import annotations

import platform
import socket
import sys
from pathlib import Path

import psutil

from triage.core.report import GpuInfo, HostInfo


def cpu_model(proc_root: str = "/proc") -> str | None:
    try:
        for line in Path(proc_root, "cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_info(gpus: tuple[GpuInfo, ...] = (), proc_root: str = "/proc") -> HostInfo:
    try:
        memory_total_bytes = int(psutil.virtual_memory().total)
    except Exception:  # psutil can fail in odd containers; the field degrades alone
        memory_total_bytes = None
    return HostInfo(
        hostname=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        python=sys.version.split()[0],
        cpu_model=cpu_model(proc_root),
        num_cpus=psutil.cpu_count(logical=True),
        memory_total_bytes=memory_total_bytes,
        gpus=gpus,
    )
