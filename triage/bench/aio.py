"""A small asyncio helper shared by the level's background tasks (loop-lag monitor, /metrics scraper)."""
from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel a background task and wait until it has stopped (its CancelledError is expected)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
