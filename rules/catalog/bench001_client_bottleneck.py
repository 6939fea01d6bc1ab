"""BENCH001 (client-bottleneck): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/BENCH001/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import ms
from triage.rules.registry import rule


@rule("BENCH001", "client-bottleneck", Severity.HIGH, ("bench",), RuleDoc(
    what="The load generator could not keep the requested concurrency or rate: achieved < 90% of requested, "
         "event-loop lag p99 > 10 ms, client CPU >= 90%, or the level is already marked invalid. Such a level "
         "measures the client, not the server, and the other rules ignore it.",
    why="A saturated client under-delivers load and adds its own latency to TTFT: the numbers look like a "
        "slow server when the client is the limit.",
    example="bench.c64.client.achieved_concurrency = 41.5, bench.c64.client.event_loop_lag_ms_p99 = 38",
    fix="Run the client on another host, lower the load, or use more client processes.",
    references=("known pitfalls of load generators (single-process asyncio clients)",),
), thresholds=("BENCH001.min_achieved_frac", "BENCH001.max_loop_lag_ms", "BENCH001.max_client_cpu_pct"))
def bench001(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    bad = []
    for lv in ctx.levels(valid_only=False):
        c, p = lv.client, level_label(lv)
        reasons = []
        if not c.valid:
            reasons.append(c.invalid_reason or "marked invalid")
            evidence[f"{p}.client.invalid_reason"] = c.invalid_reason
        if lv.concurrency and c.achieved_concurrency is not None and \
                c.achieved_concurrency < ctx.th("BENCH001.min_achieved_frac") * lv.concurrency:
            reasons.append(f"achieved concurrency {c.achieved_concurrency:.1f} of {lv.concurrency}")
            evidence[f"{p}.client.achieved_concurrency"] = c.achieved_concurrency
        if c.event_loop_lag_ms_p99 is not None and c.event_loop_lag_ms_p99 > ctx.th("BENCH001.max_loop_lag_ms"):
            reasons.append(f"event-loop lag p99 {ms(c.event_loop_lag_ms_p99)}")
            evidence[f"{p}.client.event_loop_lag_ms_p99"] = c.event_loop_lag_ms_p99
        if c.cpu_pct is not None and c.cpu_pct >= ctx.th("BENCH001.max_client_cpu_pct"):
            reasons.append(f"client CPU {c.cpu_pct:.0f}%")
            evidence[f"{p}.client.cpu_pct"] = c.cpu_pct
        if reasons:
            bad.append(f"{p}: {', '.join(dict.fromkeys(reasons))}")
    if not bad:
        return None
    return Hit(
        title="The benchmark client was the bottleneck",
        message="These levels measured the client, not the server, and are invalid: " + "; ".join(bad) + ".",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.7,
        fix=Fix("Re-run those levels with the client on another host, with more client processes, or at a lower "
                "load.", ()),
    )
