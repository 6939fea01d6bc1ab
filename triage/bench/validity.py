"""Was the client the bottleneck? Measures the client while a level runs and gives a verdict.

- Event-loop lag: a task sleeps 1 ms at a time and records how late it wakes. A chunk that arrives while the
  loop is held is stamped late by up to that much, so the p99 of these samples is the p99 timestamp delay.
- Client CPU: this process's CPU seconds over the level's wall seconds (100 = one core busy). A single
  asyncio process cannot use more than one core.
- Achieved load: closed loop, the time-averaged number of requests in flight while work was still being
  handed out; open loop, the delay between each request's scheduled and actual send.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
import psutil

from triage.bench.aio import cancel_and_wait
from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec
from triage.core.report import ClientStats

# Thresholds, in one place; the first three are the same as rule BENCH001's (rules/thresholds.py), so the
# level's `valid` and the finding agree. A level is invalid when any is crossed.
MAX_CPU_PCT = 90.0                 # of one core (at or above): the event loop is near saturation
MAX_LOOP_LAG_MS = 10.0             # event-loop lag p99 above this: 1% of timestamps are late by more
MIN_CONCURRENCY_FRAC = 0.90        # closed loop: achieved / target concurrency
MIN_SEND_LAG_BUDGET_MS = 10.0      # open loop: send delay p99 allowed is max(this, SEND_LAG_FRAC x mean gap)
SEND_LAG_FRAC = 0.10
HOST_CONTENTION_CPU_PCT = 50.0     # loop lag with less client CPU than this: the host, not the client, was busy


class LoopLagMonitor:
    """Samples event-loop lag while running. Start with `start()`, stop with `await stop()`."""

    def __init__(self, interval_s: float = 0.001):
        self.interval_s = interval_s
        self.lags_ms: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        perf = time.perf_counter
        while True:
            before = perf()
            await asyncio.sleep(self.interval_s)
            self.lags_ms.append(max(0.0, (perf() - before - self.interval_s) * 1000.0))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def p99_ms(self) -> float | None:
        return float(np.percentile(self.lags_ms, 99)) if self.lags_ms else None


class CpuMeter:
    """CPU used by this process between start() and stop(), as a percent of one core."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._cpu0 = self._wall0 = 0.0

    def _cpu_s(self) -> float:
        t = self._proc.cpu_times()
        return t.user + t.system

    def start(self) -> None:
        self._cpu0, self._wall0 = self._cpu_s(), time.perf_counter()

    def stop(self) -> tuple[float | None, float]:
        """(cpu percent of one core, cpu seconds used)."""
        wall = time.perf_counter() - self._wall0
        cpu_s = self._cpu_s() - self._cpu0
        return (100.0 * cpu_s / wall if wall > 0 else None), cpu_s


def achieved_concurrency(records: list[RequestRecord]) -> tuple[float | None, bool]:
    """Time-averaged requests in flight. While work is still being handed out (first send to last send) a
    closed loop should hold its target; the drain at the end is excluded. Returns (value, steady):
    steady=False when there was no such window (a single wave) and the whole span was used."""
    spans = [(r.t0_s, r.t0_s + r.end_s) for r in records if r.end_s is not None]
    conversations = False
    if records and all(r.conversation is not None for r in records):
        # Multi-turn: a conversation is in flight from its first send to its last end, think time included.
        by_conv: dict[int, tuple[float, float]] = {}
        for r in records:
            if r.end_s is None:
                continue
            lo, hi = by_conv.get(r.conversation, (r.t0_s, r.t0_s + r.end_s))  # type: ignore[arg-type]
            by_conv[r.conversation] = (min(lo, r.t0_s), max(hi, r.t0_s + r.end_s))  # type: ignore[index]
        spans = list(by_conv.values())
        conversations = True
    if not spans:
        return None, False
    first_send = min(s for s, _ in spans)
    last_send = max(s for s, _ in spans)
    last_end = max(e for _, e in spans)
    steady = last_send - first_send > 1e-3
    if conversations:  # a second wave: some conversation began after another had ended
        steady = last_send > min(e for _, e in spans)
    lo, hi = (first_send, last_send) if steady else (first_send, last_end)
    if hi - lo <= 0:
        return float(len(spans)), False
    busy = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in spans)
    return busy / (hi - lo), steady


