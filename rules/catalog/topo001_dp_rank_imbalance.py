"""TOPO001 (dp-rank-imbalance): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/TOPO001/.

Under data parallelism one API server (or a router) spreads requests over several engine cores, each with its
own batch and KV cache. The engine labels each series with its rank (vLLM `engine`, SGLang `dp_rank`); summed,
one rank's queue averages away. Kept apart, a rank that queues while another has none is the symptom.
"""
from __future__ import annotations

import statistics
from typing import Any

from triage.core.probe_data import RankWindow, ServerMetricsData, TopologyData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import ms
from triage.rules.registry import rule


def _ttft_ms(r: RankWindow, min_requests: float) -> float | None:
    t = r.ttft
    if t is None or t.mean_s is None or (t.count_delta or 0) < min_requests:
        return None
    return t.mean_s * 1000


def _problems(ctx: Context, hot: RankWindow, others: list[RankWindow]) -> list[str]:
    out = []
    wait = hot.num_requests_waiting_max or 0
    idle = [o for o in others if (o.num_requests_waiting_max or 0) == 0]
    if wait >= ctx.th("TOPO001.min_queue") and idle:
        out.append(f"{wait:g} requests waiting while rank{'s' if len(idle) > 1 else ''} "
                   f"{', '.join(o.rank or '?' for o in idle)} had none")
    n = ctx.th("TOPO001.min_requests")
    mine, theirs = _ttft_ms(hot, n), [t for t in (_ttft_ms(o, n) for o in others) if t is not None]
    if mine is not None and theirs:
        base = statistics.median(theirs)
        if mine >= ctx.th("TOPO001.min_ttft_ratio") * base and mine - base >= ctx.th("TOPO001.min_ttft_gap_ms"):
            out.append(f"TTFT mean {ms(mine)} against {ms(base)} on the others")
    return out


def _fix(ctx: Context, topo: TopologyData, hot: str) -> Fix:
    engine = ctx.engine()
    tmap = engine.module.topology if engine.module is not None else None
    if tmap is None or tmap.dp_balance_fix is None:
        return Fix(f"Spread requests over the ranks on their load, not in turn; then `triage diagnose` rank {hot}'s "
                   "GPU.", ())
    text, knobs = tmap.dp_balance_fix(topo.dp_load_balance, hot, engine.version)
    if not knobs:
        return Fix(text, ())
    cmds, note = engine_flags(knobs, engine)
    return Fix(text + note, cmds)


@rule("TOPO001", "dp-rank-imbalance", Severity.HIGH, ("server_metrics",), RuleDoc(
    what="Under data parallelism, one rank's queue reaches >= 4 requests while another rank has none, or its "
         "TTFT mean is >= 2x (and >= 100 ms above) the other ranks' median, read per rank from the engine's own "
         "rank label (vLLM `engine`, SGLang `dp_rank`).",
    why="Every request sent to the hot rank waits behind its queue while the other ranks have room: the "
        "deployment's tail latency is that rank's, and the sum over ranks looks healthy.",
    example="server_metrics.ranks[2].num_requests_waiting_max = 23, ranks[0].num_requests_waiting_max = 0",
    fix="Balance on load: for SGLang `--load-balance-method total_tokens` from 0.5.8 (shortest_queue, on request "
        "counts, in 0.5.3-0.5.7; minimum_tokens up to 0.5.2); for vLLM find what pins requests to the rank "
        "(the X-data-parallel-rank header, from 0.11.1), or balance outside it on the ranks' queues "
        "(--data-parallel-external-lb, from 0.11.1).",
    references=("claim:vllm.metrics-engine-label", "claim:vllm.dp-lb-score", "claim:vllm.dp-lb-score-0.33",
                "claim:vllm.dp-rank-header", "claim:sglang.metrics-dp-rank-label", "claim:sglang.lb-auto-round-robin",
                "claim:sglang.lb-total-tokens", "claim:sglang.lb-minimum-tokens",
                "claim:sglang.lb-minimum-tokens-deprecated", "claim:sglang.lb-shortest-queue-requests",
                "claim:vllm.dp-external-lb-flag", "docs/TOPOLOGIES.md"),
), thresholds=("TOPO001.min_queue", "TOPO001.min_ttft_ratio", "TOPO001.min_ttft_gap_ms", "TOPO001.min_requests"))
def topo001(ctx: Context) -> Hit | None:
    metrics = ctx.need(ServerMetricsData)
    if len(metrics.ranks) < 2:
        raise MissingInput("the /metrics carry no data-parallel rank label with two or more values")
    worst = None
    for i, hot in enumerate(metrics.ranks):
        problems = _problems(ctx, hot, [r for j, r in enumerate(metrics.ranks) if j != i])
        if problems and (worst is None or len(problems) > len(worst[1])):
            worst = (hot, problems)
    if worst is None:
        return None
    hot, problems = worst
    topo = ctx.seen(TopologyData)
    evidence: dict[str, Any] = {}
    for i, r in enumerate(metrics.ranks):
        key = f"server_metrics.ranks[{i}]"
        evidence[f"{key}.rank"] = r.rank
        evidence[f"{key}.num_requests_waiting_max"] = r.num_requests_waiting_max
        evidence[f"{key}.kv_cache_usage_frac_max"] = r.kv_cache_usage_frac_max
        if r.ttft is not None and r.ttft.mean_s is not None:
            evidence[f"{key}.ttft.mean_s"] = round(r.ttft.mean_s, 4)
    if topo.dp_load_balance:
        evidence["topology.dp_load_balance"] = topo.dp_load_balance
    return Hit(
        title=f"Data-parallel rank {hot.rank} is overloaded while the others have room",
        message=f"Rank {hot.rank} of {len(metrics.ranks)} has {'; '.join(problems)}. The requests sent to rank "
                f"{hot.rank} wait behind its queue; summed over the ranks, as one scrape of /metrics reads, the "
                "queue looks like a shared one.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.5, fix=_fix(ctx, topo, hot.rank or "?"))
