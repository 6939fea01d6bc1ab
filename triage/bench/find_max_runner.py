"""The bench runner for `--find-max`: the same levels as a sweep (same prompts, warmup, server and GPU
watch, validity verdict), but the loads come from find_max.search instead of a list. Every level it runs
is a normal level of the report; the search's own account goes to `bench.summary.find_max`."""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable

import httpx

from triage.bench.aio import cancel_all
from triage.bench.client import RequestOptions
from triage.bench.find_max import FindMaxResult, FindMaxSpec, Measured, Probe, search
from triage.bench.level_runner import BenchRunner
from triage.bench.pool import ConnectionPool
from triage.bench.preflight import preflight
from triage.bench.run_config import LevelSpec
from triage.bench.server_scrape import GpuSampler
from triage.core.report import BenchLevel, BenchSection, level_name


def measured_from(level: BenchLevel, load: float, seconds: float) -> Measured:
    n = level.requests.completed + level.requests.failed
    met = round((level.slo_attainment_pct or 0.0) * n / 100.0)
    return Measured(load=load, num_measured=n, num_met_slo=met, num_failed=level.requests.failed,
                    client_bottleneck=not level.client.valid, client_reason=level.client.invalid_reason,
                    level=level_name(level), requests_sent=n, duration_s=seconds)


class FindMaxRunner(BenchRunner):
    def __init__(self, *args, find_max: FindMaxSpec, progress: Callable[[Probe, FindMaxResult], None] | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.find_max = find_max
        self.progress = progress or (lambda probe, result: None)
        self.result: FindMaxResult | None = None
        self.stopping = threading.Event()  # Ctrl-C: the search thread asks for no further level
        self.measuring: list[asyncio.Task] = []

    def section(self) -> BenchSection:
        section = super().section()
        if self.result is None:
            return section
        summary = dict(section.summary or {})
        summary["find_max"] = {**self.result.to_dict(), "slo": dict(self.cfg.slo or {})}
        return dataclasses.replace(section, summary=summary)

    def _pool_size(self) -> int:
        return int(self.find_max.limit) if self.find_max.mode == "concurrency" else self.cfg.max_in_flight

    async def _run(self, pool: ConnectionPool, client: httpx.AsyncClient, scraper: httpx.AsyncClient) -> BenchSection:
        base = self.cfg
        self.info = info = await preflight(client, pool, base)
        opts = RequestOptions(endpoint=base.endpoint, model=info.model, send_ignore_eos=info.send_ignore_eos,
                              continuous_usage=info.continuous_usage, request_id_header=base.request_id_header)
        first = self._spec(self.find_max.start)
        self.cfg = dataclasses.replace(base, levels=(first,))
        warmup_items, _ = self._prompts(info)
        if base.warmup:
            await self._warmup(pool, opts, warmup_items)
        self.idle_connects = list(pool.connects)
        gpu, gpu_reason = GpuSampler.create(base.gpu_sample_interval_s, nvml=self.nvml)
        if gpu_reason:
            self.notes.append(gpu_reason)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        # search() is synchronous; it runs in a worker thread and asks this event loop for each level.
        def measure(load: float) -> Measured:
            if self.stopping.is_set():
                raise asyncio.CancelledError
            future = asyncio.run_coroutine_threadsafe(self._measure(pool, scraper, opts, info, load, gpu), loop)
            return future.result()

        def report(probe: Probe, result: FindMaxResult) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (probe, result))

        def requests_at(load: float) -> int:
            return base.requests_for(self._spec(load)) or 0

        task = loop.run_in_executor(None, lambda: search(measure, self.find_max, report, requests_at))
        try:
            await self._follow(task, queue)
        except asyncio.CancelledError:  # Ctrl-C: the level in flight is kept (partial), as in a sweep
            self.stopping.set()
            await cancel_all(t for t in self.measuring if not t.done())
            await asyncio.gather(task, return_exceptions=True)  # the search thread ends at its next level
            raise
        while not queue.empty():
            self.progress(*queue.get_nowait())
        self.result = await task
        self.cfg = dataclasses.replace(base, levels=tuple(self._spec_of(lv) for lv in self.levels))
        return self.section()

    async def _follow(self, task: asyncio.Future, queue: asyncio.Queue) -> None:
        """Print the search's progress until it is done."""
        while not task.done():
            try:
                probe, result = await asyncio.wait_for(queue.get(), timeout=0.2)
                self.progress(probe, result)
            except asyncio.TimeoutError:
                continue

    def _spec(self, load: float) -> LevelSpec:
        if self.find_max.mode == "concurrency":
            return LevelSpec(concurrency=int(load))
        return LevelSpec(request_rate=round(load, 4))

    @staticmethod
    def _spec_of(level: BenchLevel) -> LevelSpec:
        return LevelSpec(concurrency=level.concurrency, request_rate=level.request_rate, input_len=level.input_len)

    async def _measure(self, pool, scraper, opts, info, load: float, gpu) -> Measured:
        if self.stopping.is_set():
            raise asyncio.CancelledError
        self.measuring.append(asyncio.current_task())  # type: ignore[arg-type]
        spec = self._spec(load)
        # Fresh prompts per level (seeded by its position), as a sweep would draw them.
        self.cfg = dataclasses.replace(self.cfg, levels=(spec,), warmup=0, seed=self.cfg.seed + 1)
        _, slices = self._prompts(info)
        started = time.perf_counter()
        level = await self._level(pool, scraper, opts, spec, slices[0], gpu)
        self.levels.append(level)
        self.observer.level_finished(level)
        return measured_from(level, load, time.perf_counter() - started)
