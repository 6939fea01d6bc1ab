"""GuideLLM `benchmarks.json` (one benchmark per load level), as GuideLLM 0.8.1 writes it: `metadata`
(guidellm_version), `config.spec` (backend with target, model and request_format; data; profile), and
`benchmarks[]`, each with `config.strategy` (type_ concurrent/synchronous/constant/poisson/throughput,
streams or rate), `metrics` ({successful: {mean, median, std_dev, min, max, percentiles: {p50, p90, ...}}}
for time_to_first_token_ms, time_per_output_token_ms, inter_token_latency_ms, request_latency (seconds),
requests_per_second, output_tokens_per_second, tokens_per_second) and `requests.successful[]` with the
per-request values (time_to_first_token_ms, time_per_output_token_ms, inter_token_latency_ms,
request_latency in seconds)."""
from __future__ import annotations

from typing import Any

from triage.core.report import LatencyStats, Report
from triage.importers.common import NONE_STATS, bench_report, make_level, number, workload

SOURCE = "GuideLLM benchmarks.json"
# GuideLLM per-request key -> (triage family, factor to ms)
PER_REQUEST = {"time_to_first_token_ms": ("ttft_ms", 1.0), "time_per_output_token_ms": ("tpot_ms", 1.0),
               "inter_token_latency_ms": ("itl_ms", 1.0), "request_latency": ("e2e_ms", 1000.0)}


def looks_like(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("benchmarks"), list)
            and (isinstance(data.get("metadata"), dict) and "guidellm_version" in data["metadata"]
                 or any(isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in data["benchmarks"])))


def _summary(metric: Any, scale: float) -> LatencyStats:
    ok = metric.get("successful") if isinstance(metric, dict) else None
    if not isinstance(ok, dict):
        return NONE_STATS
    pct = ok.get("percentiles") or {}

    def get(v: Any) -> float | None:
        n = number(v)
        return None if n is None else n * scale

    return LatencyStats(get(ok.get("mean")), get(ok.get("std_dev")), get(ok.get("min")), get(pct.get("p50")),
                        get(pct.get("p90")), get(pct.get("p95")), get(pct.get("p99")), get(ok.get("max")))


def _mean(metrics: dict[str, Any], key: str) -> float | None:
    ok = (metrics.get(key) or {}).get("successful") if isinstance(metrics.get(key), dict) else None
    return number(ok.get("mean")) if isinstance(ok, dict) else None


def _level(bench: dict[str, Any]):
    strategy = (bench.get("config") or {}).get("strategy") or {}
    kind = strategy.get("type_")
    concurrency = rate = None
    if kind == "synchronous":
        concurrency = 1
    elif kind in ("concurrent", "throughput"):
        concurrency = strategy.get("streams") or strategy.get("max_concurrency")
    else:
        rate = number(strategy.get("rate"))
    metrics = bench.get("metrics") or {}
    requests = bench.get("requests") or {}
    ok = [r for r in requests.get("successful") or [] if isinstance(r, dict)]
    samples: dict[str, list[float]] = {}
    for key, (family, scale) in PER_REQUEST.items():
        values = [number(r.get(key)) for r in ok]
        samples[family] = [v * scale for v in values if v is not None]
    totals = ((bench.get("scheduler_metrics") or {}).get("requests_made") or {})
    out_mean = _mean(metrics, "output_token_count")
    rps = _mean(metrics, "requests_per_second")
    return make_level(
        concurrency=int(concurrency) if concurrency is not None else None, rate=rate,
        duration_s=number(bench.get("duration")), completed=int(totals.get("successful", len(ok))),
        failed=int(totals.get("errored", 0)), samples=samples,
        summaries={family: _summary(metrics.get(key), scale) for key, (family, scale) in PER_REQUEST.items()},
        # GuideLLM's requests_per_second and tokens_per_second are time series over the run; their mean is
        # the run's rate. Its output_tokens_per_second is per request, so the level's rate is rps × tokens.
        rates={"output_tokens_per_s": rps * out_mean if rps is not None and out_mean is not None else None,
               "total_tokens_per_s": _mean(metrics, "tokens_per_second"),
               "requests_per_s": rps, "goodput_requests_per_s": None},
        input_tokens_mean=_mean(metrics, "prompt_token_count"), output_tokens_mean=out_mean,
        note=f"imported from {SOURCE}")


def convert(data: dict[str, Any]) -> Report:
    spec = (data.get("config") or {}).get("spec") or {}
    backend = spec.get("backend") or {}
    datasets = [d for d in spec.get("data") or [] if isinstance(d, dict)]
    d0 = datasets[0] if datasets else {}
    version = (data.get("metadata") or {}).get("guidellm_version", "?")
    levels = [_level(b) for b in data["benchmarks"] if isinstance(b, dict)]
    work = workload(endpoint=backend.get("request_format"), streaming=backend.get("stream"),
                    input_len=d0.get("prompt_tokens"), output_len=d0.get("output_tokens"), dataset=d0.get("kind"),
                    turns=d0.get("turns"), prefix=d0.get("prefix_buckets"))
    return bench_report(source=f"{SOURCE} (GuideLLM {version})", model=backend.get("model"),
                        url=backend.get("target"), workload=work, levels=levels)
