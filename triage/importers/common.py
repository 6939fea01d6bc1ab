"""Build a triage bench report from what a peer's result file measured. Latencies in ms; what the source did
not record stays None and is named in `config.missing_fields`."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from triage.core.bench_data import BenchRunConfig
from triage.core.errors import ReportError
from triage.core.report import (
    BenchLevel,
    BenchSection,
    ClientStats,
    HostInfo,
    LatencyStats,
    Report,
    ReportKind,
    RequestCounts,
    Target,
    new_report,
)

FAMILIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
UNKNOWN_HOST = HostInfo(hostname="unknown (imported)", os="unknown", python="unknown", cpu_model=None,
                        num_cpus=None, memory_total_bytes=None, gpus=())
NONE_STATS = LatencyStats(None, None, None, None, None, None, None, None)


def stats_from_samples(values: Sequence[float] | None) -> LatencyStats:
    a = np.asarray([v for v in (values or []) if v is not None], dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return NONE_STATS
    p50, p90, p95, p99 = (float(x) for x in np.percentile(a, [50, 90, 95, 99]))
    return LatencyStats(float(a.mean()), float(a.std()), float(a.min()), p50, p90, p95, p99, float(a.max()))


def stats_from_summary(summary: dict[str, Any] | None, scale: float = 1.0) -> LatencyStats:
    """{mean, std, min, p50, p90, p95, p99, max} (any missing is None), times `scale`."""
    if not summary:
        return NONE_STATS

    def get(key: str) -> float | None:
        v = summary.get(key)
        return float(v) * scale if isinstance(v, (int, float)) else None

    return LatencyStats(get("mean"), get("std"), get("min"), get("p50"), get("p90"), get("p95"), get("p99"), get("max"))


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def make_level(*, concurrency: int | None, rate: float | None, duration_s: float | None, completed: int,
               failed: int, samples: dict[str, list[float]], summaries: dict[str, LatencyStats],
               rates: dict[str, float | None], input_tokens_mean: float | None,
               output_tokens_mean: float | None, note: str) -> BenchLevel:
    """A level: per-request samples win over the source's summaries where both exist."""
    if concurrency is None and rate is None:
        raise ReportError("the result file names neither a concurrency nor a request rate for a level")
    stats = {f: stats_from_samples(samples[f]) if samples.get(f) else summaries.get(f, NONE_STATS) for f in FAMILIES}
    kept = {f: [float(v) for v in samples[f]] for f in FAMILIES if samples.get(f)}
    return BenchLevel(
        concurrency=concurrency, request_rate=rate, duration_s=float(duration_s or 0.0),
        requests=RequestCounts(completed=int(completed), failed=int(failed)),
        ttft_ms=stats["ttft_ms"], tpot_ms=stats["tpot_ms"], itl_ms=stats["itl_ms"], e2e_ms=stats["e2e_ms"],
        output_tokens_per_s=rates.get("output_tokens_per_s"), total_tokens_per_s=rates.get("total_tokens_per_s"),
        requests_per_s=rates.get("requests_per_s"), goodput_requests_per_s=rates.get("goodput_requests_per_s"),
        slo_attainment_pct=None, input_tokens_mean=input_tokens_mean, output_tokens_mean=output_tokens_mean,
        client=ClientStats(cpu_pct=None, event_loop_lag_ms_p99=None, achieved_concurrency=None, valid=True),
        samples=kept or None, notes=(note,),
    )


def missing_fields(levels: Sequence[BenchLevel]) -> list[str]:
    """What no level of the import has: no per-request samples of a family, no value of a metric."""
    out = []
    for fam in FAMILIES:
        if not any(lv.samples and lv.samples.get(fam) for lv in levels):
            out.append(f"samples.{fam}")
        for stat in ("p50", "p99"):
            if all(getattr(getattr(lv, fam), stat) is None for lv in levels):
                out.append(f"{fam}.{stat}")
    for key in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "goodput_requests_per_s"):
        if all(getattr(lv, key) is None for lv in levels):
            out.append(key)
    out.append("repeats")
    out.append("host (hardware)")
    return out


_ENDPOINTS = {"completions": "completions", "/v1/completions": "completions", "v1/completions": "completions",
              "text_completions": "completions", "openai": "completions", "vllm": "completions",
              "chat": "chat", "/v1/chat/completions": "chat", "v1/chat/completions": "chat",
              "chat_completions": "chat", "openai-chat": "chat"}
_SYNTHETIC = {"synthetic", "synthetic_text", "random", "synthetic_random"}


def _length(value: Any) -> int | float | None:
    """A length in tokens: a whole number as int (32.0 and 32 are one workload), else as given."""
    v = number(value)
    return int(v) if v is not None and v.is_integer() else v


def workload(*, endpoint: Any, streaming: Any, input_len: Any, output_len: Any, dataset: Any,
             turns: Any = None, **extra: Any) -> dict[str, Any]:
    """A peer's workload in triage's own vocabulary (as BenchRunConfig's fields), so that two tools' runs of one
    workload compare equal: the endpoint as `completions` or `chat` (the names bench's --endpoint takes),
    `streaming` as a bool, whole-number lengths as ints, every synthetic dataset as `synthetic`, and one turn
    when the source names none. Extra source-specific keys are kept only when the source set them."""
    ep = _ENDPOINTS.get(str(endpoint).strip().lower(), endpoint) if endpoint is not None else None
    name = str(dataset).strip().lower() if dataset is not None else None
    return {"endpoint": ep, "streaming": streaming if isinstance(streaming, bool) else None,
            "input_len": _length(input_len), "output_len": _length(output_len),
            "dataset": "synthetic" if name in _SYNTHETIC else dataset,
            "turns": int(turns) if number(turns) else 1,
            **{k: v for k, v in extra.items() if v is not None}}


def bench_report(*, source: str, model: str | None, url: str | None, workload: dict[str, Any],
                 levels: list[BenchLevel], extra_missing: Sequence[str] = ()) -> Report:
    missing = [*missing_fields(levels), *extra_missing]
    config = BenchRunConfig(**workload, source=source, model=model, url=url, missing_fields=tuple(missing),
                            notes=(f"imported from {source}; the source lacked: {', '.join(missing)}",))
    return new_report(ReportKind.BENCH, UNKNOWN_HOST, Target(url=url, engine=None, model=model),
                      bench=BenchSection(config=config, levels=tuple(levels)))
