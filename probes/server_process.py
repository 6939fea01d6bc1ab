"""The `server_process` probe: the serving process tree's CPU, threads, memory, affinity and debug env.

A pegged single thread (the tokenizer or the scheduler loop under the GIL) shows as
`max_thread_cpu_pct` near 100 while the process total looks modest. Keys: docs/SNAPSHOT.md.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from triage.core.probe_data import ServerProcessData
from triage.core.redact import redact_argv, redact_env
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.cgroup import read_limits
from triage.probes.registry import ProbeRun, register
from triage.probes.sysfs import numa_nodes_of_cpus, parse_cpulist

# Environment variables that slow serving down or change how it runs, worth showing when set. The
# debugging/profiling ones are what GPU011 (rules/catalog/gpu011_bad_cuda_env.py) judges; a test keeps that list inside this one.
DEBUG_ENV = (
    # CUDA debugging and profiling (DCGM diag r1's environment checks)
    "CUDA_LAUNCH_BLOCKING", "CUDA_INJECTION64_PATH", "NSIGHT_CUDA_DEBUGGER", "CUDA_PROFILE",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_MEMCHECK_PATCH_MODULE", "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "COMPUTE_PROFILE", "NVTX_INJECTION64_PATH",
    # NCCL and PyTorch
    "NCCL_DEBUG", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE",
    "TORCH_COMPILE_DEBUG", "TORCH_LOGS", "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUDA_MODULE_LOADING",
    # the engines
    "VLLM_TRACE_FUNCTION", "VLLM_LOGGING_LEVEL", "VLLM_ATTENTION_BACKEND",
    "VLLM_USE_V1", "VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_WORKER_MULTIPROC_METHOD", "OMP_NUM_THREADS",
    "TOKENIZERS_PARALLELISM", "CUDA_VISIBLE_DEVICES",
)
MAX_PROCESSES = 64


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        children = root.children(recursive=True)
    except (psutil.Error, OSError):
        children = []
    return [root, *children][:MAX_PROCESSES]


def _thread_times(proc: psutil.Process) -> dict[int, float]:
    try:
        return {t.id: t.user_time + t.system_time for t in proc.threads()}
    except (psutil.Error, OSError):
        return {}


def _mems_allowed(pid: int, proc_root: str) -> list[int] | None:
    try:
        for line in Path(proc_root, str(pid), "status").read_text().splitlines():
            if line.startswith("Mems_allowed_list:"):
                return parse_cpulist(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def _uptime_s(root: psutil.Process, clock: Callable[[], float]) -> float | None:
    try:
        uptime = clock() - root.create_time()
    except (psutil.Error, OSError):
        return None
    return round(uptime, 1) if uptime >= 0 else None   # a clock stepped backwards: unknown


def _rss(proc: psutil.Process) -> int | None:
    try:
        return int(proc.memory_info().rss)
    except (psutil.Error, OSError):
        return None


def _prime(procs: list[psutil.Process]) -> dict[int, tuple[float, dict[int, float]]]:
    """Start each process's CPU counters: {pid: (when, its threads' CPU seconds)}."""
    before: dict[int, tuple[float, dict[int, float]]] = {}
    for p in procs:
        try:
            p.cpu_percent(None)  # primes psutil's per-process counter; the first call returns 0.0
            before[p.pid] = (time.perf_counter(), _thread_times(p))
        except (psutil.Error, OSError):
            continue
    return before


def _window_rows(procs: list[psutil.Process], before: dict[int, tuple[float, dict[int, float]]]
                 ) -> tuple[list[dict[str, Any]], float | None]:
    """(one row per process over the window, the busiest thread's CPU %)."""
    rows: list[dict[str, Any]] = []
    max_thread_pct: float | None = None
    for p in procs:
        if p.pid not in before:
            continue
        try:
            row, busiest = _process_row(p, *before[p.pid])
        except (psutil.Error, OSError):
            continue
        rows.append(row)
        if busiest is not None:
            max_thread_pct = busiest if max_thread_pct is None else max(max_thread_pct, busiest)
    return rows, max_thread_pct


def _process_row(p: psutil.Process, t0: float, threads0: dict[int, float]) -> tuple[dict[str, Any], float | None]:
    with p.oneshot():
        cpu_pct = p.cpu_percent(None)
        row = {"pid": p.pid, "name": p.name(), "cpu_pct": cpu_pct, "num_threads": p.num_threads(),
               "rss_bytes": int(p.memory_info().rss)}
    elapsed = max(time.perf_counter() - t0, 1e-6)
    pcts = [100.0 * (total - threads0[tid]) / elapsed for tid, total in _thread_times(p).items() if tid in threads0]
    return row, max(pcts) if pcts else None


def _affinity(root: psutil.Process) -> list[int] | None:
    try:
        return sorted(root.cpu_affinity())
    except (psutil.Error, OSError, AttributeError):
        return None


def _environ(root: psutil.Process) -> Mapping[str, str] | None:
    try:
        return root.environ()
    except (psutil.Error, OSError):
        return None


def probe_server_process(pid: int | None, engine: str | None = None, window_s: float = 2.0,
                         proc_root: str = "/proc", sys_root: str = "/sys",
                         sleep: Callable[[float], None] = time.sleep,
                         clock: Callable[[], float] = time.time, argv: Sequence[str] | None = None,
                         env: Mapping[str, str] | None = None) -> ProbeResult:
    """`clock` is the wall clock (epoch seconds) that `uptime_s` is measured against; `argv` and `env`:
    the process's command line and environment when the caller already read them (read here otherwise)."""
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("server_process", status, time.perf_counter() - start, reason, ServerProcessData.of(data))

    if pid is None:
        return done(ProbeStatus.UNSUPPORTED, "no serving process found on this host (remote URL, or none running)")
    try:
        root = psutil.Process(pid)
        if argv is None:
            argv = root.cmdline()
    except psutil.NoSuchProcess:
        return done(ProbeStatus.ERROR, f"process {pid} exited while being read")
    except psutil.AccessDenied:
        return done(ProbeStatus.PERMISSION_DENIED, f"process {pid} belongs to another user; run as that user or root")

    uptime_s = _uptime_s(root, clock)
    procs = _tree(root)
    before = _prime(procs)
    rss_start = _rss(root)
    sleep(window_s)
    rows, max_thread_pct = _window_rows(procs, before)
    rss_end = _rss(root)
    affinity = _affinity(root)
    env = env if env is not None else _environ(root)
    unsupported = [name for name, value in (("uptime_s", uptime_s), ("rss_bytes_start", rss_start),
                                            ("rss_bytes_end", rss_end), ("cpu_affinity", affinity),
                                            ("debug_env", env)) if value is None]
    safe_env = redact_env(env) if env is not None else None
    limits = read_limits(pid, proc_root, sys_root)
    data = {
        "pid": pid,
        "engine": engine,
        "cmdline": redact_argv(argv),
        "uptime_s": uptime_s,
        "cpu_affinity": affinity,
        "affinity_numa_nodes": numa_nodes_of_cpus(affinity, sys_root) if affinity else None,
        "memory_numa_nodes": _mems_allowed(pid, proc_root),
        "window_s": window_s,
        "processes": rows,
        "max_thread_cpu_pct": round(max_thread_pct, 1) if max_thread_pct is not None else None,
        "rss_bytes_start": rss_start,
        "rss_bytes_end": rss_end,
        "debug_env": {k: safe_env[k] for k in DEBUG_ENV if k in safe_env} if safe_env is not None else None,
        "hf_home": safe_env.get("HF_HOME") if safe_env is not None else None,
        "cgroup_path": limits.cgroup_path,
        "cgroup_cpu_quota_cores": limits.cpu_quota_cores,
        "cgroup_memory_max_bytes": limits.memory_max_bytes,
        "uid": limits.uid,
        "user": limits.user,
        "unsupported_fields": unsupported,
    }
    return done(ProbeStatus.OK, None, data)


@register("server_process", phase=2, order=50, timeout_s=lambda run: run.window_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_server_process(run.pid, run.engine, run.window_s, run.proc_root, run.sys_root,
                                argv=run.argv, env=run.env)
