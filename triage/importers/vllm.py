"""vLLM `vllm bench serve --save-result` JSON (one file per run, one load level).

Keys, from vLLM's own source (vllm-project/vllm, vllm/benchmarks/serve.py at 009e6d4a1cd6): `main` writes
date, endpoint_type, backend, label, model_id, tokenizer_id, num_prompts, request_rate ("inf" or a number),
burstiness, max_concurrency (and ramp_up_* when set), then `benchmark()`'s result: duration, completed,
failed, total_input_tokens, total_output_tokens, request_throughput, request_goodput (None without
--goodput), output_throughput, total_token_throughput, latencies and queue_times (seconds, per request),
max_output_tokens_per_s, max_concurrent_requests, rtfx, and per metric in --percentile-metrics
(default ttft,tpot,itl) mean_/median_/std_/pNN_<metric>_ms (pNN from --metric-percentiles, default 99).
Only with --save-detailed: input_lens, output_lens, start_times, ttfts and itls (seconds), generated_texts,
errors. TPOT per request is (latency - ttft) / (output_len - 1), vLLM's own definition.
"""
from __future__ import annotations

from typing import Any

from triage.core.report import LatencyStats, Report
from triage.importers.common import NONE_STATS, bench_report, make_level, number, workload

SOURCE = "vllm bench serve --save-result"
MARKERS = ("request_throughput", "output_throughput", "completed", "duration")


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and all(k in data for k in MARKERS) and (
        "mean_ttft_ms" in data or "mean_e2el_ms" in data or "backend" in data or "endpoint_type" in data)


def _summary(data: dict[str, Any], name: str) -> LatencyStats:
    mean = number(data.get(f"mean_{name}_ms"))
    if mean is None:
        return NONE_STATS
    return LatencyStats(mean, number(data.get(f"std_{name}_ms")), None, number(data.get(f"median_{name}_ms")),
                        number(data.get(f"p90_{name}_ms")), number(data.get(f"p95_{name}_ms")),
                        number(data.get(f"p99_{name}_ms")), None)


def _ms(values: Any) -> list[float]:
    return [v * 1000.0 for v in values if isinstance(v, (int, float))] if isinstance(values, list) else []


def convert(data: dict[str, Any]) -> Report:
    errors = data.get("errors") if isinstance(data.get("errors"), list) else None
    ok = [not e for e in errors] if errors else None

    def kept(values: list | None) -> list | None:
        if not isinstance(values, list):
            return None
        return [v for v, good in zip(values, ok, strict=False) if good] if ok and len(ok) == len(values) else values

    ttfts, lats = kept(data.get("ttfts")), kept(data.get("latencies"))
    outs, itls = kept(data.get("output_lens")), kept(data.get("itls"))
    samples: dict[str, list[float]] = {"ttft_ms": _ms(ttfts or []), "e2e_ms": _ms(lats or [])}
    if ttfts and lats and isinstance(outs, list) and len(outs) == len(ttfts) == len(lats):
        samples["tpot_ms"] = [1000.0 * (lat - t) / (n - 1) for t, lat, n in zip(ttfts, lats, outs, strict=False)
                              if isinstance(n, int) and n > 1]
    if isinstance(itls, list):
        samples["itl_ms"] = [1000.0 * v for per in itls if isinstance(per, list) for v in per]
    rate = data.get("request_rate")
    concurrency = data.get("max_concurrency") if isinstance(data.get("max_concurrency"), int) else None
    rate_value = number(rate) if concurrency is None else None
    completed = int(data.get("completed") or 0)
    level = make_level(
        concurrency=concurrency, rate=rate_value, duration_s=number(data.get("duration")), completed=completed,
        failed=int(data.get("failed") or 0), samples=samples,
        summaries={"ttft_ms": _summary(data, "ttft"), "tpot_ms": _summary(data, "tpot"),
                   "itl_ms": _summary(data, "itl"), "e2e_ms": _summary(data, "e2el")},
        rates={"output_tokens_per_s": number(data.get("output_throughput")),
               "total_tokens_per_s": number(data.get("total_token_throughput")),
               "requests_per_s": number(data.get("request_throughput")),
               "goodput_requests_per_s": number(data.get("request_goodput"))},
        input_tokens_mean=(data["total_input_tokens"] / completed) if completed and number(data.get("total_input_tokens")) else None,
        output_tokens_mean=(data["total_output_tokens"] / completed) if completed and number(data.get("total_output_tokens")) else None,
        note=f"imported from {SOURCE}")
    in_lens = data.get("input_lens") if isinstance(data.get("input_lens"), list) else None
    # vllm bench serve always streams (its OpenAI backends send stream=True).
    work = workload(endpoint=data.get("endpoint_type") or data.get("backend"), streaming=True,
                    input_len=round(sum(in_lens) / len(in_lens)) if in_lens else None,
                    output_len=round(level.output_tokens_mean) if level.output_tokens_mean else None,
                    dataset=data.get("dataset_name") or data.get("label"),
                    ramp=data.get("ramp_up_strategy"),
                    # burstiness shapes the arrivals of a finite --request-rate only
                    burstiness=data.get("burstiness") if rate_value is not None else None)
    extra = [] if ttfts else ["per-request ttfts/itls/output_lens (run vllm bench serve with --save-detailed)"]
    return bench_report(source=SOURCE, model=data.get("model_id"), url=None, workload=work, levels=[level],
                        extra_missing=extra)
