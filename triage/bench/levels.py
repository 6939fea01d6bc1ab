"""Running one load level: a closed loop (N requests always in flight) or an open loop (Poisson arrivals,
gamma-distributed gaps with shape `burstiness`: 1 is Poisson, < 1 burstier, > 1 more regular)."""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from triage.bench.aio import cancel_all
from triage.bench.client import RequestOptions, send
from triage.bench.pool import ConnectionPool
from triage.bench.prompts import PromptItem
from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec

OnRecord = Callable[[RequestRecord], None]


# A level stops early when its first requests all fail with the same client error (a 4xx other than 408/429,
# which say "later", not "never"): the rest would fail the same way. This many, or the level's concurrency if
# larger (up to FAIL_FAST_MAX), must have failed first.
FAIL_FAST_MIN = 4
FAIL_FAST_MAX = 16
LOAD_DEPENDENT_4XX = ("http_408", "http_429")


@dataclass(slots=True)
class LevelRun:
    records: list[RequestRecord] = field(default_factory=list)
    send_lag_ms: list[float] = field(default_factory=list)
    num_slot_waits: int = 0
    threshold: int = FAIL_FAST_MIN
    stopped: RequestRecord | None = None  # the failure that stopped the level early (every one was alike)

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)
        if self.stopped is not None or record.warmup:
            return
        kind = record.error_kind or ""
        if not (kind.startswith("http_4") and kind not in LOAD_DEPENDENT_4XX) or len(self.records) < self.threshold:
            return
        if all(r.error_kind == kind for r in self.records):
            self.stopped = record


@dataclass(frozen=True, slots=True)
class LevelContext:
    pool: ConnectionPool
    opts: RequestOptions
    items: Sequence[PromptItem]
    epoch: float
    on_record: OnRecord
    repeat: int = 0
    warmup: bool = False
    label: str | None = None  # the records' level name, when not the spec's (warmup)
    timeout_s: float = 60.0
    wall_epoch_s: float | None = None  # the wall clock (epoch s) at `epoch`


def _item(ctx: LevelContext, i: int) -> PromptItem:
    item = ctx.items[i % len(ctx.items)]
    return item if item.index == i else dataclasses.replace(item, index=i)


async def run_closed(ctx: LevelContext, spec: LevelSpec, num_requests: int | None,
                     duration_s: float | None) -> LevelRun:
    """`spec.concurrency` workers, each sending its next request as soon as its last one finishes, until
    `num_requests` were sent or `duration_s` passed (requests in flight then are waited for)."""
    if spec.concurrency is None:
        raise ValueError("run_closed needs a concurrency level")
    run = LevelRun(threshold=min(FAIL_FAST_MAX, max(FAIL_FAST_MIN, spec.concurrency)))
    counter = itertools.count()
    deadline = time.perf_counter() + duration_s if duration_s is not None else None

    async def worker() -> None:
        while run.stopped is None:
            i = next(counter)
            if num_requests is not None and i >= num_requests:
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            record = await send(ctx.pool, _item(ctx, i), ctx.opts, level=ctx.label or spec.name, repeat=ctx.repeat,
                                warmup=ctx.warmup, epoch=ctx.epoch, timeout_s=ctx.timeout_s,
                                wall_epoch_s=ctx.wall_epoch_s)
            run.add(record)
            ctx.on_record(record)

    await asyncio.gather(*(worker() for _ in range(spec.concurrency)))
    return run


def arrival_offsets_s(rate: float, burstiness: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Send times (s from the level start) of n requests: the first at 0, then gamma gaps with mean 1/rate."""
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=max(0, n - 1))
    return np.concatenate([[0.0], np.cumsum(gaps)])


async def run_open(ctx: LevelContext, spec: LevelSpec, num_requests: int | None, duration_s: float | None,
                   burstiness: float, seed: int, max_in_flight: int,
                   schedule_s: Sequence[float] | None = None) -> LevelRun:
    """Requests sent on a precomputed schedule, whatever the server's speed (at most `max_in_flight` at once;
    a request that has to wait for a slot is counted, and the level is marked invalid). `schedule_s` replaces
    the Poisson schedule (trace replay)."""
    if spec.request_rate is None:
        raise ValueError("run_open needs a request rate")
    run = LevelRun()
    if num_requests is None:  # --duration: enough arrivals to cover it
        num_requests = int(spec.request_rate * (duration_s or 0.0) * 2 + 16)
    if schedule_s is not None:  # trace replay: the trace's own send times
        offsets = np.asarray(schedule_s, dtype=float)
    else:
        offsets = arrival_offsets_s(spec.request_rate, burstiness, num_requests, np.random.default_rng(seed))
    slots = asyncio.Semaphore(max_in_flight)
    perf = time.perf_counter
    start = perf()
    tasks: list[asyncio.Task] = []

    async def one(i: int) -> None:
        waited_from = perf()
        if slots.locked():
            run.num_slot_waits += 1
        async with slots:
            record = await send(ctx.pool, _item(ctx, i), ctx.opts, level=ctx.label or spec.name, repeat=ctx.repeat,
                                warmup=ctx.warmup, epoch=ctx.epoch, timeout_s=ctx.timeout_s,
                                slot_wait_s=perf() - waited_from, wall_epoch_s=ctx.wall_epoch_s)
        run.add(record)
        ctx.on_record(record)

    loop = asyncio.get_running_loop()
    try:
        for i, offset in enumerate(offsets.tolist()):
            if (duration_s is not None and offset >= duration_s) or run.stopped is not None:
                break
            delay = start + offset - perf()
            if delay > 0:
                await asyncio.sleep(delay)
            run.send_lag_ms.append(max(0.0, (perf() - start - offset) * 1000.0))
            tasks.append(loop.create_task(one(i)))
        await asyncio.gather(*tasks)
    finally:
        await cancel_all(tasks)  # Ctrl-C: the requests in flight are cut, and awaited
    return run
