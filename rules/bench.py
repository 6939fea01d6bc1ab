"""Rules about the measurement itself (bench levels)."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import ms, pct
from triage.rules.registry import rule


# ------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------
@rule("BENCH002", "request-errors", Severity.MEDIUM, ("bench",), RuleDoc(
    what="More than 1% of a level's requests failed (high above 5%, critical above 20%).",
    why="Failed requests are missing from the latency statistics and hide overload: a server that sheds "
        "load with 429s or 503s looks fast for the requests that got through.",
    example="bench.c64.requests.failed = 37, bench.c64.requests.completed = 463, "
            "bench.c64.requests.errors_by_kind = {http_503: 30, timeout: 7}",
    fix="The error classes say where to look: 429/503 means admission limits or overload, timeouts mean "
        "queueing, 500s and dropped streams are server faults (read its log).",
    references=("seed 003 application layer", "contract: failed requests count as missing the SLO"),
), thresholds=("BENCH002.error_rate_frac", "BENCH002.error_rate_frac_high", "BENCH002.error_rate_frac_critical"))
def bench002(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    worst = 0.0
    kinds: dict[str, int] = {}
    for lv in ctx.levels(valid_only=False):
        total = lv.requests.completed + lv.requests.failed
        if total == 0:
            continue
        rate = lv.requests.failed / total
        if rate > ctx.th("BENCH002.error_rate_frac"):
            p = level_label(lv)
            evidence[f"{p}.requests.failed"] = lv.requests.failed
            evidence[f"{p}.requests.completed"] = lv.requests.completed
            evidence[f"{p}.requests.errors_by_kind"] = dict(lv.requests.errors_by_kind)
            for k, n in lv.requests.errors_by_kind.items():
                kinds[k] = kinds.get(k, 0) + n
            worst = max(worst, rate)
    if not evidence:
        return None
    severity = (Severity.CRITICAL if worst > ctx.th("BENCH002.error_rate_frac_critical") else
                Severity.HIGH if worst > ctx.th("BENCH002.error_rate_frac_high") else Severity.MEDIUM)
    hints = []
    if any(k.endswith(("429", "503")) for k in kinds):
        hints.append("429/503: the server (or a gateway) sheds load: admission limits or overload")
    if any("timeout" in k for k in kinds):
        hints.append("timeouts: requests queued longer than the client waits (see SCHED003)")
    if any(k.endswith("500") or "stream" in k or "disconnect" in k for k in kinds):
        hints.append("500s or broken streams: server-side faults, read the server log")
    return Hit(
        title="Requests failed during the benchmark",
        message=f"Up to {pct(worst)} of a level's requests failed ({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}).",
        evidence=evidence, severity=severity, certainty=Certainty.CONFIRMED, impact=min(1.0, worst * 2),
        fix=Fix("Look where the error classes point: " + ("; ".join(hints) if hints else
                "read the server log for the failed requests") + ".", ()),
    )


# ------------------------------------------------------------------------------------------------
@rule("BENCH003", "slo-missed", Severity.MEDIUM, ("bench",), RuleDoc(
    what="TTFT p99 > 500 ms or TPOT p99 > 50 ms at some level, the chat defaults; SLOs given to the bench "
         "(`--slo ttft_ms=...,tpot_ms=...`) override them. Without an SLO and for non-chat endpoints, skipped.",
    why="This is the symptom users feel; the other findings say why. Goodput (requests/s meeting the SLO) "
        "shows how far off the level is (seed 004 §4).",
    example="bench.c32.ttft_ms.p99 = 2400, slo.ttft_ms = 500",
    fix="Read the findings this one links to (queueing, KV pressure, throttling); run no hotter than the "
        "highest level that met the SLO.",
    references=("seed 004 §4 (TTFT < 500 ms P99 for chat, TPOT < 50 ms)",),
), thresholds=("BENCH003.ttft_p99_ms", "BENCH003.tpot_p99_ms"))
def bench003(ctx: Context) -> Hit | None:
    config = ctx.bench_section().config
    slo = dict(config.get("slo") or {})
    if not slo:
        endpoint = str(config.get("endpoint") or "")
        if "chat" not in endpoint:
            raise MissingInput("no SLO was given and the endpoint is not chat (pass `triage bench --slo ttft_ms=...`)")
        slo = {"ttft_ms": ctx.th("BENCH003.ttft_p99_ms"), "tpot_ms": ctx.th("BENCH003.tpot_p99_ms")}
    limits = {k: v for k, v in slo.items() if k in ("ttft_ms", "tpot_ms", "e2e_ms") and v is not None}
    if not limits:
        raise MissingInput(f"the SLO {slo} names none of ttft_ms, tpot_ms, e2e_ms")
    evidence: dict[str, Any] = {f"slo.{k}": v for k, v in limits.items()}
    missed = []
    passing = []
    for lv in ctx.levels():
        p = level_label(lv)
        over = []
        for key, limit in limits.items():
            p99 = getattr(lv, key).p99
            if p99 is not None and p99 > limit:
                over.append(key)
                evidence[f"{p}.{key}.p99"] = p99
        if over:
            missed.append((lv, over))
            if lv.goodput_requests_per_s is not None:
                evidence[f"{p}.goodput_requests_per_s"] = lv.goodput_requests_per_s
        else:
            passing.append(lv)
    if not missed:
        return None
    best = max(passing, key=lambda lv: lv.concurrency or lv.request_rate or 0) if passing else None
    first = missed[0]
    return Hit(
        title="Latency SLO missed",
        message=f"{len(missed)} level(s) miss the SLO, starting at {level_label(first[0])} "
                f"({', '.join(k + ' p99' for k in first[1])})."
                + (f" The highest level that meets it is {level_label(best)}." if best else " No level meets it."),
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.5,
        fix=Fix("The other findings in this report say why (queueing, KV pressure, throttling); until they are "
                "fixed, keep the load at or below "
                + (f"{level_label(best)}." if best else "the lowest level measured, or add capacity."), ()),
    )
