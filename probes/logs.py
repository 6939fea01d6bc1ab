"""The `logs` probe (`--log FILE`, or `diagnose --from FILE` for a log alone): read a server log as evidence.

The text is made plain first (triage/core/log_text.py: ANSI, Markdown, container prefixes, JSON lines, newest
first), then read with the engine's own format strings (triage/engines/log_read.py, probes/log_evidence.py).
Only the tail is read (bounded), and every line kept in the snapshot is redacted.
Keys: docs/SNAPSHOT.md, section `logs`.
"""
from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence

from triage.core.log_text import plain_lines
from triage.core.probe_data import LogsData
from triage.core.redact import redact_text
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.engines import engines, get
from triage.engines.base import Engine
from triage.engines.log_read import LogRead, read_log
from triage.engines.startup_log import candidate_lines, guess_engine, parse_startup
from triage.probes.log_evidence import evidence
from triage.probes.registry import ProbeRun, register

MAX_TAIL_BYTES = 64 * 2**20
MAX_KEPT_LINES = 10

def _any_of(*texts: str) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in texts), re.I)


_SLOW_TOKENIZER_TEXT = ("Using a slow tokenizer",)
_CUDA_GRAPH_TEXT = ("CUDA graph", "cuda_graph", "Graph capturing", "capturing CUDA")
_SHM_STALL_TEXT = ("No available shared memory broadcast block",)
_OOM_TEXT = ("CUDA out of memory", "OutOfMemoryError")
# Startup vs serving: each engine module lists the lines that open its startup and say it serves, per version
# (vLLM: "vLLM API server version X" up to 0.14; from 0.15 a logo whose line reads "█ ▀▄▀ █  version X" by
# default, or "vLLM server version X, serving model M" with VLLM_DISABLE_LOG_LOGO, claims
# vllm.api-server-version-log-0.14, vllm.startup-logo, vllm.server-version-log-0.15; uvicorn's "Application
# startup complete." once it serves). vLLM's shm_broadcast warning says it "typically happens" during compilation
# or weight/KV-cache quantization, i.e. at startup, where it is not a stall.
_START_TEXT = tuple(m for e in engines() for m in e.log_marker("api_server_start"))
_READY_TEXT = tuple(m for e in engines() for m in e.log_marker("ready"))
# vLLM model_executor/model_loader/weight_utils.py logs this when fetching the weights took > 0.5 s:
# "Time spent downloading weights for <model>: 508.576789 seconds"
_DOWNLOAD_HEAD = "Time spent downloading weights for "
_SLOW_TOKENIZER, _CUDA_GRAPH, _SHM_STALL = _any_of(*_SLOW_TOKENIZER_TEXT), _any_of(*_CUDA_GRAPH_TEXT), \
    _any_of(*_SHM_STALL_TEXT)
_START, _READY, _OOM = _any_of(*_START_TEXT), _any_of(*_READY_TEXT), _any_of(*_OOM_TEXT)
_DOWNLOAD = re.compile(re.escape(_DOWNLOAD_HEAD) + r"\S+: ([\d.]+) seconds")
# One search of the lower-cased line for any of them: a case-insensitive alternation is several times slower
# (benchmarks/log_reading.py).
_ANY_LOWER = re.compile("|".join(re.escape(t.lower()) for t in (
    *_SLOW_TOKENIZER_TEXT, *_CUDA_GRAPH_TEXT, *_SHM_STALL_TEXT, *_OOM_TEXT, *_START_TEXT, *_READY_TEXT,
    _DOWNLOAD_HEAD)))


def scan_lines(lines: list[str]) -> dict:
    """What any log may hold whatever the engine: a slow tokenizer, CUDA-graph lines, shared-memory stalls (at
    start-up or not), OOM lines, the weights' download time."""
    out = {
        "num_lines": len(lines), "slow_tokenizer": False, "cuda_graph_hints": [],
        "num_shm_broadcast_stalls": 0, "num_shm_broadcast_stalls_startup": 0, "num_oom_lines": 0,
        "weights_download_s": None,
    }
    starting = False  # between a startup line and the server's ready line
    for line in lines:
        if not _ANY_LOWER.search(line.lower()):       # the many lines that hold none of these
            continue
        if _START.search(line):
            starting = True
        elif _READY.search(line):
            starting = False
        _count_events(line, out, starting)
        _read_sizes(line, out)
    return out


def _count_events(line: str, out: dict, starting: bool) -> None:
    if _SLOW_TOKENIZER.search(line):
        out["slow_tokenizer"] = True
    if _CUDA_GRAPH.search(line) and len(out["cuda_graph_hints"]) < MAX_KEPT_LINES:
        out["cuda_graph_hints"].append(redact_text(line.strip())[:300])
    if _SHM_STALL.search(line):
        out["num_shm_broadcast_stalls"] += 1
        out["num_shm_broadcast_stalls_startup"] += starting
    if _OOM.search(line):
        out["num_oom_lines"] += 1


