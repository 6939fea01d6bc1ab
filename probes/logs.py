"""The `logs` probe (`--log FILE`): scan a server log for the lines vLLM writes when something is off.

Only the tail is read (bounded), and every line kept in the snapshot is redacted.
Keys: docs/SNAPSHOT.md, section `logs`.
"""
from __future__ import annotations

import os
import re
import time

from triage.core.probe_data import LogsData
from triage.core.redact import redact_text
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.engines import engines
from triage.engines.startup_log import candidate_lines, guess_engine, parse_startup
from triage.probes.registry import ProbeRun, register

MAX_TAIL_BYTES = 64 * 2**20
MAX_KEPT_LINES = 10

_PREEMPT = re.compile(r"preempt", re.I)
_SLOW_TOKENIZER = re.compile(r"Using a slow tokenizer", re.I)
# V1: "GPU KV cache size: 1,234,560 tokens"; V0: "# GPU blocks: 27000, # CPU blocks: 2048"
_KV_TOKENS = re.compile(r"KV cache size:\s*([\d,]+)\s*tokens", re.I)
_GPU_BLOCKS = re.compile(r"#\s*GPU blocks:\s*([\d,]+)", re.I)
# "Maximum concurrency for 32768 tokens per request: 37.68x"
_MAX_CONCURRENCY = re.compile(r"Maximum concurrency for\s*([\d,]+)\s*tokens per request:\s*([\d.]+)x", re.I)
_CUDA_GRAPH = re.compile(r"CUDA graph|cuda_graph|Graph capturing|capturing CUDA", re.I)
_NCCL_ERROR = re.compile(r"NCCL.*(error|WARN|failed|timeout)|(error|failed).*NCCL", re.I)
_SHM_STALL = re.compile(r"No available shared memory broadcast block", re.I)
# Startup vs serving: each engine module lists the lines that open its startup and say it serves, per version
# (vLLM: "vLLM API server version X" up to 0.14; from 0.15 a logo whose line reads "█ ▀▄▀ █  version X" by
# default, or "vLLM server version X, serving model M" with VLLM_DISABLE_LOG_LOGO, claims
# vllm.api-server-version-log-0.14, vllm.startup-logo, vllm.server-version-log-0.15; uvicorn's "Application startup complete." once it serves). vLLM's shm_broadcast
# warning says it "typically happens" during compilation or weight/KV-cache quantization, i.e. at startup,
# where it is not a stall.
_START = re.compile("|".join(re.escape(m) for e in engines() for m in e.log_marker("api_server_start")), re.I)
_READY = re.compile("|".join(re.escape(m) for e in engines() for m in e.log_marker("ready")), re.I)
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError", re.I)
# vLLM model_executor/model_loader/weight_utils.py logs this when fetching the weights took > 0.5 s:
# "Time spent downloading weights for <model>: 508.576789 seconds"
_DOWNLOAD = re.compile(r"Time spent downloading weights for \S+: ([\d.]+) seconds")

def scan_lines(lines: list[str]) -> dict:
    out = {
        "num_lines": len(lines), "slow_tokenizer": False, "num_preemption_lines": 0,
        "kv_cache_tokens": None, "num_gpu_blocks": None, "max_concurrency": None,
        "max_concurrency_tokens_per_request": None, "cuda_graph_hints": [], "num_nccl_errors": 0,
        "num_shm_broadcast_stalls": 0, "num_shm_broadcast_stalls_startup": 0, "num_oom_lines": 0,
        "preemption_examples": [], "weights_download_s": None,
    }
    starting = False  # between a startup line and the server's ready line
    for line in lines:
        if _START.search(line):
            starting = True
        elif _READY.search(line):
            starting = False
        _count_events(line, out, starting)
        _read_sizes(line, out)
    return out


def _count_events(line: str, out: dict, starting: bool) -> None:
    """Preemptions, a slow tokenizer, NCCL errors, shared-memory stalls (at start-up or not), OOMs."""
    if _PREEMPT.search(line):
        out["num_preemption_lines"] += 1
        if len(out["preemption_examples"]) < 3:
            out["preemption_examples"].append(redact_text(line.strip())[:300])
    if _SLOW_TOKENIZER.search(line):
        out["slow_tokenizer"] = True
    if _CUDA_GRAPH.search(line) and len(out["cuda_graph_hints"]) < MAX_KEPT_LINES:
        out["cuda_graph_hints"].append(redact_text(line.strip())[:300])
    if _NCCL_ERROR.search(line):
        out["num_nccl_errors"] += 1
    if _SHM_STALL.search(line):
        out["num_shm_broadcast_stalls"] += 1
        out["num_shm_broadcast_stalls_startup"] += starting
    if _OOM.search(line):
        out["num_oom_lines"] += 1


def _read_sizes(line: str, out: dict) -> None:
    """The KV cache size, the blocks, the concurrency it allows, and the weights' download time."""
    if m := _KV_TOKENS.search(line):
        out["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    if m := _GPU_BLOCKS.search(line):
        out["num_gpu_blocks"] = int(m.group(1).replace(",", ""))
    if m := _MAX_CONCURRENCY.search(line):
        out["max_concurrency_tokens_per_request"] = int(m.group(1).replace(",", ""))
        out["max_concurrency"] = float(m.group(2))
    if m := _DOWNLOAD.search(line):
        seconds = float(m.group(1))
        if seconds < 1e7:
            out["weights_download_s"] = max(seconds, out["weights_download_s"] or 0.0)


def startup_section(lines: list[str]) -> dict | None:
    """The start-up phases of the engine whose markers the log shows (None: no start-up in it)."""
    pairs = [(None, line) for line in candidate_lines(lines, engines())]
    engine = guess_engine(pairs, engines())
    if engine is None:
        return None
    out = parse_startup(pairs, engine).to_dict()
    for phase in out["phases"]:
        phase["line"] = redact_text(phase["line"]) if phase["line"] else None
    return out


def read_tail(path: str, max_bytes: int = MAX_TAIL_BYTES) -> tuple[list[str], bool]:
    """(lines of the last `max_bytes` of the file, whether it was truncated)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        truncated = size > max_bytes
        if truncated:
            f.seek(size - max_bytes)
        data = f.read(max_bytes)
    lines = data.decode(errors="replace").splitlines()
    if truncated and lines:
        lines = lines[1:]  # the first line was cut in the middle
    return lines, truncated


def probe_logs(path: str | None, max_bytes: int = MAX_TAIL_BYTES) -> ProbeResult:
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("logs", status, time.perf_counter() - start, reason, LogsData.of(data))

    if not path:
        return done(ProbeStatus.UNSUPPORTED, "no server log given (pass --log FILE to scan one)")
    try:
        lines, truncated = read_tail(path, max_bytes)
    except FileNotFoundError:
        return done(ProbeStatus.ERROR, f"{path}: no such file")
    except PermissionError:
        return done(ProbeStatus.PERMISSION_DENIED, f"{path}: permission denied")
    except OSError as e:
        return done(ProbeStatus.ERROR, f"{path}: {e.strerror or e}")
    data = {"path": path, "truncated": truncated, **scan_lines(lines), "startup": startup_section(lines)}
    return done(ProbeStatus.OK, None, data)


@register("logs", phase=2, order=90, timeout_s=lambda run: run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_logs(run.log_path)
