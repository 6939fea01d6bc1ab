"""One bench run: preflight the server, warm up, run every level (and repeat), watch the server and GPU, judge
the client, and keep every finished level so that an interrupted run still reports what it measured."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import numpy as np

from triage.bench import saturation
from triage.bench.client import RequestOptions, make_client, make_pool, send
from triage.bench.config import BenchConfig, LevelSpec
from triage.bench.pool import ConnectionPool
from triage.bench.levels import LevelContext, LevelRun, run_closed, run_open
from triage.bench.records import RecordSink, RequestRecord
from triage.bench.stats import duration_s, repeat_summary, summarize
from triage.bench.validity import ClientMeasurements, CpuMeter, LoopLagMonitor, verdict
from triage.bench.server_watch import GpuSampler, ServerWatcher
from triage.bench.workload import PromptItem, TokenCalibration, build
from triage.core.errors import TargetUnreachable, UsageError
from triage.core.report import BenchLevel, BenchSection, ClientStats

PROBE_WORDS = (16, 80)  # two prompt sizes for the tokens-per-word fit
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


@dataclass(slots=True)
class ServerInfo:
    model: str
    max_model_len: int | None = None
    owned_by: str | None = None
    engine_version: str | None = None
    send_ignore_eos: bool = True
    continuous_usage: bool = True
    usage_reported: bool | None = None
    calibration: TokenCalibration = field(default_factory=TokenCalibration)
    notes: list[str] = field(default_factory=list)


def _unreachable(url: str, exc: BaseException) -> TargetUnreachable:
    return TargetUnreachable(f"cannot reach the server at {url} ({type(exc).__name__}: {exc}). Is it running? "
                             "Check --url, or leave --url out to benchmark the bundled reference engine.")


async def _server_version(client: httpx.AsyncClient) -> str | None:
    """vLLM and the reference server answer /version with {"version": ...}; others may not."""
    try:
        resp = await client.get("/version")
        version = resp.json().get("version") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return str(version) if version else None


async def preflight(client: httpx.AsyncClient, pool: ConnectionPool, cfg: BenchConfig) -> ServerInfo:
    """Check the server answers, pick the model, learn max_model_len, whether ignore_eos/min_tokens are
    accepted, whether usage is reported, and how many tokens a prompt word is."""
    try:
        resp = await client.get("/v1/models")
    except httpx.HTTPError as e:
        raise _unreachable(cfg.url, e) from None
    if resp.status_code in (401, 403):
        raise TargetUnreachable(f"{cfg.url} refused the request (HTTP {resp.status_code}): pass --api-key "
                                "or set OPENAI_API_KEY")
    models: list[dict[str, Any]] = []
    if resp.status_code == 200:
        try:
            data = resp.json().get("data", [])
            models = [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (ValueError, AttributeError):
            models = []
    model = cfg.model or (models[0]["id"] if models else None)
    if model is None:
        raise UsageError(f"{cfg.url}/v1/models lists no model (HTTP {resp.status_code}): pass --model")
    ids = [m["id"] for m in models]
    if cfg.model and ids and cfg.model not in ids:
        raise UsageError(f"model {cfg.model!r} is not served at {cfg.url}; it serves: {', '.join(ids)}")
    entry = next((m for m in models if m["id"] == model), {})
    max_len = entry.get("max_model_len")
    info = ServerInfo(model=model, max_model_len=max_len if isinstance(max_len, int) else None,
                      owned_by=entry.get("owned_by"), engine_version=await _server_version(client))

    opts = RequestOptions(endpoint=cfg.endpoint, model=model)
    epoch = time.perf_counter()
    prompts = [PromptItem(index=i, prompt=" ".join(["hello"] * w), output_tokens=2)
               for i, w in enumerate(PROBE_WORDS)]
    first = await send(pool, prompts[0], opts, level="probe", repeat=0, warmup=True, epoch=epoch,
                       timeout_s=cfg.timeout_s)
    if first.error_kind in ("connection_refused", "connect_error", "connect_timeout"):
        raise TargetUnreachable(f"cannot reach the server at {cfg.url}: {first.error}")
    if first.error_kind in ("http_401", "http_403"):
        raise TargetUnreachable(f"{cfg.url} refused a {cfg.endpoint.value} request ({first.error}): pass --api-key "
                                "or set OPENAI_API_KEY (or the --header your gateway expects)")
    if first.error_kind in ("http_400", "http_422"):
        # Drop the optional extras one at a time: continuous_usage_stats, then ignore_eos/min_tokens.
        retry = None
        for change, note in (({"continuous_usage": False}, "the server refused a request with stream_options."
                              "continuous_usage_stats, so it is not sent; multi-token chunks are split by the mean tokens per chunk"),
                             ({"send_ignore_eos": False}, "the server refused a request with ignore_eos/min_tokens, "
                              "so they are not sent; output lengths may be shorter than asked")):
            opts = dataclasses.replace(opts, **change)
            retry = await send(pool, prompts[0], opts, level="probe", repeat=0, warmup=True, epoch=epoch,
                               timeout_s=cfg.timeout_s)
            info.notes.append(f"{note} ({first.error})")
            if retry.ok:
                break
        if retry is None or not retry.ok:
            raise UsageError(f"the server rejects a minimal {cfg.endpoint.value} request: {retry.error}. "
                             "Check --endpoint and --model")
        info.continuous_usage, info.send_ignore_eos = opts.continuous_usage, opts.send_ignore_eos
        first = retry
    if not first.ok:
        info.notes.append(f"capability probe failed ({first.error_kind}: {first.error}); "
                          "assumed ignore_eos/min_tokens and usage are supported, prompt lengths uncalibrated")
        return info
    info.usage_reported = first.input_tokens is not None
    if not info.usage_reported:
        info.notes.append("the server reports no usage: input tokens unknown, output tokens counted from chunks")
        return info
    second = await send(pool, prompts[1], opts, level="probe", repeat=0, warmup=True, epoch=epoch,
                        timeout_s=cfg.timeout_s)
    if second.ok and second.input_tokens is not None and first.input_tokens is not None:
        slope = (second.input_tokens - first.input_tokens) / (PROBE_WORDS[1] - PROBE_WORDS[0])
        if slope > 0:
            info.calibration = TokenCalibration(tokens_per_word=slope,
                                                overhead_tokens=first.input_tokens - slope * PROBE_WORDS[0],
                                                measured=True)
    return info


def check_sweep_fits(cfg: BenchConfig, max_model_len: int | None) -> None:
    """In an --input-len sweep every length must fit the server's context with the output: a length that had to
    be shortened would silently measure a shorter prompt than its level says. (One length is shortened to fit,
    as it always was.)"""
    if max_model_len is None or not cfg.input_lens:
        return
    longest_ok = max_model_len - cfg.output_len - 1
    too_long = [n for n in cfg.input_lens if n > longest_ok]
    if too_long:
        raise UsageError(f"--input-len {', '.join(map(str, too_long))}: the server's max_model_len is {max_model_len}, "
                         f"so with --output-len {cfg.output_len} a prompt can be at most {longest_ok} tokens: drop or "
                         "lower those lengths, or lower --output-len")


def _merge_client(stats: list[ClientStats]) -> ClientStats:
    """One level's client verdict over its repeats: invalid if any repeat was."""
    def mean(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return float(np.mean(present)) if present else None

    reasons = [s.invalid_reason for s in stats if s.invalid_reason]
    lags = [s.event_loop_lag_ms_p99 for s in stats if s.event_loop_lag_ms_p99 is not None]
    return ClientStats(cpu_pct=mean([s.cpu_pct for s in stats]), event_loop_lag_ms_p99=max(lags) if lags else None,
                       achieved_concurrency=mean([s.achieved_concurrency for s in stats]),
                       valid=all(s.valid for s in stats), invalid_reason="; ".join(dict.fromkeys(reasons)) or None)


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
        self.epoch = time.perf_counter()

    # ---- what was measured so far, as the report's bench section

    def section(self) -> BenchSection:
        config = self.cfg.to_report_dict()
        if self.info is not None:
            config.update(model=self.info.model, max_model_len=self.info.max_model_len,
                          ignore_eos_sent=self.info.send_ignore_eos,
                          continuous_usage_sent=self.info.continuous_usage, usage_reported=self.info.usage_reported,
                          tokens_per_word=round(self.info.calibration.tokens_per_word, 4),
                          prompt_lengths_calibrated=self.info.calibration.measured)
        config["notes"] = [*(self.info.notes if self.info else []), *self.notes]
        levels = tuple(self.levels)
        return BenchSection(config=config, levels=levels, summary=saturation.summary(levels))

    # ---- the run

    def _pool_size(self) -> int:
        sizes = [lv.concurrency for lv in self.cfg.levels if lv.concurrency is not None]
        if any(lv.request_rate is not None for lv in self.cfg.levels):
            sizes.append(self.cfg.max_in_flight)
        return max([1, *sizes])

    def _slice_size(self, spec: LevelSpec) -> int:
        n = self.cfg.requests_for(spec)
        if n is not None:
            return n
        load = spec.concurrency or spec.request_rate or 1
        return int(min(20000, max(64, load * (self.cfg.duration_s or 1.0) * DURATION_POOL_PER_S)))

    async def run(self) -> BenchSection:
        cfg = self.cfg
        pool = make_pool(cfg.url, self._pool_size(), cfg.timeout_s, cfg.headers, cfg.api_key)
        try:
            async with make_client(cfg.url, cfg.timeout_s, cfg.headers, cfg.api_key) as client, \
                    make_client(cfg.url, max(5.0, cfg.scrape_interval_s * 4), cfg.headers, cfg.api_key) as scraper:
                return await self._run(pool, client, scraper)
        finally:
            pool.close()

    async def _run(self, pool: ConnectionPool, client: httpx.AsyncClient, scraper: httpx.AsyncClient) -> BenchSection:
        cfg = self.cfg
        self.info = info = await preflight(client, pool, cfg)
        opts = RequestOptions(endpoint=cfg.endpoint, model=info.model, send_ignore_eos=info.send_ignore_eos,
                              continuous_usage=info.continuous_usage)
        check_sweep_fits(cfg, info.max_model_len)
        warmup_items, level_slices = self._prompts(info)
        if cfg.warmup:
            await self._warmup(pool, opts, warmup_items)
        gpu, gpu_reason = GpuSampler.create(cfg.gpu_sample_interval_s, nvml=self.nvml)
        if gpu_reason:
            self.notes.append(gpu_reason)
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
        peak = max([lv.concurrency or 1 for lv in self.cfg.levels])
        spec = LevelSpec(concurrency=max(1, min(len(items), peak)))
        ctx = LevelContext(pool, opts, items, self.epoch, self._on_record, warmup=True, label="warmup",
                           timeout_s=self.cfg.timeout_s)
        run = await run_closed(ctx, spec, len(items), None)
        failed = [r for r in run.records if not r.ok]
        if failed:
            self.notes.append(f"{len(failed)}/{len(run.records)} warmup requests failed "
                              f"(first: {failed[0].error_kind}: {failed[0].error})")

    def _on_record(self, record: RequestRecord) -> None:
        self.sink.write(record)
        self.observer.record(record)

    async def _level(self, pool: ConnectionPool, scraper: httpx.AsyncClient, opts: RequestOptions,
                     spec: LevelSpec, slices: list[list[PromptItem]], gpu: GpuSampler | None) -> BenchLevel:
        cfg = self.cfg
        watcher = ServerWatcher(scraper, interval_s=cfg.scrape_interval_s)
        await watcher.start()
        if gpu is not None:
            gpu.start()
        records: list[RequestRecord] = []
        per_repeat: list[BenchLevel] = []
        durations_s: list[float] = []
        client_stats: list[ClientStats] = []
        notes: list[str] = []
        gpu_dict = None
        try:
            for rep, items in enumerate(slices):
                self.observer.level_started(spec, rep, cfg.requests_for(spec))
                ctx = LevelContext(pool, opts, items, self.epoch, self._on_record, repeat=rep,
                                   timeout_s=cfg.timeout_s)
                lag, cpu = LoopLagMonitor(), CpuMeter()
                lag.start()
                cpu.start()
                try:
                    if spec.concurrency is not None:
                        run = await run_closed(ctx, spec, cfg.requests_for(spec), cfg.duration_s)
                    else:
                        run = await run_open(ctx, spec, cfg.requests_for(spec), cfg.duration_s, cfg.burstiness,
                                             cfg.seed + rep, cfg.max_in_flight)
                finally:
                    await lag.stop()
                cpu_pct, _ = cpu.stop()
                stats = verdict(spec, run.records, ClientMeasurements(
                    cpu_pct=cpu_pct, loop_lag_ms_p99=lag.p99_ms(), send_lag_ms=run.send_lag_ms,
                    num_slot_waits=run.num_slot_waits))
                client_stats.append(stats)
                if len(slices) > 1:
                    per_repeat.append(summarize(spec, run.records, cfg.slo, stats, keep_samples=False))
                durations_s.append(duration_s([r for r in run.records if not r.warmup]))
                records.extend(run.records)
                notes.extend(self._load_notes(spec, run))
        finally:
            await watcher.stop(expected_finished=sum(1 for r in records if r.ok))
            if gpu is not None:
                gpu_dict = gpu.stop()
        level = summarize(spec, records, cfg.slo, _merge_client(client_stats), gpu=gpu_dict,
                          notes=tuple(notes), duration_override_s=sum(durations_s))
        server, server_reason = watcher.summary(level.ttft_ms.mean)
        # The runner's notes come first, then the server's and the repeats', then summarize()'s own.
        runner_notes = [server_reason] if server_reason else []
        if per_repeat:
            runner_notes.append(f"{len(per_repeat)} repeats pooled; per-repeat numbers are in `repeats`")
        return dataclasses.replace(
            level, server=server, notes=(*notes, *runner_notes, *level.notes[len(notes):]),
            repeats=[repeat_summary(lv) for lv in per_repeat] if per_repeat else level.repeats)

    @staticmethod
    def _load_notes(spec: LevelSpec, run: LevelRun) -> list[str]:
        if spec.concurrency is not None:
            if len(run.records) < spec.concurrency:
                return [f"only {len(run.records)} requests for concurrency {spec.concurrency}: the level never had "
                        f"{spec.concurrency} in flight; use --num-requests >= {4 * spec.concurrency}"]
            return []
        sends = sorted(r.t0_s for r in run.records)
        if len(sends) < 2 or sends[-1] <= sends[0]:
            return []
        achieved = (len(sends) - 1) / (sends[-1] - sends[0])
        return [f"achieved request rate {achieved:.2f}/s over {len(sends)} sends (target {spec.request_rate:g}/s; "
                "a Poisson schedule varies around it)"]
