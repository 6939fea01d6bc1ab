"""Where the server saturates. The knee is the last level before the curve bends: going from it to the next
level gains < 10% output throughput while TTFT p99 grows > 50%. Closed-loop (concurrency) and open-loop (rate)
levels are separate series, and so is each prompt length of an --input-len sweep. Levels the client invalidated are left out: their numbers are the client's."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from triage.core.report import BenchLevel, level_name

MAX_THROUGHPUT_GAIN_FRAC = 0.10
MIN_TTFT_P99_GROWTH_FRAC = 0.50


def load_series(levels: Sequence[BenchLevel]) -> list[tuple[str, int | None, list[BenchLevel]]]:
    """(axis, input_len, levels sorted by load) for each load curve: closed and open loop apart, and in an
    --input-len sweep one curve per prompt length (a longer prompt is a different workload, not more load)."""
    out = []
    for axis, load in (("concurrency", lambda lv: lv.concurrency), ("request_rate", lambda lv: lv.request_rate)):
        on_axis = [lv for lv in levels if load(lv) is not None]
        for length in dict.fromkeys(lv.input_len for lv in on_axis):
            out.append((axis, length, sorted((lv for lv in on_axis if lv.input_len == length), key=load)))
    return out


def _knee(series: list[BenchLevel]) -> tuple[BenchLevel, str] | None:
    for cur, nxt in zip(series, series[1:], strict=False):
        t0, t1 = cur.output_tokens_per_s, nxt.output_tokens_per_s
        p0, p1 = cur.ttft_ms.p99, nxt.ttft_ms.p99
        if not t0 or t1 is None or not p0 or p1 is None:
            continue
        gain, growth = t1 / t0 - 1.0, p1 / p0 - 1.0
        if gain < MAX_THROUGHPUT_GAIN_FRAC and growth > MIN_TTFT_P99_GROWTH_FRAC:
            return cur, (f"{level_name(cur)} -> {level_name(nxt)}: output throughput {gain:+.0%}, "
                         f"TTFT p99 {growth:+.0%}")
    return None


def summary(levels: Sequence[BenchLevel]) -> dict[str, Any] | None:
    if not levels:
        return None
    valid = [lv for lv in levels if lv.client.valid]
    out: dict[str, Any] = {"knee_level": None, "knee_reason": None}
    for _axis, _length, series in load_series(valid):
        found = _knee(series)
        if found and out["knee_level"] is None:
            out["knee_level"], out["knee_reason"] = level_name(found[0]), found[1]
    with_goodput = [lv for lv in valid if lv.goodput_requests_per_s is not None]
    best = max(with_goodput, key=lambda lv: lv.goodput_requests_per_s, default=None)
    out["best_goodput_level"] = level_name(best) if best else None
    out["best_goodput_requests_per_s"] = best.goodput_requests_per_s if best else None
    with_tput = [lv for lv in valid if lv.output_tokens_per_s is not None]
    top = max(with_tput, key=lambda lv: lv.output_tokens_per_s, default=None)
    out["best_throughput_level"] = level_name(top) if top else None
    out["best_output_tokens_per_s"] = top.output_tokens_per_s if top else None
    out["num_invalid_levels"] = len(levels) - len(valid)
    return out
