"""Watching the server and the GPU while a level runs.

ServerScraper scrapes /metrics at the start, every `interval_s`, and at the end. It only stores the raw text
while the level runs and parses afterwards (with the one parser, probes/prom.py), so scraping costs the event
loop little. GpuSampler reads NVML in a thread. Both degrade to None with a reason; neither fails a run.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import httpx

from triage.bench.aio import cancel_and_wait
from triage.core.bench_data import LevelGpu, LevelServer
from triage.core.probe_data import Histograms, HistogramWindow
from triage.probes.metrics_window import window_delta
from triage.probes.nvml import (
    GpuLost,
    NvmlReader,
    decode_clock_event_reasons,
    read_clock_events,
    read_utilization,
)
from triage.probes.prom import EngineMetrics, normalise, parse_metrics


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _max(values: list[float]) -> float | None:
    return max(values) if values else None


def _ms(seconds: float | None) -> float | None:
    return seconds * 1000.0 if seconds is not None else None


@dataclass(slots=True)
class ServerScraper:
    client: httpx.AsyncClient
    path: str = "/metrics"
    interval_s: float = 0.5
    texts: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _task: asyncio.Task | None = None
    # Each scrape parsed once, on first use, keyed by its perf_counter() time (the settle loop and the
    # summary read the same scrapes).
    _parsed: dict[float, EngineMetrics] = field(default_factory=dict)

    async def scrape(self) -> None:
        t = time.perf_counter()
        try:
            resp = await self.client.get(self.path)
        except httpx.HTTPError as e:
            self.errors.append(f"{type(e).__name__}: {e}"[:200])
            return
        if resp.status_code != 200:
            self.errors.append(f"HTTP {resp.status_code} from {self.path}")
            return
        self.texts.append((t, resp.text))

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.scrape()

    async def start(self) -> None:
        self.texts, self.errors, self._parsed = [], [], {}
        await self.scrape()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self, expected_finished: int = 0, settle_max_s: float = 1.0) -> None:
        """The last scrape. The client can see a stream's [DONE] a moment before the server counts the request
        (and its tokens), so with `expected_finished` (requests the client saw succeed) the last scrape is
        retaken, for at most `settle_max_s`, until the server's finished-requests counter has caught up."""
        await cancel_and_wait(self._task)
        self._task = None
        await self.scrape()
        deadline = time.perf_counter() + settle_max_s
        while expected_finished and time.perf_counter() < deadline:
            finished = self._finished_delta()
            if finished is None or finished >= expected_finished:
                return
            await asyncio.sleep(0.05)
            last = self.texts.pop()
            await self.scrape()
            if len(self.texts) == 0 or self.texts[-1][0] < last[0]:
                self.texts.append(last)  # the retake failed: keep what we had

    def _finished_delta(self) -> float | None:
        """Requests the server finished between the first and the last scrape (None if it does not say)."""
        if len(self.texts) < 2:
            return None
        first, last = (self._metrics(self.texts[i]).num_requests_finished_total for i in (0, -1))
        return last - first if first is not None and last is not None else None

    def cache_config(self) -> dict[str, Any]:
        """The server's cache_config_info labels (vLLM) from the last scrape; {} when it exports none."""
        return dict(self._metrics(self.texts[-1]).cache_config) if self.texts else {}

    def _metrics(self, scrape: tuple[float, str]) -> EngineMetrics:
        t, text = scrape
        if t not in self._parsed:
            self._parsed[t] = normalise(parse_metrics(text))
        return self._parsed[t]

    def summary(self, client_ttft_ms_mean: float | None) -> tuple[LevelServer | None, str | None]:
        """(the level's `server` dict, or None with the reason)."""
        return summarize_scrapes([t for t, _ in self.texts], [self._metrics(s) for s in self.texts],
                                 client_ttft_ms_mean, self.errors)


def server_summary(texts: list[tuple[float, str]], client_ttft_ms_mean: float | None,
                   errors: list[str] = ()) -> tuple[LevelServer | None, str | None]:
    """The level's server window from raw /metrics texts, (perf_counter time, text) each."""
    return summarize_scrapes([t for t, _ in texts], [normalise(parse_metrics(text)) for _, text in texts],
                             client_ttft_ms_mean, errors)


