"""`triage watch --print-alert-rules`: a Prometheus rules file for a fleet.

- `triage-findings`: one alert per finding severity, on `triage_finding` from `triage watch`;
- `triage-signals`: recording rules for the key signals (triage's own, and vLLM's TTFT p99, request
  rate and prompt length straight from the engine's /metrics);
- `triage-regressions`: 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide''s "compare now with a 7-day offset": TTFT p99 more than 25% above the
  same window a week ago while traffic did not grow by half, and output throughput 20% below last week's
  at the same request rate. They read the engine's raw series with `offset 7d`, so they work from the
  first day Prometheus holds a week of history (no recorded history needed).

Every vLLM metric name here comes from the engine-truth tables (triage/engines/truth), as exposed:
counters with `_total`, histograms with `_bucket`.
"""
from __future__ import annotations

from typing import Any

import yaml

import triage.engines.truth as truth
from triage.engines import assumed

TTFT_RISE_X = 1.25          # alert when TTFT p99 is this many times last week's
TRAFFIC_GROWTH_X = 1.5      # ... unless the request rate grew this much (then traffic explains it)
THROUGHPUT_DROP_X = 0.8     # alert when output tokens/s fall below this share of last week's ...
SAME_TRAFFIC_X = 0.9        # ... while the request rate is at least this share of last week's
SEVERITY_FOR = {"critical": "1m", "high": "5m", "medium": "15m", "low": "1h", "info": "6h"}
BY = "instance, model_name"


_ENGINE = assumed()   # the rules are written for vLLM's series (triage.engines.registry)


def vllm_series(name: str) -> str:
    """A vLLM metric as Prometheus stores it, checked against the newest vLLM table."""
    newest = truth.newest(_ENGINE.name)
    kind = truth.metric_names(_ENGINE.name, newest).get(name)
    if kind is None:
        raise KeyError(f"{name} is not a metric of {_ENGINE.display} {newest}")
    if kind == "counter":
        return name if name.endswith("_total") else name + "_total"
    return name + "_bucket" if kind == "histogram" else name


def engine_series(signal: str) -> str:
    """The engine's own series for one of triage's signals (its metric map: `ttft_s`, `generation_tokens_total`),
    as Prometheus stores it."""
    metrics = _ENGINE.metrics
    names = metrics.histograms.get(signal) or metrics.signals[signal].names
    return vllm_series(names[0].removesuffix("_total"))


def ttft_p99(offset: str = "") -> str:
    off = f" offset {offset}" if offset else ""
    return f"histogram_quantile(0.99, sum by (le, {BY}) (rate({engine_series('ttft_s')}[5m]{off})))"


def per_second(signal: str, offset: str = "") -> str:
    off = f" offset {offset}" if offset else ""
    return f"sum by ({BY}) (rate({engine_series(signal)}[5m]{off}))"


def finding_alerts() -> list[dict[str, Any]]:
    return [{
        "alert": f"TriageFinding{sev.capitalize()}",
        "expr": f'max by (code, engine, model, instance) (triage_finding{{severity="{sev}"}}) == 1',
        "for": wait,
        "labels": {"severity": sev},
        "annotations": {
            "summary": f"triage {{{{ $labels.code }}}} ({sev}) on {{{{ $labels.instance }}}}",
            "description": "Run `triage diagnose --url <this server>` or `triage rules explain {{ $labels.code }}` "
                           "for the evidence and the fix.",
        },
    } for sev, wait in SEVERITY_FOR.items()]


def recording_rules() -> list[dict[str, Any]]:
    return [
        {"record": "triage:kv_cache_usage_ratio:max5m", "expr": "max_over_time(triage_kv_cache_usage_ratio[5m])"},
        {"record": "triage:requests_waiting:max5m", "expr": "max_over_time(triage_requests_waiting[5m])"},
        {"record": "triage:preemptions_per_second:avg5m",
         "expr": "avg_over_time(triage_preemptions_per_second[5m])"},
        {"record": "triage:gpu_sm_clock_ratio:min5m",
         "expr": "min_over_time((triage_gpu_sm_clock_mhz / triage_gpu_sm_clock_max_mhz)[5m:])"},
        {"record": "triage:vllm_ttft_p99_seconds:5m", "expr": ttft_p99()},
        {"record": "triage:vllm_requests_per_second:5m", "expr": per_second("num_requests_finished_total")},
        {"record": "triage:vllm_prompt_tokens_per_request:5m",
         "expr": f"{per_second('prompt_tokens_total')} / {per_second('num_requests_finished_total')}"},
        {"record": "triage:vllm_generation_tokens_per_second:5m", "expr": per_second("generation_tokens_total")},
    ]


def regression_alerts() -> list[dict[str, Any]]:
    rate_now, rate_then = per_second("num_requests_finished_total"), per_second("num_requests_finished_total", "7d")
    gen_now, gen_then = per_second("generation_tokens_total"), per_second("generation_tokens_total", "7d")
    return [
        {"alert": "TriageTTFTRegressionWeekOverWeek",
         "expr": f"({ttft_p99()} > {TTFT_RISE_X} * {ttft_p99('7d')}) and ({rate_now} < {TRAFFIC_GROWTH_X} * {rate_then})",
         "for": "15m", "labels": {"severity": "high"},
         "annotations": {"summary": "TTFT p99 on {{ $labels.instance }} is more than 25% above the same time last "
                                    "week, and traffic does not explain it",
                         "description": "Run `triage diagnose --prometheus <this Prometheus> --against 7d` to see "
                                        "what changed."}},
        {"alert": "TriageThroughputRegressionWeekOverWeek",
         "expr": f"({gen_now} < {THROUGHPUT_DROP_X} * {gen_then}) and ({rate_now} >= {SAME_TRAFFIC_X} * {rate_then})",
         "for": "30m", "labels": {"severity": "medium"},
         "annotations": {"summary": "Output tokens/s on {{ $labels.instance }} are 20% below last week's at the "
                                    "same request rate",
                         "description": "Seed 003 case 2: check preemptions, KV usage at idle and RSS (rule ENG006)."}},
    ]


def rules_document() -> dict[str, Any]:
    return {"groups": [
        {"name": "triage-findings", "rules": finding_alerts()},
        {"name": "triage-signals", "interval": "1m", "rules": recording_rules()},
        {"name": "triage-regressions", "rules": regression_alerts()},
    ]}


def rules_yaml() -> str:
    header = ("# Prometheus rules from `triage watch --print-alert-rules` (docs/WATCH.md).\n"
              "# Check with: promtool check rules <this file>\n")
    return header + yaml.safe_dump(rules_document(), sort_keys=False, width=200)
