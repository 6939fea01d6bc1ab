"""One bench run: preflight the server, warm up, run every level (and repeat), watch the server and GPU, judge
the client, and keep every finished level so that an interrupted run still reports what it measured."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from typing import Any, Protocol

import httpx
import numpy as np

from triage.bench import saturation
from triage.bench.client import RequestOptions, make_client, make_pool
from triage.bench.conversation import run_conversations, turn_stats
from triage.bench.fleet import FleetPool, fleet_summary, replica_stats
from triage.bench.level_extras import connection_stats, reasoning_stats, stopped_reason
from triage.bench.levels import LevelContext, LevelRun, run_closed, run_open
from triage.bench.pool import ConnectEvent, ConnectionPool
from triage.bench.preflight import ServerInfo, check_sweep_fits, check_turns_fit, preflight
from triage.bench.prompts import PromptItem, build, from_trace, synthetic
from triage.bench.ramp import run_linear, window_specs
from triage.bench.records import RecordSink, RequestRecord
from triage.bench.repeats import Parts as _Parts
from triage.bench.repeats import host_load_1m, merge_client, repeat_record
from triage.bench.run_config import BenchConfig, LevelSpec
from triage.bench.server_scrape import GpuSampler, ServerScraper
from triage.bench.stats import duration_s, summarize
from triage.bench.validity import ClientMeasurements, CpuMeter, LoopLagMonitor, verdict
from triage.core.drift import describe, drift_check
from triage.core.report import BenchLevel, BenchSection, level_name

SWEEP_SEED_STRIDE = 1_000_003  # seed offset between the prompt pools of an --input-len sweep's lengths
DURATION_POOL_PER_S = 8  # --duration: prompts generated per second per slot (reused after that, with a note)


class Observer(Protocol):
    def level_started(self, spec: LevelSpec, repeat: int, num_requests: int | None) -> None: ...
    def record(self, record: RequestRecord) -> None: ...
    def level_finished(self, level: BenchLevel) -> None: ...


class NullObserver:
    def level_started(self, spec: LevelSpec, repeat: int, num_requests: int | None) -> None:
        pass

    def record(self, record: RequestRecord) -> None:
        pass

    def level_finished(self, level: BenchLevel) -> None:
        pass


def _mean_ttft_ms(records: list[RequestRecord]) -> float | None:
    """The mean client TTFT of the measured requests that succeeded (summarize's ttft_ms.mean)."""
    ttft = [r.ttft_s * 1000.0 for r in records if not r.warmup and r.ok and r.ttft_s is not None]
    return float(np.mean(ttft)) if ttft else None


class BenchRunner:
    def __init__(self, cfg: BenchConfig, sink: RecordSink | None = None, observer: Observer | None = None,
                 nvml: Any = None):
        self.cfg = cfg
        self.sink = sink or RecordSink(None)
        self.observer = observer or NullObserver()
        self.nvml = nvml
        self.levels: list[BenchLevel] = []
        self.info: ServerInfo | None = None
        self.notes: list[str] = []
        self.warnings: list[str] = []
        # The run's clock origin, on both clocks: perf_counter() for every duration, the wall clock (epoch s)
        # for the records' absolute times and the report's start.
        self.wall_start_s = time.time()
        self.epoch = time.perf_counter()
        self.idle_connects: list[ConnectEvent] = []
        self.scrapers: list[httpx.AsyncClient] = []
        self.finished: list[RequestRecord] = []  # the repeat in progress: its requests that have finished
        self.interrupted_in: str | None = None  # Ctrl-C in a level: its name (kept, partial, if any request finished)

    # ---- what was measured so far, as the report's bench section

    def section(self) -> BenchSection:
        info = self.info
        config = self.cfg.report_config()
        if info is not None:
            config = dataclasses.replace(
                config, model=info.model, max_model_len=info.max_model_len, ignore_eos_sent=info.send_ignore_eos,
                continuous_usage_sent=info.continuous_usage, usage_reported=info.usage_reported,
                tokens_per_word=round(info.calibration.tokens_per_word, 4),
                prompt_lengths_calibrated=info.calibration.measured)
        idle = sorted(e.connect_s * 1000.0 for e in self.idle_connects)
        config = dataclasses.replace(
            config, notes=(*(info.notes if info else []), *self.notes),
            warnings=(*(info.warnings if info else []), *self.warnings),
            started_at=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.wall_start_s))
            + f".{int(self.wall_start_s % 1 * 1e6):06d}Z",
            started_epoch_s=self.wall_start_s, idle_connect_ms_p50=float(np.median(idle)) if idle else None)
        levels = tuple(self.levels)
        summary = saturation.summary(levels)
        if self.fleet and summary is not None:
            summary["fleet"] = fleet_summary(list(levels), list(self.cfg.urls), self.cfg.balance)
        return BenchSection(config=config, levels=levels, summary=summary)

    # ---- the run

    def _slice_size(self, spec: LevelSpec) -> int:
        n = self.cfg.requests_for(spec)
        if n is not None and self.cfg.turns > 1:
            return math.ceil(n / self.cfg.turns) * self.cfg.turns  # whole conversations
        if n is not None:
            return n
        return int(min(20000, max(64, spec.load * (self.cfg.duration_s or 1.0) * DURATION_POOL_PER_S)))

    async def run(self) -> BenchSection:
        cfg = self.cfg
        scrape_timeout_s = max(5.0, cfg.scrape_interval_s * 4)
        size = cfg.pool_size()
        if self.fleet:
            pool = FleetPool([make_pool(u, size, cfg.timeout_s, cfg.headers, cfg.api_key) for u in cfg.urls],
                             cfg.balance)
        else:
            pool = make_pool(cfg.url, size, cfg.timeout_s, cfg.headers, cfg.api_key)
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(make_client(cfg.url, cfg.timeout_s, cfg.headers, cfg.api_key))
                self.scrapers = [await stack.enter_async_context(make_client(u, scrape_timeout_s, cfg.headers,
                                                                              cfg.api_key))
                                 for u in (cfg.urls if self.fleet else (cfg.url,))]
                return await self._run(pool, client, self.scrapers[0])
        finally:
            pool.close()

    @property
    def fleet(self) -> bool:
        return len(self.cfg.urls) > 1

    async def _run(self, pool: ConnectionPool, client: httpx.AsyncClient, scraper: httpx.AsyncClient) -> BenchSection:
        cfg = self.cfg
        self.info = info = await preflight(client, pool, cfg)
        opts = RequestOptions(endpoint=cfg.endpoint, model=info.model, send_ignore_eos=info.send_ignore_eos,
                              continuous_usage=info.continuous_usage, request_id_header=cfg.request_id_header)
        check_sweep_fits(cfg, info.max_model_len)
        check_turns_fit(cfg, info.max_model_len)
        if cfg.trace is not None and len(cfg.trace.rows) < cfg.trace.num_rows_in_file:
            self.notes.append(f"--num-requests cut the trace: only its first {len(cfg.trace.rows)} of "
                              f"{cfg.trace.num_rows_in_file} requests (by timestamp) were replayed")
        warmup_items, level_slices = self._prompts(info)
        if cfg.warmup:
            await self._warmup(pool, opts, warmup_items)
        self.idle_connects = list(pool.connects)  # before any measured load: the server's idle connect time
        gpu, gpu_reason = GpuSampler.create(cfg.gpu_sample_interval_s, nvml=self.nvml)
        if gpu_reason:
            self.notes.append(gpu_reason)
        if cfg.ramp is not None and cfg.ramp.shape == "linear":
            for level in await self._linear_ramp(pool, opts, level_slices[0][0]):
                self.levels.append(level)
                self.observer.level_finished(level)
            return self.section()
        if cfg.repeat > 1 and len(cfg.levels) > 1 and cfg.repeat_order == "rounds" and not self.fleet:
            for level in await self._interleaved(pool, scraper, opts, level_slices, gpu):
                self.observer.level_finished(level)
            return self.section()
        for spec, slices in zip(cfg.levels, level_slices, strict=True):
            level = await self._level(pool, scraper, opts, spec, slices, gpu)
            self.levels.append(level)
            self.observer.level_finished(level)
        return self.section()

    def _prompts(self, info: ServerInfo) -> tuple[list[PromptItem], list[list[list[PromptItem]]]]:
        """(warmup prompts, per level its per-repeat prompt slices). One prompt pool per prompt length: a
        single-length run draws everything from one pool; a sweep draws each length from its own, seeded apart
        so that a longer prompt never starts with a shorter level's prompt (a prefix-cache hit would hide the
        prefill cost the sweep measures). Warmup uses the shortest length."""
        cfg = self.cfg
        if cfg.trace is not None:  # warm up on short synthetic prompts; every repeat replays the whole trace
            warm_cfg = dataclasses.replace(cfg, trace=None, input_len=min(cfg.input_len, 64), output_len=8)
            warm = synthetic(warm_cfg, cfg.warmup, info.calibration, info.max_model_len) if cfg.warmup else []
            per_scale = [from_trace(cfg, info.calibration, info.max_model_len, s) for s in cfg.time_scales]
            return warm, [[items] * cfg.repeat for items in per_scale]
        lengths = list(dict.fromkeys(spec.input_len for spec in cfg.levels))
        pools: dict[int | None, list[PromptItem]] = {}
        for k, length in enumerate(lengths):
            sizes = [self._slice_size(spec) * cfg.repeat for spec in cfg.levels if spec.input_len == length]
            extra = cfg.warmup if k == 0 else 0
            pool_cfg = cfg if length is None else dataclasses.replace(cfg, input_len=length, seed=cfg.seed + SWEEP_SEED_STRIDE * k)
            pools[length] = build(pool_cfg, extra + sum(sizes), info.calibration, info.max_model_len)
        warmup_items = pools[lengths[0]][:cfg.warmup]
        starts = {length: (cfg.warmup if k == 0 else 0) for k, length in enumerate(lengths)}
        per_level: list[list[list[PromptItem]]] = []
        for spec in cfg.levels:
            size, start = self._slice_size(spec), starts[spec.input_len]
            per_level.append([pools[spec.input_len][start + r * size:start + (r + 1) * size] for r in range(cfg.repeat)])
            starts[spec.input_len] = start + size * cfg.repeat
        return warmup_items, per_level

    async def _warmup(self, pool: ConnectionPool, opts: RequestOptions, items: list[PromptItem]) -> None:
        spec = LevelSpec(concurrency=max(1, min(len(items), self.cfg.peak_concurrency())))
        ctx = LevelContext(pool, opts, items, self.epoch, self._on_record, warmup=True, label="warmup",
                           timeout_s=self.cfg.timeout_s, wall_epoch_s=self.wall_start_s)
        run = await run_closed(ctx, spec, len(items), None)
        failed = [r for r in run.records if not r.ok]
        if failed:
            self.notes.append(f"{len(failed)}/{len(run.records)} warmup requests failed "
                              f"(first: {failed[0].error_kind}: {failed[0].error})")

    def _on_record(self, record: RequestRecord) -> None:
        self.sink.write(record)
        self.observer.record(record)
        self.finished.append(record)

    async def _level(self, pool: ConnectionPool, scraper: httpx.AsyncClient, opts: RequestOptions,
                     spec: LevelSpec, slices: list[list[PromptItem]], gpu: GpuSampler | None) -> BenchLevel:
        """Every repeat of one level back to back, in one server and GPU window. Ctrl-C in it: the level is
        kept (partial) with the requests that finished, and the interrupt goes on (CancelledError)."""
        parts = await self._repeats(pool, scraper, opts, spec, list(enumerate(slices)), gpu)
        if self.interrupted_in is None:
            return self._finish(spec, [parts])
        if parts.records:
            self.levels.append(level := self._finish(spec, [parts]))
            self.observer.level_finished(level)
        raise asyncio.CancelledError  # asyncio.run turns it into KeyboardInterrupt: the run ends there

    async def _interleaved(self, pool: ConnectionPool, scraper: httpx.AsyncClient, opts: RequestOptions,
                           level_slices: list[list[list[PromptItem]]], gpu: GpuSampler | None) -> list[BenchLevel]:
        """--repeat K in rounds: level 1, level 2, ..., then again, so that each level's repeats spread over the
        whole run and a host that drifts shows up as spread between repeats (and in the drift check), not as a
        difference between levels. Each repeat has its own server and GPU window. An interrupted run still
        reports every level with at least one finished repeat."""
        cfg = self.cfg
        done: list[list[_Parts]] = [[] for _ in cfg.levels]
        try:
            for rep in range(cfg.repeat):
                for i, (spec, slices) in enumerate(zip(cfg.levels, level_slices, strict=True)):
                    parts = await self._repeats(pool, scraper, opts, spec, [(rep, slices[rep])], gpu)
                    if parts.records:
                        done[i].append(parts)
                    if self.interrupted_in is not None:
                        raise asyncio.CancelledError
        finally:
            self.levels.extend(self._finish(spec, parts) for spec, parts in zip(cfg.levels, done, strict=True)
                               if parts)
        return self.levels

    async def _repeats(self, pool: ConnectionPool, scraper: httpx.AsyncClient, opts: RequestOptions,
                       spec: LevelSpec, slices: list[tuple[int, list[PromptItem]]], gpu: GpuSampler | None) -> _Parts:
        cfg = self.cfg
        level_scraper = ServerScraper(scraper, interval_s=cfg.scrape_interval_s)
        replica_scrapers = [level_scraper, *(ServerScraper(s, interval_s=cfg.scrape_interval_s) for s in self.scrapers[1:])]
        for w in replica_scrapers:
            await w.start()
        if gpu is not None:
            gpu.start()
        parts = _Parts(scrapers=replica_scrapers)
        try:
            for rep, items in slices:
                if not await self._repeat(pool, opts, spec, rep, items, parts):
                    break
        finally:
            for i, w in enumerate(replica_scrapers):
                await w.stop(expected_finished=sum(1 for r in parts.records
                                                   if r.ok and (not self.fleet or r.replica == i)))
            if gpu is not None:
                parts.gpu = gpu.stop()
        return parts

    async def _repeat(self, pool: ConnectionPool, opts: RequestOptions, spec: LevelSpec, rep: int,
                      items: list[PromptItem], parts: _Parts) -> bool:
        """Run one repeat into `parts`; False when Ctrl-C cut it. The requests that finished before it are kept
        (the level is partial); those in flight were cancelled and are not counted, not even as failures."""
        cfg = self.cfg
        self.finished = []
        started_s, load_1m = time.time(), host_load_1m()
        lag, cpu = LoopLagMonitor(), CpuMeter()
        warm: list[ConnectEvent] = []
        try:
            warm = await self._warm(pool, spec)
            self.observer.level_started(spec, rep, cfg.requests_for(spec))
            ctx = LevelContext(pool, opts, items, self.epoch, self._on_record, repeat=rep,
                               timeout_s=cfg.timeout_s, wall_epoch_s=self.wall_start_s)
            started_s, load_1m = time.time(), host_load_1m()
            lag.start()
            cpu.start()
            run = await self._dispatch(ctx, spec, items, rep)
        except asyncio.CancelledError:
            run = LevelRun(records=[r for r in self.finished if not r.warmup])
            self.interrupted_in = level_name(spec)
        finally:
            await lag.stop()
        cpu_pct, _ = cpu.stop()
        cut = self.interrupted_in is not None
        if cut and not run.records:
            return False
        if cut:
            parts.notes.append(f"interrupted (Ctrl-C) after {len(run.records)} requests of repeat {rep + 1}: this "
                               "level is partial; the requests then in flight were cut and are not counted")
        # Cut: the requests in flight then have no record, so the achieved concurrency is reported, not judged.
        stats = verdict(spec, run.records, ClientMeasurements(
            cpu_pct=cpu_pct, loop_lag_ms_p99=lag.p99_ms(), send_lag_ms=run.send_lag_ms,
            num_slot_waits=run.num_slot_waits), holds_concurrency=not cut)
        parts.client_stats.append(stats)
        if cfg.repeat > 1:
            one = summarize(spec, run.records, cfg.slo, stats, keep_samples=False)
            parts.repeats.append(repeat_record(one, rep, started_s, load_1m))
        parts.durations_s.append(duration_s([r for r in run.records if not r.warmup]))
        parts.records.extend(run.records)
        parts.warm_events.extend(warm)
        parts.notes.extend(self._load_notes(spec, run))
        if run.stopped is not None:
            parts.notes.append(self._stopped_note(run))
        return not cut

    def _finish(self, spec: LevelSpec, windows: list[_Parts]) -> BenchLevel:
        """One level from its repeats (one window back to back, or one window per repeat when interleaved)."""
        cfg = self.cfg
        records = [r for w in windows for r in w.records]
        notes = [n for w in windows for n in w.notes]
        level = summarize(spec, records, cfg.slo, merge_client([s for w in windows for s in w.client_stats]),
                          gpu=windows[0].gpu, notes=tuple(notes),
                          duration_override_s=sum(d for w in windows for d in w.durations_s))
        first = windows[0]
        # The server window is the first repeat's: reconcile it with that repeat's own client TTFT.
        first_ttft = level.ttft_ms.mean if len(windows) == 1 else _mean_ttft_ms(first.records)
        server, server_reason = first.scrapers[0].summary(first_ttft)
        # The runner's notes come first, then the server's and the repeats', then summarize()'s own.
        runner_notes = [server_reason] if server_reason else []
        repeats = [r for w in windows for r in w.repeats]
        if repeats:
            runner_notes.append(f"{len(repeats)} repeats pooled; per-repeat numbers are in `repeats`")
        if len(windows) > 1:
            runner_notes.append(f"repeats interleaved with the other levels (rounds); server and GPU windows: "
                                f"the first repeat's ({len(windows)} windows of {level.duration_s:.1f} s in all)")
        drift = drift_check(repeats) if repeats else None
        if drift and drift["drifted"]:
            text = describe(f"at {level_name(spec)}", drift)
            runner_notes.append(text)
            self.warnings.append(text)
        if self.fleet:  # each replica's own window; the level's `server` is replica 0's, reconciled with its TTFT
            replicas = replica_stats(spec, records, list(cfg.urls), cfg.slo, level.client, first.scrapers,
                                     cfg.roles)
            level = dataclasses.replace(level, replicas=replicas)
            server = replicas[0].server
            runner_notes.append("server window: replica 0's (each replica's is under `replicas`)")
        return dataclasses.replace(
            level, server=server, notes=(*notes, *runner_notes, *level.notes[len(notes):]),
            repeats=repeats or level.repeats, drift=drift,
            **self._extras(records, [e for w in windows for e in w.warm_events], spec))

    def _extras(self, records: list[RequestRecord], warm: list[ConnectEvent],
                spec: LevelSpec | None = None) -> dict[str, Any]:
        cfg = self.cfg
        workload = None
        if cfg.turns > 1:
            workload = {"turns": turn_stats(records), "think_time_ms": cfg.think_time_ms}
        elif cfg.trace is not None:
            workload = {"trace_requests": len(cfg.trace.rows), "trace_requests_in_file": cfg.trace.num_rows_in_file,
                        "time_scale": cfg.time_scales[cfg.levels.index(spec)] if spec in cfg.levels else None}
        return {"connections": connection_stats(records, warm), "reasoning": reasoning_stats(records),
                "workload": workload}

    async def _warm(self, pool: ConnectionPool, spec: LevelSpec) -> list[ConnectEvent]:
        """Open the pool to the level's load before its measured window (--warm-connections)."""
        cfg = self.cfg
        if not cfg.warm_connections:
            return []
        want = spec.connections_wanted(cfg.max_in_flight)
        mark = len(pool.connects)
        errors = await pool.warm(want)
        if errors:
            self.notes.append(f"warm-up could open only {want - len(errors)} of {want} connections "
                              f"(first failure: {errors[0]}); the level opened the rest itself")
        return [e for e in pool.connects[mark:] if e.warm]

    async def _dispatch(self, ctx: LevelContext, spec: LevelSpec, items: list[PromptItem], rep: int) -> LevelRun:
        cfg = self.cfg
        if cfg.turns > 1:
            conversations = [items[k:k + cfg.turns] for k in range(0, len(items), cfg.turns)]
            return await run_conversations(ctx, spec, conversations, cfg.think_time_ms / 1000.0)
        if cfg.trace is not None:
            return await run_open(ctx, spec, len(items), None, cfg.burstiness, cfg.seed + rep, cfg.max_in_flight,
                                  schedule_s=[it.arrival_s or 0.0 for it in items])
        if spec.closed_loop:
            return await run_closed(ctx, spec, cfg.requests_for(spec), cfg.duration_s)
        return await run_open(ctx, spec, cfg.requests_for(spec), cfg.duration_s, cfg.burstiness, cfg.seed + rep,
                              cfg.max_in_flight)

    def _stopped_note(self, run: LevelRun) -> str:
        info = self.info
        failed = sum(1 for r in run.records if not r.warmup and not r.ok)
        text = stopped_reason(run.stopped, failed, prompt_tokens=self._asked_prompt_tokens(),
                              max_model_len=info.max_model_len if info else None,
                              tokens_per_word=info.calibration.tokens_per_word if info else 1.0,
                              calibrated=bool(info and info.calibration.measured))
        self.warnings.append(f"{run.stopped.level}: {text}")
        return text

    def _asked_prompt_tokens(self) -> int | None:
        cfg = self.cfg
        if cfg.dataset is not None or cfg.trace is not None:
            return None
        return cfg.input_len

    async def _linear_ramp(self, pool: ConnectionPool, opts: RequestOptions,
                           items: list[PromptItem]) -> list[BenchLevel]:
        """One continuous closed loop, reported per window; each window is a level."""
        cfg, ramp = self.cfg, self.cfg.ramp
        warm = await self._warm(pool, LevelSpec(concurrency=ramp.end))
        ctx = LevelContext(pool, opts, items, self.epoch, self._on_record, timeout_s=cfg.timeout_s,
                           wall_epoch_s=self.wall_start_s)
        lag, cpu = LoopLagMonitor(), CpuMeter()
        lag.start()
        cpu.start()
        try:
            run = await run_linear(ctx, ramp, cfg.window_s)
        finally:
            await lag.stop()
        cpu_pct, _ = cpu.stop()
        levels = []
        for k, (lo, hi, spec) in enumerate(window_specs(ramp, cfg.window_s)):
            records = [r for r in run.records if r.level == spec.name]
            stats = verdict(spec, records, ClientMeasurements(cpu_pct=cpu_pct, loop_lag_ms_p99=lag.p99_ms(),
                                                              send_lag_ms=[], num_slot_waits=0),
                            holds_concurrency=False)
            notes = [f"linear ramp {ramp.text}: window {lo:g}-{hi:g} s, target concurrency "
                     f"{ramp.target_at(lo):.1f} -> {ramp.target_at(hi):.1f}; server /metrics are not split per window"]
            if run.stopped is not None and k == 0:
                notes.append(self._stopped_note(run))
            level = summarize(spec, records, cfg.slo, stats, notes=tuple(notes))
            extras = self._extras(records, warm if k == 0 else [])
            extras["workload"] = {"ramp": ramp.text, "window_start_s": lo, "window_end_s": hi,
                                  "target_concurrency_start": ramp.target_at(lo),
                                  "target_concurrency_end": ramp.target_at(hi)}
            levels.append(dataclasses.replace(level, **extras))
        return levels

    def _load_notes(self, spec: LevelSpec, run: LevelRun) -> list[str]:
        if spec.concurrency is not None:
            if len(run.records) < spec.concurrency:
                return [f"only {len(run.records)} requests for concurrency {spec.concurrency}: the level never had "
                        f"{spec.concurrency} in flight; use --num-requests >= {4 * spec.concurrency}"]
            return []
        sends = sorted(r.t0_s for r in run.records)
        if len(sends) < 2 or sends[-1] <= sends[0]:
            return []
        achieved = (len(sends) - 1) / (sends[-1] - sends[0])
        schedule = "the trace's mean rate" if self.cfg.trace is not None else "a Poisson schedule varies around it"
        return [f"achieved request rate {achieved:.2f}/s over {len(sends)} sends (target {spec.request_rate:g}/s; "
                f"{schedule})"]
