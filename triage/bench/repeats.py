"""--repeat K: what one repeat records (its numbers for compare, its start, the host's load then, and the
client's own verdict), what one window of a level measured, and one level's client verdict over its repeats."""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from triage.bench.pool import ConnectEvent
from triage.bench.records import RequestRecord
from triage.bench.server_scrape import ServerScraper
from triage.bench.stats import repeat_summary
from triage.core.report import BenchLevel, ClientStats


def merge_client(stats: list[ClientStats]) -> ClientStats:
    """One level's client verdict over its repeats: invalid if any repeat was."""
    def mean(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return float(np.mean(present)) if present else None

    reasons = [s.invalid_reason for s in stats if s.invalid_reason]
    lags = [s.event_loop_lag_ms_p99 for s in stats if s.event_loop_lag_ms_p99 is not None]
    return ClientStats(cpu_pct=mean([s.cpu_pct for s in stats]), event_loop_lag_ms_p99=max(lags) if lags else None,
                       achieved_concurrency=mean([s.achieved_concurrency for s in stats]),
                       valid=all(s.valid for s in stats), invalid_reason="; ".join(dict.fromkeys(reasons)) or None)


def host_load_1m() -> float | None:
    """The host's 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 3)
    except (OSError, AttributeError):
        return None


def repeat_record(level: BenchLevel, rep: int, started_epoch_s: float, load_1m: float | None) -> dict[str, Any]:
    """One repeat as `repeats` keeps it: compare's metrics (repeat_summary), and for the drift check and the
    record its start (epoch s), the host's load then, its request count, TTFT and E2E spread, and the client's
    own validity verdict."""
    out: dict[str, Any] = {**repeat_summary(level), "repeat": rep, "started_epoch_s": started_epoch_s,
                           "host_load_1m": load_1m, "num_completed": level.requests.completed,
                           "ttft_ms_std": level.ttft_ms.std, "e2e_ms_std": level.e2e_ms.std,
                           "client_valid": level.client.valid}
    if level.client.invalid_reason:
        out["client_invalid_reason"] = level.client.invalid_reason
    return out


@dataclasses.dataclass
class Parts:
    """What one window of a level (its repeats back to back, or one interleaved repeat) measured."""
    scrapers: list[ServerScraper]
    records: list[RequestRecord] = dataclasses.field(default_factory=list)
    repeats: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    durations_s: list[float] = dataclasses.field(default_factory=list)
    client_stats: list[ClientStats] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    warm_events: list[ConnectEvent] = dataclasses.field(default_factory=list)
    gpu: dict[str, Any] | None = None
