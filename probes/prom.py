"""The one Prometheus text parser and normaliser, shared by `triage diagnose` and `triage bench`.

Four name sets become one engine-neutral model (`EngineMetrics`):
- vLLM V1: `vllm:*` with `model_name` and `engine` labels, `kv_cache_usage_perc` (older V1:
  `gpu_cache_usage_perc`), `prefix_cache_{queries,hits}_total`, `inter_token_latency_seconds`;
- vLLM V0: `vllm:gpu_cache_usage_perc`, `vllm:time_per_output_token_seconds`, no `engine` label;
- SGLang: `sglang:token_usage`, `num_running_reqs`, `num_queue_reqs`, `cache_hit_rate`, ...;
- TGI: `tgi_queue_size`, `tgi_batch_current_size`, `tgi_request_*` histograms.

Pure functions: text in, dataclasses out; the window over two scrapes is probes/metrics_window.py. `*_created` samples are creation timestamps of
counters, not values, and are dropped. A metric split over label sets (one per engine index, data
parallel rank ...) is summed; fractions are taken at their maximum instead.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

HISTOGRAM_KEYS = ("ttft_s", "itl_s", "e2e_s", "queue_time_s", "prefill_time_s", "decode_time_s")

# Labels that say *where* a value came from, not *what* it is: dropped from cache_config.
_ORIGIN_LABELS = frozenset({"model_name", "engine", "name", "pid", "tp_rank", "dp_rank", "pp_rank"})


@dataclass(frozen=True, slots=True)
class PromSample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class MetricsSample:
    """One scrape: every sample except `*_created`, plus the declared type of each family."""

    samples: tuple[PromSample, ...] = ()
    types: Mapping[str, str] = field(default_factory=dict)
    num_bad_lines: int = 0

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def series(self, name: str, **label_filter: str) -> list[PromSample]:
        return [s for s in self.samples if s.name == name
                and all(s.labels.get(k) == v for k, v in label_filter.items())]


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative buckets [(upper bound `le`, cumulative count)], sorted, `+Inf` last."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class EngineMetrics:
    """One scrape in engine-neutral terms. None means the engine does not export that value."""

    engine: str | None
    model_name: str | None = None
    kv_cache_usage_frac: float | None = None
    num_requests_running: float | None = None
    num_requests_waiting: float | None = None
    num_requests_swapped: float | None = None
    num_preemptions_total: float | None = None
    prefix_cache_queries_total: float | None = None
    prefix_cache_hits_total: float | None = None
    prefix_cache_hit_rate_gauge: float | None = None     # engines that only export a ratio (SGLang, V0)
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    num_requests_finished_total: float | None = None
    spec_decode_accepted_tokens_total: float | None = None
    spec_decode_draft_tokens_total: float | None = None
    spec_decode_num_drafts_total: float | None = None
    spec_decode_acceptance_rate_gauge: float | None = None
    spec_decode_mean_accept_length: float | None = None  # SGLang's spec_accept_length gauge
    kv_cache_capacity_tokens: float | None = None
    batch_occupancy_mean: float | None = None            # llama.cpp: busy slots per decode call
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    cache_config: Mapping[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Parsing


# A sample value outside this range, NaN or infinite is "not measured": no engine counter comes near
# 1e15 (a quadrillion tokens), and a float beyond it has lost the integer precision a delta needs.
MAX_ABS_VALUE = 1e15


def _value(raw: object) -> float | None:
    try:
        value = float(raw)   # type: ignore[arg-type]
    except (OverflowError, ValueError, TypeError):
        return None
    return value if math.isfinite(value) and abs(value) <= MAX_ABS_VALUE else None


def _families(text: str) -> tuple[list[PromSample], dict[str, str], int]:
    """(samples, declared types, samples dropped for an unusable value)."""
    samples: list[PromSample] = []
    types: dict[str, str] = {}
    dropped = 0
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            value = _value(s.value)
            if value is None:
                dropped += 1
                continue
            samples.append(PromSample(s.name, dict(s.labels), value))
    return samples, types, dropped


_PARSE_ERRORS = (ValueError, TypeError, IndexError, KeyError, OverflowError, RecursionError)


def parse_metrics(text: str) -> MetricsSample:
    """Parse Prometheus text exposition. A malformed line, or a sample whose value is NaN, infinite or
    absurd, is skipped and counted in `num_bad_lines`, never fatal."""
    try:
        samples, types, dropped = _families(text)
        return MetricsSample(tuple(samples), types, dropped)
    except _PARSE_ERRORS:
        pass
    # Slow path: the text has bad lines. Keep every line that parses on its own.
    samples, types, bad = [], {}, 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            parts = stripped.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        try:
            more, _, dropped = _families(stripped + "\n")
            samples.extend(more)
            bad += dropped
        except _PARSE_ERRORS:
            bad += 1
    return MetricsSample(tuple(samples), types, bad)


# ---------------------------------------------------------------------------------------------
# Engine detection

_V1_ONLY = ("vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total", "vllm:inter_token_latency_seconds_count",
            "vllm:spec_decode_num_drafts_total", "vllm:request_prefill_kv_computed_tokens_count")


def detect_engine(sample: MetricsSample) -> str | None:
    """"vllm" (V1) | "vllm-v0" | "sglang" | "tgi" | "llama.cpp" | "lmdeploy" | "trtllm", or None."""
    names = sample.names()
    if any(n.startswith("vllm:") for n in names):
        has_engine_label = any("engine" in s.labels for s in sample.samples if s.name.startswith("vllm:"))
        if has_engine_label or any(n in names for n in _V1_ONLY):
            return "vllm"
        return "vllm-v0"
    if any(n.startswith("sglang:") for n in names):
        return "sglang"
    if any(n.startswith("tgi_") for n in names):
        return "tgi"
    from triage.probes.prom_more_engines import NORMALISERS

    for prefix, engine, _ in NORMALISERS:
        if any(n.startswith(prefix) for n in names):
            return engine
    return None


# ---------------------------------------------------------------------------------------------
# Normalisation


def _sum(sample: MetricsSample, names: Sequence[str], **labels: str) -> float | None:
    """The first name present, summed over its label sets; a sum beyond the sane range is not measured."""
    for name in names:
        series = sample.series(name, **labels)
        if series:
            return _value(sum(s.value for s in series))
    return None


def _max(sample: MetricsSample, names: Sequence[str]) -> float | None:
    for name in names:
        series = sample.series(name)
        if series:
            return float(max(s.value for s in series))
    return None


def _mean(sample: MetricsSample, names: Sequence[str]) -> float | None:
    for name in names:
        series = sample.series(name)
        if series:
            return float(sum(s.value for s in series) / len(series))
    return None


def _histogram(sample: MetricsSample, bases: Sequence[str], **labels: str) -> Histogram | None:
    """The first histogram base name present, its buckets summed per `le` over label sets."""
    for base in bases:
        bucket_series = sample.series(f"{base}_bucket", **labels)
        count = _sum(sample, [f"{base}_count"], **labels)
        if not bucket_series and count is None:
            continue
        per_le: dict[float, float] = {}
        for s in bucket_series:
            try:
                le = float(s.labels.get("le", "nan"))
            except ValueError:
                continue
            if math.isnan(le):
                continue
            per_le[le] = per_le.get(le, 0.0) + s.value
        total = _sum(sample, [f"{base}_sum"], **labels)
        buckets = tuple(sorted(per_le.items()))
        if count is None:
            count = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else 0.0
        return Histogram(buckets=buckets, count=count, sum=total if total is not None else 0.0)
    return None


def _coerce(value: str) -> Any:
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null", ""):
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _cache_config(sample: MetricsSample, name: str) -> dict[str, Any]:
    series = sample.series(name)
    if not series:
        return {}
    return {k: _coerce(v) for k, v in sorted(series[0].labels.items()) if k not in _ORIGIN_LABELS}


def _model_name(sample: MetricsSample, prefix: str) -> str | None:
    names = sorted({s.labels["model_name"] for s in sample.samples
                    if s.name.startswith(prefix) and s.labels.get("model_name")})
    if not names:
        return None
    return names[0] if len(names) == 1 else ", ".join(names)


def _vllm(sample: MetricsSample, engine: str) -> EngineMetrics:
    v = "vllm:"
    return EngineMetrics(
        engine=engine,
        model_name=_model_name(sample, v),
        kv_cache_usage_frac=_max(sample, [v + "kv_cache_usage_perc", v + "gpu_cache_usage_perc"]),
        num_requests_running=_sum(sample, [v + "num_requests_running"]),
        num_requests_waiting=_sum(sample, [v + "num_requests_waiting"]),
        num_requests_swapped=_sum(sample, [v + "num_requests_swapped"]),
        num_preemptions_total=_sum(sample, [v + "num_preemptions_total"]),
        prefix_cache_queries_total=_sum(sample, [v + "prefix_cache_queries_total",
                                                 v + "gpu_prefix_cache_queries_total"]),
        prefix_cache_hits_total=_sum(sample, [v + "prefix_cache_hits_total", v + "gpu_prefix_cache_hits_total"]),
        prefix_cache_hit_rate_gauge=_mean(sample, [v + "gpu_prefix_cache_hit_rate"]),
        prompt_tokens_total=_sum(sample, [v + "prompt_tokens_total"]),
        generation_tokens_total=_sum(sample, [v + "generation_tokens_total"]),
        num_requests_finished_total=_sum(sample, [v + "request_success_total"]),
        spec_decode_accepted_tokens_total=_sum(sample, [v + "spec_decode_num_accepted_tokens_total"]),
        spec_decode_draft_tokens_total=_sum(sample, [v + "spec_decode_num_draft_tokens_total"]),
        spec_decode_num_drafts_total=_sum(sample, [v + "spec_decode_num_drafts_total"]),
        spec_decode_acceptance_rate_gauge=_mean(sample, [v + "spec_decode_draft_acceptance_rate"]),
        histograms=_present({
            "ttft_s": _histogram(sample, [v + "time_to_first_token_seconds"]),
            "itl_s": _histogram(sample, [v + "inter_token_latency_seconds", v + "time_per_output_token_seconds"]),
            "e2e_s": _histogram(sample, [v + "e2e_request_latency_seconds"]),
            "queue_time_s": _histogram(sample, [v + "request_queue_time_seconds"]),
            "prefill_time_s": _histogram(sample, [v + "request_prefill_time_seconds"]),
            "decode_time_s": _histogram(sample, [v + "request_decode_time_seconds"]),
        }),
        cache_config=_cache_config(sample, v + "cache_config_info"),
    )


def _sglang(sample: MetricsSample) -> EngineMetrics:
    s = "sglang:"
    prompt = _sum(sample, [s + "prompt_tokens_total"])
    cached = _sum(sample, [s + "cached_tokens_total"])
    return EngineMetrics(
        engine="sglang",
        model_name=_model_name(sample, s),
        kv_cache_usage_frac=_max(sample, [s + "token_usage"]),
        num_requests_running=_sum(sample, [s + "num_running_reqs"]),
        num_requests_waiting=_sum(sample, [s + "num_queue_reqs"]),
        # Preemption is "retraction" in SGLang; num_retracted_reqs is a per-batch gauge, not a count.
        num_preemptions_total=_sum(sample, [s + "num_retracted_requests_total"]),
        prefix_cache_queries_total=prompt if cached is not None else None,
        prefix_cache_hits_total=cached,
        prefix_cache_hit_rate_gauge=_mean(sample, [s + "cache_hit_rate"]),
        prompt_tokens_total=prompt,
        generation_tokens_total=_sum(sample, [s + "generation_tokens_total"]),
        num_requests_finished_total=_sum(sample, [s + "num_requests_total"]),
        spec_decode_mean_accept_length=_mean(sample, [s + "spec_accept_length"]),
        spec_decode_acceptance_rate_gauge=_mean(sample, [s + "spec_accept_rate"]),  # metrics/collector.py
        kv_cache_capacity_tokens=_sum(sample, [s + "max_total_num_tokens"]),
        histograms=_present({
            "ttft_s": _histogram(sample, [s + "time_to_first_token_seconds"]),
            "itl_s": _histogram(sample, [s + "inter_token_latency_seconds", s + "time_per_output_token_seconds"]),
            "e2e_s": _histogram(sample, [s + "e2e_request_latency_seconds"]),
            "queue_time_s": _histogram(sample, [s + "queue_time_seconds"]),
        }),
    )


def _tgi(sample: MetricsSample) -> EngineMetrics:
    input_len = _histogram(sample, ["tgi_request_input_length"])
    generated = _histogram(sample, ["tgi_request_generated_tokens"])
    # TGI's KV signal: the running batch's tokens over its token budget (claims tgi.batch-current-max-tokens,
    # tgi.batch-max-total-tokens); the budget is what bounds a TGI batch.
    batch_tokens = _max(sample, ["tgi_batch_current_max_tokens"])
    budget = _max(sample, ["tgi_batch_max_total_tokens"])
    return EngineMetrics(
        engine="tgi",
        kv_cache_usage_frac=min(1.0, batch_tokens / budget) if batch_tokens is not None and budget else None,
        kv_cache_capacity_tokens=budget,
        num_requests_running=_sum(sample, ["tgi_batch_current_size"]),
        num_requests_waiting=_sum(sample, ["tgi_queue_size"]),
        # TGI counts tokens only inside per-request histograms: their sums are the token totals.
        prompt_tokens_total=input_len.sum if input_len is not None else None,
        generation_tokens_total=generated.sum if generated is not None else None,
        # prometheus-client's parser appends `_total` to a counter sample that lacks it.
        num_requests_finished_total=_sum(sample, ["tgi_request_success_total", "tgi_request_success"]),
        histograms=_present({
            # TGI has no TTFT histogram; its per-request mean time per token stands in for ITL.
            "itl_s": _histogram(sample, ["tgi_request_mean_time_per_token_duration"]),
            "e2e_s": _histogram(sample, ["tgi_request_duration"]),
            "queue_time_s": _histogram(sample, ["tgi_request_queue_duration"]),
        }),
    )


def _present(hists: Mapping[str, Histogram | None]) -> dict[str, Histogram]:
    return {k: h for k, h in hists.items() if h is not None}


def normalise(sample: MetricsSample) -> EngineMetrics:
    """The scrape in engine-neutral terms; an unknown exposition gives an all-None EngineMetrics."""
    engine = detect_engine(sample)
    if engine in ("vllm", "vllm-v0"):
        return _vllm(sample, engine)
    if engine == "sglang":
        return _sglang(sample)
    if engine == "tgi":
        return _tgi(sample)
    from triage.probes.prom_more_engines import NORMALISERS

    for _, name, normaliser in NORMALISERS:
        if engine == name:
            return normaliser(sample)
    return EngineMetrics(engine=None)
