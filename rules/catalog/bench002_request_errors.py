"""BENCH002 (request-errors): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/BENCH002/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("BENCH002", "request-errors", Severity.MEDIUM, ("bench",), RuleDoc(
    what="More than 1% of a level's requests failed (high above 5%, critical above 20%).",
    why="Failed requests are missing from the latency statistics and hide overload: a server that sheds "
        "load with 429s or 503s looks fast for the requests that got through.",
    example="bench.c64.requests.failed = 37, bench.c64.requests.completed = 463, "
            "bench.c64.requests.errors_by_kind = {http_503: 30, timeout: 7}",
    fix="The error classes say where to look: 429/503 means admission limits or overload, timeouts mean "
        "queueing, 500s and dropped streams are server faults (read its log).",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Application Layer'", "contract: failed requests count as missing the SLO"),
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