def _read_sizes(line: str, out: dict) -> None:
    if m := _DOWNLOAD.search(line):
        seconds = float(m.group(1))
        if seconds < 1e7:
            out["weights_download_s"] = max(seconds, out["weights_download_s"] or 0.0)


def startup_section(lines: list[str], engine: Engine | None = None) -> dict | None:
    """The start-up phases of `engine` (the one the reader identified), else of the engine whose markers the log
    shows (None: no start-up in it)."""
    pairs = [(None, line) for line in candidate_lines(lines, engines())]
    if engine is None or not engine.log_markers:
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


def read_files(files: list[tuple[str, list[str]]], source: str = "--log") -> dict:
    """The `logs` payload's fields for one log given as one or more files, oldest first (a rotated log): the
    generic scan, the start-up phases, and what the engine's own lines state (its last start judged, the earlier
    ones counted as restarts). Each event keeps the file and line it was read from."""
    plain: list[tuple[int, str]] = []
    parts: list[tuple[str, int]] = []                  # (path, the global number of its line 0)
    for path, lines in files:
        offset = plain[-1][0] if plain else 0
        parts.append((path, offset))
        plain += [(offset + n, text) for n, text in plain_lines("\n".join(lines))]
    texts = [t for _, t in plain]
    read = read_log(plain)
    out = {**scan_lines(texts), "startup": startup_section(texts, get(read.engine)), "source": source,
           **evidence(read),
           **_sizes(read)}
    _localise(out, parts)
    return out


def _localise(out: dict, parts: list[tuple[str, int]]) -> None:
    """Global line numbers back to (file, line in it)."""
    def local(n: int | None) -> tuple[str | None, int | None]:
        if n is None:
            return None, None
        path, offset = next(((p, o) for p, o in reversed(parts) if o < n), parts[0])
        return path or None, n - offset

    for event in out["events"]:
        event["path"], event["line_no"] = local(event["line_no"])
    for sample in out["stats"]:
        sample["line_no"] = local(sample["line_no"])[1]
    out["first_line_no"] = local(out["first_line_no"])[1]
    out["last_line_no"] = local(out["last_line_no"])[1]


def _sizes(read: LogRead) -> dict:
    """The engine's own counts and sizes: preemptions (vLLM V0's warning, SGLang's retractions), NCCL warnings,
    errors and timeouts (never its INFO lines), the KV cache in tokens and blocks, the concurrency it allows."""
    def value(fact: str, key: str) -> float | None:
        hit = read.last(fact)
        return hit.values.get(key) if hit is not None else None

    pre = read.hits_of("preemption") + read.hits_of("retraction")
    kv, blocks = value("kv_tokens", "kv_tokens"), value("gpu_blocks", "gpu_blocks")
    per_request = value("max_concurrency", "tokens_per_request")
    return {
        "num_preemption_lines": len(pre),
        "preemption_examples": [redact_text(h.line)[:300] for h in pre[:3]],
        "num_nccl_errors": sum(1 for h in read.hits if h.fact in ("nccl_warn", "nccl_error", "nccl_timeout")),
        "kv_cache_tokens": int(kv) if kv is not None else None,
        "num_gpu_blocks": int(blocks) if blocks is not None else None,
        "max_concurrency": value("max_concurrency", "concurrency"),
        "max_concurrency_tokens_per_request": int(per_request) if per_request is not None else None,
    }


def probe_logs(path: str | Sequence[str] | None, max_bytes: int = MAX_TAIL_BYTES, source: str = "--log") -> ProbeResult:
    """`path`: the log, or its parts oldest first (each read up to `max_bytes` from its end)."""
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("logs", status, time.perf_counter() - start, reason, LogsData.of(data))

    if not path:
        return done(ProbeStatus.UNSUPPORTED, "no server log given (pass --log FILE to scan one)")
    paths = [path] if isinstance(path, str) else list(path)
    files, truncated = [], False
    for p in paths:
        try:
            lines, cut = read_tail(p, max_bytes)
        except FileNotFoundError:
            return done(ProbeStatus.ERROR, f"{p}: no such file")
        except PermissionError:
            return done(ProbeStatus.PERMISSION_DENIED, f"{p}: permission denied")
        except OSError as e:
            return done(ProbeStatus.ERROR, f"{p}: {e.strerror or e}")
        files.append((p, lines))
        truncated |= cut
    data = {"path": " + ".join(paths), "truncated": truncated, **read_files(files, source)}
    return done(ProbeStatus.OK, None, data)


@register("logs", phase=2, order=90, timeout_s=lambda run: run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_logs(run.log_path)
