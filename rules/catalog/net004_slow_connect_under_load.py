"""NET004 (slow-connect-under-load): new connections take far longer under load than when the server is idle (bench levels).

Self-contained: its thresholds are declared here, beside the rule, and added to the shared table.
"""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import ms
from triage.rules.registry import rule
from triage.rules.thresholds import THRESHOLDS, Threshold

THRESHOLDS.update({
    "NET004.connect_ratio": Threshold(10.0, "ratio", "triage bench: connect_ms of connections opened inside a "
                                      "level vs before any load (idle_connect_ms_p50)",
                                      "under-load connect p50 over idle connect p50 at or above which it fires"),
    "NET004.min_excess_ms": Threshold(50.0, "ms", "a loopback or same-zone TCP connect takes well under 5 ms; "
                                      "50 ms more is a queue, not the network",
                                      "least the under-load connect p50 must exceed the idle one by"),
})


@rule("NET004", "slow-connect-under-load", Severity.MEDIUM, ("bench",), RuleDoc(
    what="Connections the bench opened while a level was running (connect_ms, measured apart from TTFT) took "
         "far longer than the connections it opened before any load: p50 at least 10x the idle connect time "
         "and at least 50 ms more.",
    why="A server that is slow to accept() new connections under load (a full listen backlog, acceptor threads "
        "busy with requests, SYNs dropped and resent after a second) adds that wait to every new client's first "
        "request. Clients that reconnect often (a server or proxy that closes keep-alive connections, like "
        "llama-server after a stream) pay it on every request.",
    example="bench.config.idle_connect_ms_p50 = 0.4, bench.c64.connections.in_window_connect_ms.p50 = 1003",
    fix="Raise the server's listen backlog (and net.core.somaxconn), give its acceptor more threads, keep "
        "connections alive (a proxy in front should pool them), or let clients reuse connections.",
    references=("contract: connect_ms is measured apart from TTFT", "listen(2): the backlog and SYN queueing"),
), thresholds=("NET004.connect_ratio", "NET004.min_excess_ms"))
def net004(ctx: Context) -> Hit | None:
    ctx.bench_section()
    idle = ctx.bench_config().idle_connect_ms_p50
    if not isinstance(idle, int | float):
        raise MissingInput("the bench report has no idle connect time (a triage bench before connect_ms)")
    levels = [lv for lv in ctx.levels(valid_only=False) if lv.connections]
    if not levels:
        raise MissingInput("the bench levels carry no connection statistics")
    evidence: dict[str, Any] = {"bench.config.idle_connect_ms_p50": idle}
    slow = []
    for lv in levels:
        window = lv.connections.in_window_connect_ms
        under_load = window.p50 if window is not None else None
        if not isinstance(under_load, int | float):
            continue
        if under_load >= ctx.th("NET004.connect_ratio") * idle and under_load >= idle + ctx.th("NET004.min_excess_ms"):
            p = level_label(lv)
            evidence[f"{p}.connections.in_window_connect_ms.p50"] = under_load
            evidence[f"{p}.connections.opened_in_window"] = lv.connections.opened_in_window
            slow.append(f"{p}: {ms(under_load)} for {lv.connections.opened_in_window} connections")
    if not slow:
        return None
    return Hit(
        title="New connections are slow under load",
        message=f"With the server idle a connection took {ms(idle)}; under load: " + "; ".join(slow) + ". The "
                "wait was measured as connect time, not TTFT, but every client that opens a connection pays it.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.3,
        fix=Fix("Raise the server's listen backlog and net.core.somaxconn, give its acceptor threads room, and "
                "keep connections alive (pool them in any proxy in front).",
                ("sysctl net.core.somaxconn",)),
    )
