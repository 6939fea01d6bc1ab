"""FLEET001 (replica-imbalance): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/FLEET001/.

A bench against several replicas (`triage bench --url A --url B`) records each replica's own latency and
/metrics window. Under the same load, one replica far slower than the rest means requests landing there
suffer: its flags differ (the KV cache configuration its /metrics reports), its hardware is slower, or the
balancer hands equal shares to unequal capacity (round robin).
"""
from __future__ import annotations

import statistics
from typing import Any

from triage.core.bench_data import LevelServer, Replica
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import ms
from triage.rules.registry import rule

_CONFIG_KEYS = ("num_gpu_blocks", "block_size", "gpu_memory_utilization", "cache_dtype", "enable_prefix_caching")


def _signals(rep: Replica) -> tuple[float | None, float | None, float | None]:
    server = rep.server or LevelServer()
    return (rep.ttft_ms.p99 if rep.ttft_ms else None, server.num_requests_waiting_mean,
            server.kv_cache_usage_frac_max)


@rule("FLEET001", "replica-imbalance", Severity.MEDIUM, ("bench",), RuleDoc(
    what="In a bench over several replicas, one replica's TTFT p99, queue or KV usage is far above the others' "
         "at the same level (TTFT >= 2x and >= 50 ms above the median of the others, or >= 2 more requests "
         "waiting, or KV >= 90% while the others stay <= 60%), or half its requests fail while the others' "
         "do not.",
    why="Requests that land on the slow replica wait while the others have room: the fleet's tail latency is "
        "that replica's. Round robin sends equal shares to unequal capacity; a replica started with other "
        "flags, or on slower hardware, has less capacity.",
    example="bench.c8.replicas[1].ttft_ms.p99 = 490, replicas[0] = 11; replica 1 num_gpu_blocks 12 vs 4096",
    fix="Give every replica the same flags; balance on load (least outstanding requests), not round robin; "
        "then `triage diagnose --url` on the slow replica for its hardware.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide' (Nginx least_conn in front of several vLLM instances)",
                "vllm-doctor's replica-imbalance rule (uneven load across replicas)"),
), thresholds=("FLEET001.min_ttft_ratio", "FLEET001.min_ttft_gap_ms", "FLEET001.min_queue_gap",
               "FLEET001.kv_full_frac", "FLEET001.kv_roomy_frac", "FLEET001.min_failed_frac"))
def fleet001(ctx: Context) -> Hit | None:
    levels = [lv for lv in ctx.levels() if lv.replicas and len(lv.replicas) >= 2]
    if not levels:
        raise MissingInput("the bench ran against one replica (give --url more than once)")
    worst = None
    for lv in levels:
        for i, rep in enumerate(lv.replicas):
            others = [r for j, r in enumerate(lv.replicas) if j != i]
            problems = _imbalance(ctx, rep, others)
            if problems and (worst is None or len(problems) > len(worst[2])):
                worst = (lv, rep, problems, others)
    if worst is None:
        return None
    lv, rep, problems, others = worst
    label = level_label(lv)
    evidence = _evidence(label, rep, others)
    differing = _config_differences(rep, others)
    if differing:
        evidence["derived.config_differences"] = differing
    causes = _causes(ctx, rep, differing)
    return Hit(
        title="One replica is much slower than the others",
        message=f"At {label}, replica {rep.replica} ({rep.url}) has {', '.join(problems)}. Likely "
                f"cause: {'; '.join(causes)}.",
        evidence=evidence, certainty=Certainty.CONFIRMED if differing else Certainty.LIKELY, impact=0.5,
        fix=Fix(("Start every replica with the same flags (" + "; ".join(differing) + "). " if differing else "")
                + "Balance on load, not in turn: least outstanding requests (Nginx least_conn, Envoy "
                  "LEAST_REQUEST, `triage bench --balance least-in-flight` to compare). Then run `triage diagnose "
                  f"--url {rep.url}` on the slow replica.", ()),
    )


def _evidence(label: str, rep: Replica, others: list[Replica]) -> dict[str, Any]:
    ttft, queue, kv = _signals(rep)
    key = f"{label}.replicas[{rep.replica}]"
    evidence: dict[str, Any] = {f"{key}.url": rep.url, f"{key}.ttft_ms.p99": ttft,
                                f"{key}.server.num_requests_waiting_mean": queue,
                                f"{key}.server.kv_cache_usage_frac_max": kv}
    for o in others:
        evidence[f"{label}.replicas[{o.replica}].ttft_ms.p99"] = _signals(o)[0]
    return evidence


def _causes(ctx: Context, rep: Replica, differing: list[str]) -> list[str]:
    causes = [f"its flags differ ({'; '.join(differing)})"] if differing else []
    if ctx.bench_config().balance == "round-robin":
        causes.append("the requests were spread round robin, equal shares to unequal capacity")
    if _failed_frac(rep) >= ctx.th("FLEET001.min_failed_frac"):
        causes.insert(0, "it is not serving: take it out of the balancer until it is healthy")
    elif not differing:
        causes.append("its hardware may be slower (same flags as far as /metrics says)")
    return causes


def _failed_frac(rep: Replica) -> float:
    return (rep.failed or 0) / rep.requests if rep.requests else 0.0


def _imbalance(ctx: Context, rep: Replica, others: list[Replica]) -> list[str]:
    ttft, queue, kv = _signals(rep)
    out = []
    if _failed_frac(rep) >= ctx.th("FLEET001.min_failed_frac") and \
            all(_failed_frac(o) < ctx.th("FLEET001.min_failed_frac") / 10 for o in others):
        out.append(f"{rep.failed} of its {rep.requests} requests failed while the others served "
                   "theirs (down, unreachable, or refusing)")
    other_ttft = [t for t in (_signals(o)[0] for o in others) if t is not None]
    if ttft is not None and other_ttft:
        base = statistics.median(other_ttft)
        if ttft >= ctx.th("FLEET001.min_ttft_ratio") * base and ttft - base >= ctx.th("FLEET001.min_ttft_gap_ms"):
            out.append(f"TTFT p99 {ms(ttft)} against {ms(base)} on the others")
    other_queue = [q for q in (_signals(o)[1] for o in others) if q is not None]
    if queue is not None and other_queue and queue - max(other_queue) >= ctx.th("FLEET001.min_queue_gap"):
        out.append(f"{queue:.1f} requests waiting against {max(other_queue):.1f}")
    other_kv = [k for k in (_signals(o)[2] for o in others) if k is not None]
    if kv is not None and other_kv and kv >= ctx.th("FLEET001.kv_full_frac") and \
            max(other_kv) <= ctx.th("FLEET001.kv_roomy_frac"):
        out.append(f"its KV cache {kv:.0%} full against at most {max(other_kv):.0%}")
    return out


def _config_differences(rep: Replica, others: list[Replica]) -> list[str]:
    mine = rep.cache_config or {}
    out = []
    for key in _CONFIG_KEYS:
        theirs = {str(o.cache_config.get(key)) for o in others if o.cache_config}
        if key in mine and theirs and str(mine[key]) not in theirs:
            out.append(f"{key} {mine[key]} vs {', '.join(sorted(theirs))}")
    return out
