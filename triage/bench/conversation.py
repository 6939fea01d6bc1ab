"""Multi-turn chat (`--turns N --think-time-ms T`): each conversation's history grows turn by turn through the
chat endpoint (the server's real replies are kept), so a server with a prefix cache should make later turns'
TTFT cheap. `concurrency` conversations run at once; TTFT is reported per turn index."""
from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from triage.bench.client import send
from triage.bench.levels import FAIL_FAST_MAX, FAIL_FAST_MIN, LevelContext, LevelRun
from triage.bench.prompts import PromptItem
from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec


async def run_conversations(ctx: LevelContext, spec: LevelSpec, conversations: Sequence[Sequence[PromptItem]],
                            think_time_s: float) -> LevelRun:
    """Play every conversation, `spec.concurrency` at a time. A failed turn ends its conversation (its history
    would be wrong from there on)."""
    if spec.concurrency is None:
        raise ValueError("multi-turn needs a concurrency level")
    run = LevelRun(threshold=min(FAIL_FAST_MAX, max(FAIL_FAST_MIN, spec.concurrency)))
    queue = iter(range(len(conversations)))
    num_turns = max((len(c) for c in conversations), default=1)

    async def worker() -> None:
        for c in queue:
            history: tuple[dict[str, str], ...] = ()
            for k, user in enumerate(conversations[c]):
                if run.stopped is not None:
                    return
                if k and think_time_s > 0:
                    await asyncio.sleep(think_time_s)
                messages = (*history, {"role": "user", "content": user.prompt})
                item = dataclasses.replace(user, index=c * num_turns + k, messages=messages, conversation=c,
                                           turn=k + 1)
                reply: list[str] = []
                record = await send(ctx.pool, item, ctx.opts, level=ctx.label or spec.name, repeat=ctx.repeat,
                                    warmup=ctx.warmup, epoch=ctx.epoch, timeout_s=ctx.timeout_s,
                                    wall_epoch_s=ctx.wall_epoch_s, text_out=reply)
                run.add(record)
                ctx.on_record(record)
                if not record.ok:
                    break
                history = (*messages, {"role": "assistant", "content": reply[0] if reply else ""})

    await asyncio.gather(*(worker() for _ in range(spec.concurrency)))
    return run


def turn_stats(records: Sequence[RequestRecord]) -> dict[str, dict[str, Any]]:
    """Per turn index (1-based, as a string key): requests, failures, TTFT p50/p99 and mean prompt tokens."""
    out: dict[str, dict[str, Any]] = {}
    turns = sorted({r.turn for r in records if r.turn is not None and not r.warmup})
    for turn in turns:
        rows = [r for r in records if r.turn == turn and not r.warmup]
        ttft = [r.ttft_s * 1000.0 for r in rows if r.ok and r.ttft_s is not None]
        inputs = [r.input_tokens for r in rows if r.ok and r.input_tokens is not None]
        out[str(turn)] = {
            "requests": len(rows), "failed": sum(1 for r in rows if not r.ok),
            "ttft_ms_p50": float(np.percentile(ttft, 50)) if ttft else None,
            "ttft_ms_p99": float(np.percentile(ttft, 99)) if ttft else None,
            "ttft_ms_mean": float(np.mean(ttft)) if ttft else None,
            "input_tokens_mean": float(np.mean(inputs)) if inputs else None,
        }
    return out
