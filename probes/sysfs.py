"""Small readers for /sys and /proc trees, rooted anywhere so tests can replay captured trees."""
from __future__ import annotations

from pathlib import Path


def read_text(root: str, *parts: str) -> str | None:
    """The file's stripped text, or None when it is missing or unreadable."""
    try:
        return Path(root, *parts).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def numa_nodes(sys_root: str = "/sys") -> list[dict]:
    """[{node, cpus}] from sysfs; [] when the kernel exposes no NUMA directory."""
    base = Path(sys_root, "devices/system/node")
    try:
        entries = sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    except OSError:
        return []
    out = []
    for entry in entries:
        text = read_text(str(entry), "cpulist")
        if text is None:
            continue
        try:
            out.append({"node": int(entry.name[4:]), "cpus": parse_cpulist(text)})
        except ValueError:
            continue
    return out


def numa_nodes_of_cpus(cpus: list[int], sys_root: str = "/sys") -> list[int]:
    """The NUMA nodes holding these CPUs; [] when sysfs has no node directory."""
    wanted = set(cpus)
    return [n["node"] for n in numa_nodes(sys_root) if wanted & set(n["cpus"])]
