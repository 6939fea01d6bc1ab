"""Find the serving process: by listening port, or by command line when no URL is given.

Workers (`VLLM::EngineCore`, `VLLM::Worker_TP0`, multiprocessing children) are walked up to the
process that was launched: `vllm serve`, `python -m vllm.entrypoints...`, `sglang.launch_server`,
`text-generation-launcher`, or our own `triage serve` (engine "reference").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psutil

from triage.engines import engines, launched_by

MAX_WALK_UP = 6


@dataclass(frozen=True, slots=True)
class ServingProcess:
    pid: int
    engine: str
    port: int | None          # a TCP port it listens on (the lowest), or None when unknown


def classify_cmdline(argv: list[str]) -> str | None:
    """The engine a command line launches, or None (each engine module lists its launch forms)."""
    engine = launched_by(argv)
    return engine.name if engine is not None else None


def _is_worker(name: str, argv: list[str]) -> bool:
    text = " ".join([name, *argv[:3]])
    marks = [m for e in engines() for m in e.identity.worker_marks]
    return any(m in text for m in (*marks, "multiprocessing", "ray::"))


def serving_root(proc: psutil.Process) -> tuple[psutil.Process, str] | None:
    """Walk up from `proc` (a server or one of its workers) to the process that was launched."""
    current: psutil.Process | None = proc
    for _ in range(MAX_WALK_UP):
        if current is None:
            return None
        try:
            argv = current.cmdline()
            name = current.name()
        except (psutil.Error, OSError):
            return None
        engine = classify_cmdline(argv)
        if engine is not None:
            # Go on up while the parent launches the same engine (`timeout 60 vllm serve ...`, TGI's
            # launcher above its router): the topmost one is the launch, and its tree holds the rest.
            while True:
                try:
                    parent = current.parent()
                    if parent is None or classify_cmdline(parent.cmdline()) != engine:
                        break
                except (psutil.Error, OSError):
                    break
                current = parent
            return current, engine
        if not _is_worker(name, argv) and current is not proc:
            return None
        try:
            current = current.parent()
        except (psutil.Error, OSError):
            return None
    return None


def listening_ports(proc: psutil.Process) -> list[int]:
    # psutil >= 6 names it net_connections; the old name is only for older psutil (it warns on new ones).
    getter = getattr(proc, "net_connections", None) or proc.connections
    try:
        conns = getter(kind="tcp")
    except (psutil.Error, OSError):
        return []
    return sorted({c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr})


def pid_for_port(port: int) -> int | None:
    """The pid listening on a local TCP port, or None (not here, or not ours to see)."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return int(conn.pid)
    except (psutil.Error, OSError):
        pass
    # Without privileges the system-wide table may hide pids: look at the processes we can read.
    for proc in psutil.process_iter(["pid"]):
        if port in listening_ports(proc):
            return proc.pid
    return None


def process_for_port(port: int) -> ServingProcess | None:
    pid = pid_for_port(port)
    if pid is None:
        return None
    try:
        found = serving_root(psutil.Process(pid))
    except (psutil.Error, OSError):
        return None
    if found is None:
        return ServingProcess(pid=pid, engine="unknown", port=port)
    root, engine = found
    return ServingProcess(pid=root.pid, engine=engine, port=port)


def _ports_of_tree(root: psutil.Process) -> list[int]:
    ports = set(listening_ports(root))
    try:
        for child in root.children(recursive=True):
            ports.update(listening_ports(child))
    except (psutil.Error, OSError):
        pass
    return sorted(ports)


def find_serving_processes() -> list[ServingProcess]:
    """Every serving process on this host that we can see, roots only, each with a listening port."""
    roots: dict[int, str] = {}
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            argv = proc.info.get("cmdline") or []
        except (psutil.Error, OSError):
            continue
        if classify_cmdline(argv) is None:
            continue
        found = serving_root(proc)
        if found is not None:
            roots.setdefault(found[0].pid, found[1])
    out = []
    for pid, engine in sorted(roots.items()):
        try:
            ports = _ports_of_tree(psutil.Process(pid))
        except (psutil.Error, OSError):
            ports = []
        out.append(ServingProcess(pid=pid, engine=engine, port=ports[0] if ports else None))
    return out


def is_local_host(host: str | None) -> bool:
    """True when `host` names this machine (loopback, or one of its interface addresses)."""
    if not host:
        return False
    if host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.startswith("127."):
        return True
    try:
        import socket

        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    local: set[Any] = set()
    try:
        for entries in psutil.net_if_addrs().values():
            local.update(e.address for e in entries)
    except (psutil.Error, OSError):
        return False
    return bool(addrs & local) or any(a.startswith("127.") for a in addrs)


def cmdline_and_env(pid: int | None) -> tuple[list[str] | None, dict[str, str] | None]:
    """The process's argv and environment, each None when it cannot be read (gone, or not ours)."""
    if pid is None:
        return None, None
    try:
        proc = psutil.Process(pid)
        argv = proc.cmdline()
    except (psutil.Error, OSError):
        return None, None
    try:
        env = proc.environ()
    except (psutil.Error, OSError):
        env = None
    return argv, env
