"""What a level reports beyond the contract's latency families: its connections (opened, reused, retried,
connect time, apart from TTFT), its reasoning split, and why it stopped early when it did."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from triage.bench.pool import ConnectEvent
from triage.bench.records import RequestRecord
from triage.bench.stats import latency_stats
from triage.core.bench_data import ConnectMs, LevelConnections

CONTEXT_WORDS = ("context", "too long", "exceed", "maximum", "max_model_len", "n_ctx")


def _ms_stats(values_ms: Sequence[float]) -> ConnectMs:
    if not values_ms:
        return ConnectMs()
    a = np.asarray(values_ms, dtype=float)
    return ConnectMs(p50=float(np.percentile(a, 50)), p99=float(np.percentile(a, 99)), max=float(a.max()))


def connection_stats(records: Sequence[RequestRecord], warm: Sequence[ConnectEvent]) -> LevelConnections:
    """Connections the level opened (warm-up before its window, and inside it), reuses, retries, connect times."""
    measured = [r for r in records if not r.warmup]
    in_window = [r.connect_s * 1000.0 for r in measured if r.new_connection]
    warm_ms = [e.connect_s * 1000.0 for e in warm]
    return LevelConnections(
        opened=len(in_window) + len(warm_ms), opened_warm=len(warm_ms), opened_in_window=len(in_window),
        reused=sum(1 for r in measured if not r.new_connection and r.send_epoch_s is not None),
        retries=sum(1 for r in measured if r.retried),
        connect_ms=_ms_stats(in_window + warm_ms), in_window_connect_ms=_ms_stats(in_window),
        warm_connect_ms=_ms_stats(warm_ms))


def reasoning_stats(records: Sequence[RequestRecord]) -> dict[str, Any] | None:
    """Time to the first reasoning token and to the first answer token, when the server streamed reasoning."""
    rows = [r for r in records if r.ok and not r.warmup and r.ttft_reasoning_s is not None]
    if not rows:
        return None
    answer = [r.ttft_answer_s * 1000.0 for r in rows if r.ttft_answer_s is not None]
    return {"requests": len(rows), "requests_without_answer": len(rows) - len(answer),
            "ttft_reasoning_ms": dataclasses.asdict(latency_stats([r.ttft_reasoning_s * 1000.0 for r in rows])),
            "ttft_answer_ms": dataclasses.asdict(latency_stats(answer))}


def stopped_reason(stopped: RequestRecord, num_failed: int, *, prompt_tokens: int | None,
                   max_model_len: int | None, tokens_per_word: float, calibrated: bool) -> str:
    """Why a level was stopped early, with the fix when the server's message says the prompt is too long."""
    text = (f"stopped early: the first {num_failed} requests all failed with HTTP {stopped.http_status} "
            f"({stopped.error})")
    if any(w in (stopped.error or "").lower() for w in CONTEXT_WORDS):
        asked = f"the prompt (about {prompt_tokens} tokens asked" if prompt_tokens else "the prompt (length unknown"
        calib = f"{tokens_per_word:.2f} tokens per word" + ("" if calibrated else ", UNCALIBRATED")
        ctx = f"{max_model_len} tokens" if max_model_len else "its limit"
        text += (f"; {asked}, {calib}) plus the output does not fit the server's context ({ctx}, which a "
                 "server with parallel slots divides among them): lower --input-len or --output-len")
    return text