@dataclass(frozen=True, slots=True)
class ClientMeasurements:
    cpu_pct: float | None
    loop_lag_ms_p99: float | None
    send_lag_ms: list[float]  # open loop only: actual minus scheduled send time
    num_slot_waits: int  # open loop only: requests that waited for a free slot (--max-in-flight)


def _host_hint(cpu_pct: float | None) -> str:
    if cpu_pct is None or cpu_pct >= HOST_CONTENTION_CPU_PCT:
        return ""
    return f" (this process used only {cpu_pct:.0f}% of a core: other work on the host kept it from running)"


def _merged_hint(measured: list[RequestRecord]) -> str:
    """Kernel receive stamps survive a late loop, except where TCP merged segments the client had not read yet:
    the merged bytes carry the newest segment's arrival (tcp_try_coalesce in the kernel's tcp_input.c). A first
    token read in one piece with the next one shows as two equal chunk times; its TTFT may be that gap high."""
    ok = [r for r in measured if r.ok and len(r.chunk_times_s) > 1]
    merged = sum(1 for r in ok if r.chunk_times_s[0] == r.chunk_times_s[1])
    if not merged:
        return ""
    return (f"; {merged} of {len(ok)} first tokens were read in one piece with the next token and carry its "
            "arrival time (TCP merges unread segments), so their TTFT may read a token gap or more high")


def verdict(spec: LevelSpec, records: list[RequestRecord], m: ClientMeasurements,
            holds_concurrency: bool = True) -> ClientStats:
    """`holds_concurrency=False` for loads that do not keep `spec.concurrency` in flight by design (multi-turn
    think time, a ramp window): the achieved concurrency is reported but not judged."""
    measured = [r for r in records if not r.warmup]
    conc, steady = achieved_concurrency(measured)
    reasons = []
    if m.cpu_pct is not None and m.cpu_pct >= MAX_CPU_PCT:
        reasons.append(f"client CPU {m.cpu_pct:.0f}% of a core >= {MAX_CPU_PCT:.0f}%: the event loop was saturated")
    if m.loop_lag_ms_p99 is not None and m.loop_lag_ms_p99 > MAX_LOOP_LAG_MS:
        reasons.append(f"event-loop lag p99 {m.loop_lag_ms_p99:.1f} ms > {MAX_LOOP_LAG_MS:.0f} ms: 1% of "
                       "timestamps may be late by that much" + _host_hint(m.cpu_pct) + _merged_hint(measured))
    if spec.concurrency is not None and holds_concurrency and steady and conc is not None \
            and conc < MIN_CONCURRENCY_FRAC * spec.concurrency:
        reasons.append(f"achieved concurrency {conc:.1f} < {MIN_CONCURRENCY_FRAC:.0%} of {spec.concurrency}: "
                       "the client could not keep requests in flight" + _host_hint(m.cpu_pct))
    if spec.request_rate is not None and m.send_lag_ms:
        mean_gap_ms = 1000.0 / spec.request_rate
        budget = max(MIN_SEND_LAG_BUDGET_MS, SEND_LAG_FRAC * mean_gap_ms)
        lag_p99 = float(np.percentile(m.send_lag_ms, 99))
        if lag_p99 > budget:
            reasons.append(f"requests went out {lag_p99:.1f} ms (p99) after their scheduled time "
                           f"> {budget:.1f} ms: the client could not hold the rate")
    if m.num_slot_waits:
        reasons.append(f"{m.num_slot_waits} requests waited for a free slot: --max-in-flight capped the open loop")
    return ClientStats(cpu_pct=m.cpu_pct, event_loop_lag_ms_p99=m.loop_lag_ms_p99, achieved_concurrency=conc,
                       valid=not reasons, invalid_reason="; ".join(reasons) or None)
