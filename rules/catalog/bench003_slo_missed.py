"""BENCH003 (slo-missed): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/BENCH003/."""
from __future__ import annotations

import dataclasses
from typing import Any

from triage.core.bench_data import Slo
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.registry import rule


@rule("BENCH003", "slo-missed", Severity.MEDIUM, ("bench",), RuleDoc(
    what="TTFT p99 > 500 ms or TPOT p99 > 50 ms at some level, the chat defaults; SLOs given to the bench "
         "(`--slo ttft_ms=...,tpot_ms=...`) override them. Without an SLO and for non-chat endpoints, skipped.",
    why="This is the symptom users feel; the other findings say why. Goodput (requests/s meeting the SLO) "
        "shows how far off the level is (an explainer of inference as a memory-bound problem, 'the metrics that matter').",
    example="bench.c32.ttft_ms.p99 = 2400, slo.ttft_ms = 500",
    fix="Read the findings this one links to (queueing, KV pressure, throttling); run no hotter than the "
        "highest level that met the SLO.",
    references=("an explainer of inference as a memory-bound problem, 'the metrics that matter' (TTFT < 500 ms P99 for chat, TPOT < 50 ms)",),
), thresholds=("BENCH003.ttft_p99_ms", "BENCH003.tpot_p99_ms"))
def bench003(ctx: Context) -> Hit | None:
    ctx.bench_section()
    config = ctx.bench_config()
    slo = config.slo
    if slo is None or slo == Slo():        # none given (an empty --slo is none)
        if "chat" not in str(config.endpoint or ""):
            raise MissingInput("no SLO was given and the endpoint is not chat (pass `triage bench --slo ttft_ms=...`)")
        slo = Slo(ttft_ms=ctx.th("BENCH003.ttft_p99_ms"), tpot_ms=ctx.th("BENCH003.tpot_p99_ms"))
    # The SLO's families are the level's latency fields of the same name (LatencyStats each).
    limits = {f.name: getattr(slo, f.name) for f in dataclasses.fields(slo) if getattr(slo, f.name) is not None}
    if not limits:
        raise MissingInput("the SLO names none of ttft_ms, tpot_ms, e2e_ms")
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
