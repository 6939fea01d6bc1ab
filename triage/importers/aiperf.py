"""AIPerf `profile_export_aiperf.json` (one run, one load level), as AIPerf 0.13.0 writes it: top-level
metric objects {unit, avg, p1..p99, min, max, std, count} (time_to_first_token, inter_token_latency,
request_latency in ms; request_throughput, output_token_throughput, total_token_throughput), `input_config`
(endpoint, datasets, phases with the concurrency or request rate) and `aiperf_version`.

Per-request values are not in it; AIPerf writes them to `profile_export.jsonl` in the same directory (one
record a line: {"metadata": {...}, "metrics": {"time_to_first_token": {"value", "unit"}, ...}}), read when
it is there."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from triage.core.report import LatencyStats, Report
from triage.importers.common import NONE_STATS, bench_report, make_level, number, workload

SOURCE = "AIPerf profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
# AIPerf metric -> triage family. AIPerf's inter_token_latency is per request (decode time / (tokens - 1)),
# which is triage's TPOT; its inter_chunk_latency is the gap between stream chunks, triage's ITL.
FAMILIES = {"time_to_first_token": "ttft_ms", "inter_token_latency": "tpot_ms",
            "inter_chunk_latency": "itl_ms", "request_latency": "e2e_ms"}
_SCALE_TO_MS = {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "us": 0.001, "ns": 1e-6}


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and "aiperf_version" in data or (
        isinstance(data, dict) and "input_config" in data and "request_throughput" in data)


def _summary(obj: Any) -> LatencyStats:
    if not isinstance(obj, dict):
        return NONE_STATS
    scale = _SCALE_TO_MS.get(str(obj.get("unit", "ms")), 1.0)

    def get(key: str) -> float | None:
        v = number(obj.get(key))
        return None if v is None else v * scale

    return LatencyStats(get("avg"), get("std"), get("min"), get("p50"), get("p90"), get("p95"), get("p99"), get("max"))


def _avg(data: dict[str, Any], key: str) -> float | None:
    obj = data.get(key)
    return number(obj.get("avg")) if isinstance(obj, dict) else None


def _records(path: Path | None) -> dict[str, list[float]]:
    """Per-request values from profile_export.jsonl next to the summary (profiling phase, not cancelled)."""
    out: dict[str, list[float]] = {}
    if path is None or not (path.parent / RECORDS_FILE).is_file():
        return out
    for line in (path.parent / RECORDS_FILE).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        meta, metrics = rec.get("metadata") or {}, rec.get("metrics") or {}
        if meta.get("was_cancelled") or meta.get("benchmark_phase", "profiling") != "profiling":
            continue
        for name, family in FAMILIES.items():
            m = metrics.get(name)
            if family == "itl_ms" or not isinstance(m, dict) or number(m.get("value")) is None:
                continue
            out.setdefault(family, []).append(m["value"] * _SCALE_TO_MS.get(str(m.get("unit", "ms")), 1.0))
    return out


def convert(data: dict[str, Any], path: Path | None = None) -> Report:
    cfg = data.get("input_config") or {}
    phases = [p for p in cfg.get("phases") or [] if isinstance(p, dict) and p.get("kind", "profiling") == "profiling"]
    phase = phases[0] if phases else {}
    concurrency = phase.get("concurrency") if isinstance(phase.get("concurrency"), int) else None
    rate = number(phase.get("request_rate")) if concurrency is None else None
    samples = _records(path)
    completed = int(_avg(data, "completed_request_count") or _avg(data, "request_count") or 0)
    errors = data.get("error_summary") or []
    failed = sum(int(e.get("count", 1)) for e in errors if isinstance(e, dict))
    level = make_level(
        concurrency=concurrency, rate=rate, duration_s=(_avg(data, "benchmark_duration") or 0.0), completed=completed,
        failed=failed, samples=samples, summaries={f: _summary(data.get(n)) for n, f in FAMILIES.items()},
        rates={"output_tokens_per_s": _avg(data, "output_token_throughput"),
               "total_tokens_per_s": _avg(data, "total_token_throughput"),
               "requests_per_s": _avg(data, "request_throughput"),
               "goodput_requests_per_s": _avg(data, "goodput")},
        input_tokens_mean=_avg(data, "input_sequence_length"),
        output_tokens_mean=_avg(data, "usage_completion_tokens") or _avg(data, "output_sequence_length"),
        note=f"imported from {SOURCE} (AIPerf {data.get('aiperf_version', '?')})")
    endpoint = cfg.get("endpoint") or {}
    datasets = [d for d in cfg.get("datasets") or [] if isinstance(d, dict)]
    prompts = (datasets[0].get("prompts") or {}) if datasets else {}
    models = ((cfg.get("models") or {}).get("items") or [{}])
    work = workload(endpoint=endpoint.get("type"), streaming=endpoint.get("streaming"),
                    input_len=(prompts.get("isl") or {}).get("mean"), output_len=(prompts.get("osl") or {}).get("mean"),
                    dataset=datasets[0].get("type") if datasets else None)
    extra = [] if samples else [f"per-request records ({RECORDS_FILE} was not next to the file)"]
    return bench_report(source=f"{SOURCE} (AIPerf {data.get('aiperf_version', '?')})",
                        model=models[0].get("name") if models else None,
                        url=(endpoint.get("urls") or [None])[0], workload=work, levels=[level],
                        extra_missing=extra)
