"""A linear ramp (`--ramp linear:1:20:60s`): one closed loop whose concurrency rises from START to END over
the duration, a worker added whenever the target passes the next integer. Each request is labelled with the
report window (`--window`) it was sent in, and each window becomes a level."""
from __future__ import annotations

import asyncio
import itertools
import time

from triage.bench.aio import cancel_all
from triage.bench.client import send
from triage.bench.levels import FAIL_FAST_MIN, LevelContext, LevelRun, _item
from triage.bench.run_config import LevelSpec
from triage.bench.workloads import Ramp

SPAWN_TICK_S = 0.05  # how often the target concurrency is checked


def window_specs(ramp: Ramp, window_s: float) -> list[tuple[float, float, LevelSpec]]:
    return [(lo, hi, LevelSpec(concurrency=c)) for lo, hi, c in ramp.windows(window_s)]


async def run_linear(ctx: LevelContext, ramp: Ramp, window_s: float) -> LevelRun:
    """Run the ramp; records carry their window's level name."""
    windows = window_specs(ramp, window_s)
    run = LevelRun(threshold=max(FAIL_FAST_MIN, ramp.start))
    counter = itertools.count()
    perf = time.perf_counter
    start = perf()

    def label(t_s: float) -> str:
        k = min(len(windows) - 1, int(t_s // window_s))
        return windows[k][2].name

    async def worker() -> None:
        while run.stopped is None:
            t_s = perf() - start
            if t_s >= ramp.duration_s:
                return
            i = next(counter)
            record = await send(ctx.pool, _item(ctx, i), ctx.opts, level=label(t_s), repeat=ctx.repeat,
                                warmup=ctx.warmup, epoch=ctx.epoch, timeout_s=ctx.timeout_s,
                                wall_epoch_s=ctx.wall_epoch_s)
            run.add(record)
            ctx.on_record(record)

    tasks: list[asyncio.Task] = []
    loop = asyncio.get_running_loop()
    try:
        while run.stopped is None:
            t_s = perf() - start
            if t_s >= ramp.duration_s:
                break
            target = ramp.workers_at(t_s)
            while len(tasks) < target:
                tasks.append(loop.create_task(worker()))
            await asyncio.sleep(SPAWN_TICK_S)
        await asyncio.gather(*tasks)
    finally:
        await cancel_all(tasks)  # Ctrl-C: the requests in flight are cut, and awaited
    return run