def summarize_scrapes(times_s: list[float], scrapes: list[EngineMetrics], client_ttft_ms_mean: float | None,
                      errors: list[str] = ()) -> tuple[LevelServer | None, str | None]:
    """The level's server window from parsed scrapes taken at `times_s`, or None with the reason."""
    if len(scrapes) < 2:
        why = errors[0] if errors else "fewer than two scrapes"
        return None, f"server metrics unavailable: {why}"
    if all(m.engine is None for m in scrapes):
        return None, "server metrics unavailable: /metrics has no vLLM, SGLang or TGI metric names"
    before, after, seen = scrapes[0], scrapes[-1], scrapes[1:-1]
    window_s = times_s[-1] - times_s[0]
    delta = window_delta(before, after, window_s, seen)
    # Gauges: the scrapes taken while the level ran; the first and last bracket it and are often idle.
    # Their max is window_delta's, over every scrape.
    during = seen or scrapes

    def gauge(attr: str) -> list[float]:
        return [v for v in (getattr(m, attr) for m in during) if v is not None]

    hist = delta.histograms or Histograms()

    def mean_s(h: HistogramWindow | None) -> float | None:
        return h.mean_s if h is not None else None

    ttft_h = hist.ttft_s
    server_ttft_ms = _ms(mean_s(hist.ttft_s))
    transfer = delta.kv_transfer
    return LevelServer(
        engine=after.engine, role=delta.role,
        kv_cache_usage_frac_mean=_mean(gauge("kv_cache_usage_frac")),
        kv_cache_usage_frac_max=delta.kv_cache_usage_frac_max,
        num_requests_running_mean=_mean(gauge("num_requests_running")),
        num_requests_running_max=delta.num_requests_running_max,
        num_requests_waiting_mean=_mean(gauge("num_requests_waiting")),
        num_requests_waiting_max=delta.num_requests_waiting_max,
        num_preemptions_delta=delta.num_preemptions_delta,
        prefix_cache_hit_rate=delta.prefix_cache_hit_rate,
        server_ttft_ms_mean=server_ttft_ms,
        server_ttft_ms_p50=_ms(ttft_h.p50_s if ttft_h else None),
        server_ttft_ms_p99=_ms(ttft_h.p99_s if ttft_h else None),
        server_queue_time_ms_mean=_ms(mean_s(hist.queue_time_s)),
        server_prefill_time_ms_mean=_ms(mean_s(hist.prefill_time_s)),
        server_decode_time_ms_mean=_ms(mean_s(hist.decode_time_s)),
        server_itl_ms_mean=_ms(mean_s(hist.itl_s)),
        server_e2e_ms_mean=_ms(mean_s(hist.e2e_s)),
        kv_transfer_ms_mean=_ms(transfer.time_mean_s if transfer is not None else None),
        client_minus_server_ttft_ms=(client_ttft_ms_mean - server_ttft_ms
                                     if client_ttft_ms_mean is not None and server_ttft_ms is not None else None),
        prompt_tokens_delta=delta.prompt_tokens_delta,
        generation_tokens_delta=delta.generation_tokens_delta,
        num_requests_finished_delta=delta.num_requests_finished_delta,
        window_s=window_s, num_scrapes=len(scrapes), num_scrape_errors=len(errors)), None


class GpuSampler:
    """Samples every GPU through NVML in a daemon thread. `nvml` is the pynvml module (injectable for tests).
    A field whose NVML call fails is left out of that sample; the others still count."""

    def __init__(self, nvml: Any, interval_s: float = 0.5):
        self.nvml = nvml
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: list[Any] = []
        self.lost: set[int] = set()

    @classmethod
    def create(cls, interval_s: float = 0.5, nvml: Any = None) -> tuple[GpuSampler | None, str | None]:
        """A sampler, or None with the reason (no pynvml, no driver, no GPU)."""
        if nvml is None:
            try:
                import pynvml as nvml  # noqa: PLC0415 - optional at runtime
            except ImportError:
                return None, "NVML unavailable: pynvml is not installed"
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return None, f"NVML unavailable: {e}"
        if not handles:
            return None, "NVML found no GPU"
        sampler = cls(nvml, interval_s)
        sampler._handles = handles
        return sampler, None

    def _read(self, index: int, handle: Any) -> dict[str, Any]:
        """One sample of one GPU through the gpu probe's readers: a field whose NVML call fails (NotSupported,
        NoPermission, an old binding) is left out of the sample, the clock-event reasons fall back to the
        older ThrottleReasons call, and a GPU that fell off the bus raises GpuLost."""
        r = NvmlReader(self.nvml)
        util_pct, _ = read_utilization(r, handle)
        memory = r.call("memory_used_bytes", "nvmlDeviceGetMemoryInfo", handle)
        power_mw = r.call("power_usage_w", "nvmlDeviceGetPowerUsage", handle)
        sm_mhz = r.call("sm_clock_mhz", "nvmlDeviceGetClockInfo", handle, self.nvml.NVML_CLOCK_SM)
        reasons, _source = read_clock_events(r, handle)
        values = {
            "utilization_gpu_pct": float(util_pct) if util_pct is not None else None,
            "memory_used_bytes": int(memory.used) if memory is not None else None,
            "power_usage_w": power_mw / 1000.0 if power_mw is not None else None,
            "sm_clock_mhz": float(sm_mhz) if sm_mhz is not None else None,
            "clock_event_reasons": reasons,
        }
        return {"index": index, **{k: v for k, v in values.items() if v is not None}}

    def sample_once(self) -> None:
        for i, handle in enumerate(self._handles):
            if i in self.lost:
                continue
            try:
                self.samples.append(self._read(i, handle))
            except GpuLost:
                self.lost.add(i)  # off the bus: its earlier samples stand, and the summary says it was lost

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self.samples = []
        self.lost = set()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="triage-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> LevelGpu | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        return gpu_summary(self.samples, self.lost)


def gpu_summary(samples: list[dict[str, Any]], lost: Collection[int] = ()) -> LevelGpu | None:
    """The level's GPU figures over every sample of every GPU, or None when there were no samples. `lost`: the
    GPUs that fell off the bus during the level."""
    if not samples:
        return None

    def values(key: str) -> list[float]:
        return [s[key] for s in samples if s.get(key) is not None]

    reasons: set[str] = set()
    for mask in values("clock_event_reasons"):
        reasons.update(decode_clock_event_reasons(int(mask)))
    return LevelGpu(
        utilization_gpu_pct_mean=_mean(values("utilization_gpu_pct")),
        utilization_gpu_pct_max=_max(values("utilization_gpu_pct")),
        memory_used_bytes_max=_max(values("memory_used_bytes")),
        power_usage_w_mean=_mean(values("power_usage_w")),
        sm_clock_mhz_mean=_mean(values("sm_clock_mhz")),
        clock_event_reasons_seen=tuple(sorted(reasons)), num_samples=len(samples),
        num_gpus=len({s["index"] for s in samples}), lost_gpu_indices=tuple(sorted(lost)))
