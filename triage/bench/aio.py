"""Small asyncio helpers shared by the level's background tasks (loop-lag monitor, /metrics scraper) and the
load's request tasks."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel a background task and wait until it has stopped (its CancelledError is expected)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def cancel_all(tasks: Iterable[asyncio.Future]) -> None:
    """Cancel every task still running and wait until all have stopped, their outcomes retrieved: on Ctrl-C the
    requests in flight end here, before the loop closes, and none is left to print "Task was destroyed but it
    is pending" or "exception was never retrieved"."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
