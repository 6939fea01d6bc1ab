"""How an engine's /metrics map to triage's engine-neutral signals: declared per engine, applied by
probes/prom.py. Pure data and the little arithmetic that combines series; no parsing here.

A signal is read with one of:
- `Read(how, names)`: the first name present, summed over its label sets ("sum"), or its largest ("max") or
  mean ("mean") value;
- `Ratio(num, den)`: num / den, capped at 1 (TGI's batch tokens over its token budget);
- `Plus(a, b)`: a + b when both are present (llama.cpp's uncached + cached prompt tokens);
- `HistSum(base)`: the sum of a histogram (TGI counts tokens only inside per-request histograms);
- `First(a, b, ...)`: the first reader that gives a value;
- `Given(reader, other)`: the reader's value only when signal `other` has one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class Sample(Protocol):
    def sum(self, names: tuple[str, ...]) -> float | None: ...
    def max(self, names: tuple[str, ...]) -> float | None: ...
    def mean(self, names: tuple[str, ...]) -> float | None: ...
    def hist_sum(self, base: str) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Read:
    how: str                      # sum | max | mean
    names: tuple[str, ...]

    def value(self, sample: Sample, done: Mapping[str, float | None]) -> float | None:
        return getattr(sample, self.how)(self.names)


@dataclass(frozen=True, slots=True)
class Ratio:
    num: Read
    den: Read

    def value(self, sample: Sample, done: Mapping[str, float | None]) -> float | None:
        n, d = self.num.value(sample, done), self.den.value(sample, done)
        return min(1.0, n / d) if n is not None and d else None


@dataclass(frozen=True, slots=True)
class Plus:
    a: Any
    b: Any

    def value(self, sample: Sample, done: Mapping[str, float | None]) -> float | None:
        x, y = self.a.value(sample, done), self.b.value(sample, done)
        return x + y if x is not None and y is not None else None


@dataclass(frozen=True, slots=True)
class HistSum:
    base: str

    def value(self, sample: Sample, done: Mapping[str, float | None]) -> float | None:
        return sample.hist_sum(self.base)


@dataclass(frozen=True, slots=True)
class First:
    readers: tuple[Any, ...]

    def value(self, sample: Sample, done: Mapping[str, float | None]) -> float | None:
        return next((v for v in (r.value(sample, done) for r in self.readers) if v is not None), None)


@dataclass(frozen=True, slots=True)
class Given:
    reader: Any
    other: str                    # a signal read before this one

    def value(self, sample: Sample, done: Mapping[str, float | None]) -> float | None:
        return self.reader.value(sample, done) if done.get(self.other) is not None else None


def s(*names: str) -> Read:
    return Read("sum", names)


def mx(*names: str) -> Read:
    return Read("max", names)


def mean(*names: str) -> Read:
    return Read("mean", names)


@dataclass(frozen=True)
class MetricMap:
    """One engine's /metrics in triage's terms. `signals` keys are EngineMetrics fields (a test checks),
    read in order, so a `Given` may refer to an earlier one. `histograms`: triage's key (ttft_s, itl_s, e2e_s,
    queue_time_s, prefill_time_s, decode_time_s) -> the engine's base names, the first present wins."""

    prefix: str                                   # every name starts with it; it identifies the engine
    signals: dict[str, Any] = field(default_factory=dict)
    histograms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    model_label: bool = False                     # the series carry model_name
    cache_config: str | None = None               # an info gauge whose labels are the cache configuration
    # The label to report ("vllm" | "vllm-v0"), from the metric names and the label names its series carry, when
    # one engine exports two generations.
    variant_fn: Callable[[set[str], set[str]], str] | None = None
    # Names read here (or in the engine's history queries) that no truth table holds -> the claims that show them
    # in the engine's source (a test checks every name is tabled or claimed).
    claims: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def read(self, sample: Sample) -> dict[str, float | None]:
        done: dict[str, float | None] = {}
        for name, reader in self.signals.items():
            done[name] = reader.value(sample, done)
        return done


def vllm_shaped(p: str, kv_usage: str, claims: tuple[str, ...]) -> MetricMap:
    """LMDeploy (lmdeploy/metrics/loggers.py) and TensorRT-LLM (tensorrt_llm/metrics/collector.py) export
    vLLM-shaped names under their own prefix, with their own KV-usage gauge and no preemption count; `claims` name
    every one of them (neither engine is tabled)."""
    names = (p + kv_usage, p + "num_requests_running", p + "num_requests_waiting", p + "prompt_tokens_total",
             p + "generation_tokens_total", *(p + h for h in ("time_to_first_token_seconds",
             "time_per_output_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds",
             "request_prefill_time_seconds", "request_decode_time_seconds")))
    return MetricMap(prefix=p, claims={n: claims for n in names}, signals={
        "kv_cache_usage_frac": mx(p + kv_usage),
        "num_requests_running": s(p + "num_requests_running"),
        "num_requests_waiting": s(p + "num_requests_waiting"),
        "prompt_tokens_total": s(p + "prompt_tokens_total"),
        "generation_tokens_total": s(p + "generation_tokens_total"),
    }, histograms={
        "ttft_s": (p + "time_to_first_token_seconds",), "itl_s": (p + "time_per_output_token_seconds",),
        "e2e_s": (p + "e2e_request_latency_seconds",), "queue_time_s": (p + "request_queue_time_seconds",),
        "prefill_time_s": (p + "request_prefill_time_seconds",), "decode_time_s": (p + "request_decode_time_seconds",),
    })
