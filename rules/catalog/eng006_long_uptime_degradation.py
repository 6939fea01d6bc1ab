"""ENG006 (long-uptime-degradation): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG006/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerProcessData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("ENG006", "long-uptime-degradation", Severity.MEDIUM, ("bench", "baseline"), RuleDoc(
    what="Throughput has fallen >= 15% against this host's own earlier bench report at the same concurrency, "
         "while preemptions accumulate (and, where measured, the server has been up for a day or more).",
    why="Long-running engines degrade: KV fragmentation and leaks show up as preemptions and a slow "
        "throughput slide (seed 003 case 2: 610 -> 420 tok/s after five days; seed 002: -15% after 48 h).",
    example="baseline.bench.c16.output_tokens_per_s = 610, bench.c16.output_tokens_per_s = 420, "
            "bench.c16.server.num_preemptions_delta = 55",
    fix="Do a rolling restart, then alert on a week-over-week throughput drop (compare with `triage compare`).",
    references=("seed 003 case 2 (KV-cache fragmentation after five days)", "seed 002 lessons (daily rolling restart)"),
), thresholds=("ENG006.min_drop_frac", "ENG006.long_uptime_s"))
def eng006(ctx: Context) -> Hit | None:
    base_bench = (ctx.baseline or {}).get("bench")
    if not isinstance(base_bench, dict) or not base_bench.get("levels"):
        raise MissingInput("the baseline report has no bench levels to compare with")
    base_model = (ctx.baseline.get("target") or {}).get("model") or (base_bench.get("config") or {}).get("model")
    cur_model = ctx.bench_section().config.get("model")
    if base_model and cur_model and base_model != cur_model:
        raise MissingInput(f"the baseline ran model {base_model!r}, this bench {cur_model!r}: not comparable")
    base_tps = {lv.get("concurrency"): lv.get("output_tokens_per_s") for lv in base_bench["levels"]
                if lv.get("concurrency") and lv.get("output_tokens_per_s") and (lv.get("client") or {}).get("valid", True)}
    drops = []
    for lv in ctx.levels():
        before = base_tps.get(lv.concurrency)
        if before and lv.output_tokens_per_s is not None:
            drops.append((lv, before, 1 - lv.output_tokens_per_s / before))
    if not drops:
        raise MissingInput("no concurrency level appears in both this bench and the baseline")
    worst = max(drops, key=lambda d: d[2])
    if worst[2] < ctx.th("ENG006.min_drop_frac"):
        return None
    preempt = [(lv, s["num_preemptions_delta"]) for lv, s in ctx.level_server() if s.get("num_preemptions_delta") is not None]
    if not preempt:
        raise MissingInput("throughput fell, but preemptions were not measured to tell degradation from other causes")
    growing = [(lv, n) for lv, n in preempt if n > 0]
    if not growing:
        return None
    uptime = ctx.seen(ServerProcessData).uptime_s
    if uptime is not None and uptime < ctx.th("ENG006.long_uptime_s"):
        return None
    lv, before, drop = worst
    evidence: dict[str, Any] = {f"baseline.{level_label(lv)}.output_tokens_per_s": before,
                                f"{level_label(lv)}.output_tokens_per_s": lv.output_tokens_per_s,
                                "derived.throughput_drop_frac": round(drop, 3)}
    for glv, n in growing:
        evidence[f"{level_label(glv)}.server.num_preemptions_delta"] = n
    if uptime is not None:
        evidence["server_process.uptime_s"] = uptime
    return Hit(
        title="Throughput has degraded since the earlier report",
        message=f"Throughput at {level_label(lv)} fell {pct(drop)} against this host's earlier report "
                f"({before:.0f} -> {lv.output_tokens_per_s:.0f} tok/s) while preemptions accumulate.",
        evidence=evidence, certainty=Certainty.LIKELY if uptime is not None else Certainty.POSSIBLE, impact=0.5,
        fix=Fix("Do a rolling restart of the server, and alert on a week-over-week throughput drop; gate it in CI "
                "with `triage compare`.", ("triage compare BASE.json CAND.json --max-regression output_tokens_per_s=15",)),
    )
