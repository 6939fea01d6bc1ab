"""One machine's (or one process's) share of a bench: `--shard i/N` and `--workers N`.

- A closed-loop level of concurrency C gives shard i `C // N` in flight, plus one for the first `C % N`
  shards, so the shards together keep exactly C in flight. C < N cannot be split and is an error.
- An open-loop level of rate R gives each shard R / N: the superposition of N independent Poisson streams of
  rate R / N is a Poisson stream of rate R (for a gamma --burstiness the sum is not gamma again; the report
  says so).
- --num-requests splits the same way as concurrency. Each shard draws its own prompts (seed + i).
- In a Kubernetes Indexed Job, `--shard env` reads i from JOB_COMPLETION_INDEX and N from TRIAGE_SHARDS
  (the manifest sets it to the Job's completions).

Clock skew: every shard reads the server's HTTP `Date` header once (one-second resolution) around its own
epoch clock, which bounds the shard's offset from the server's clock to an interval; two shards' skew is
bounded by the difference of their intervals (`bench merge` reports it). This assumes the shards reach
servers with one clock (one server, or replicas kept in sync by NTP).
"""
from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime

import httpx

from triage.bench.run_config import BenchConfig
from triage.core.errors import UsageError

SHARD_SEED_STRIDE = 7919


def parse_shard(text: str) -> tuple[int, int]:
    """'2/8' -> (2, 8); 'env' -> (JOB_COMPLETION_INDEX, TRIAGE_SHARDS)."""
    if text.strip() == "env":
        index, count = os.environ.get("JOB_COMPLETION_INDEX"), os.environ.get("TRIAGE_SHARDS")
        if index is None or count is None:
            raise UsageError("--shard env needs JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job) and "
                             "TRIAGE_SHARDS (set it to the Job's completions)")
        text = f"{index}/{count}"
    try:
        index_text, count_text = text.split("/")
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise UsageError(f"--shard {text!r}: expected INDEX/COUNT like 0/4, or env") from None
    if count < 1 or not 0 <= index < count:
        raise UsageError(f"--shard {text!r}: the index must be 0 to COUNT-1")
    return index, count


def _split(total: int, index: int, count: int) -> int:
    return total // count + (1 if index < total % count else 0)


def shard_config(cfg: BenchConfig, index: int, count: int) -> BenchConfig:
    levels = []
    for lv in cfg.levels:
        if lv.concurrency is not None:
            if lv.concurrency < count:
                raise UsageError(f"--concurrency {lv.concurrency} cannot be split over {count} shards/workers: "
                                 "each needs at least one request in flight")
            levels.append(dataclasses.replace(lv, concurrency=_split(lv.concurrency, index, count)))
        else:
            levels.append(dataclasses.replace(lv, request_rate=lv.request_rate / count))
    num = cfg.num_requests
    if num is not None:
        if num < count:
            raise UsageError(f"--num-requests {num} cannot be split over {count} shards/workers")
        num = _split(num, index, count)
    return dataclasses.replace(cfg, levels=tuple(levels), num_requests=num,
                               seed=cfg.seed + SHARD_SEED_STRIDE * index)


def clock_offset_s(url: str, headers: dict[str, str] | None = None, timeout_s: float = 5.0) -> list[float] | None:
    """[low, high] of (this host's epoch clock - the server's clock), from one Date header; None without one."""
    try:
        sent = time.time()
        response = httpx.get(url.rstrip("/") + "/health", headers=headers, timeout=timeout_s)
        received = time.time()
    except httpx.HTTPError:
        return None
    date = response.headers.get("date")
    if not date:
        return None
    try:
        server = parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return None
    return [round(sent - server - 1.0, 3), round(received - server, 3)]


def skew_bound_s(offsets: Sequence[Sequence[float] | None]) -> float | None:
    """The most two shards' clocks can differ, given each one's offset interval; None when one is unknown."""
    if len(offsets) < 2:
        return 0.0
    if any(o is None for o in offsets):
        return None
    return round(max(hi_i - lo_j for lo_i, hi_i in offsets for lo_j, hi_j in offsets), 3)  # type: ignore[misc]
