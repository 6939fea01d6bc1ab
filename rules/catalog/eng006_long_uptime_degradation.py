"""ENG006 (long-uptime-degradation): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG006/.

Seeds 002 and 003 blame "KV fragmentation" and prescribe a rolling restart. Paged KV hands out fixed-size
blocks from a free pool, so it does not fragment; the long-run slowdowns in vLLM's issues trace to host-RAM
leaks or to KV usage stuck after failed requests (vllm #15085, #50150, #27073). So the rule looks for a leak
first (KV still in use with nothing running, RSS growth against the earlier report) and calls a restart what
it is: a workaround.
"""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerMetricsData, ServerProcessData
from triage.core.report import BenchLevel, Certainty, Fix, Report, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("ENG006", "long-uptime-degradation", Severity.MEDIUM, ("bench", "baseline"), RuleDoc(
    what="Throughput has fallen >= 15% against this host's own earlier bench report at the same concurrency, "
         "while preemptions accumulate (and, where measured, the server has been up for a day or more).",
    why="Long-running engines degrade through leaks: KV blocks still held after failed or aborted requests, or "
        "host memory that grows; both show up as preemptions and a slow throughput slide ('How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 2: KV-Cache Fragmentation': "
        "610 -> 420 tok/s after five days; the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM): -15% after 48 h). Paged KV does not fragment.",
    example="baseline.bench.c16.output_tokens_per_s = 610, bench.c16.output_tokens_per_s = 420, "
            "bench.c16.server.num_preemptions_delta = 55",
    fix="Check for a leak first: KV usage at idle (it should return to ~0) and the server's RSS over days. "
        "Check the engine's release notes for a fix (some are still open, e.g. vLLM #15085) and file a bug with "
        "those numbers; a rolling restart is only a workaround that buys time.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 2: KV-Cache Fragmentation' (attributes it to KV fragmentation; paged KV does not fragment)",
                "a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Lessons Learned and Common Pitfalls' (daily rolling restart: a workaround)",
                "vLLM issues #15085, #50150, #27073 (KV usage stuck after failed requests, host RAM growth)"),
), thresholds=("ENG006.min_drop_frac", "ENG006.long_uptime_s", "ENG006.idle_kv_usage_frac",
               "ENG006.rss_growth_frac"))
def eng006(ctx: Context) -> Hit | None:
    worst = _worst_drop(ctx)
    if worst[2] < ctx.th("ENG006.min_drop_frac"):
        return None
    growing = _growing_preemptions(ctx)
    if not growing:
        return None
    uptime = ctx.seen(ServerProcessData).uptime_s
    if uptime is not None and uptime < ctx.th("ENG006.long_uptime_s"):
        return None
    return _degraded(ctx, worst, growing, uptime)


def _baseline_tps(ctx: Context) -> dict[int | None, float | None]:
    """The baseline's output tokens/s by concurrency, or MissingInput when the two benches cannot be compared."""
    base_bench = ctx.baseline.bench if ctx.baseline is not None else None
    if base_bench is None or not base_bench.levels:
        raise MissingInput("the baseline report has no bench levels to compare with")
    base_model = ctx.baseline.target.model or base_bench.config.model
    ctx.bench_section()
    cur_model = ctx.bench_config().model
    if base_model and cur_model and base_model != cur_model:
        raise MissingInput(f"the baseline ran model {base_model!r}, this bench {cur_model!r}: not comparable")
    return {lv.concurrency: lv.output_tokens_per_s for lv in base_bench.levels
            if lv.concurrency and lv.output_tokens_per_s and lv.client.valid}


def _worst_drop(ctx: Context) -> tuple[BenchLevel, float, float]:
    """(level, baseline tokens/s, drop fraction) of the level whose throughput fell most against the baseline."""
    base_tps = _baseline_tps(ctx)
    drops = []
    for lv in ctx.levels():
        before = base_tps.get(lv.concurrency)
        if before and lv.output_tokens_per_s is not None:
            drops.append((lv, before, 1 - lv.output_tokens_per_s / before))
    if not drops:
        raise MissingInput("no concurrency level appears in both this bench and the baseline")
    return max(drops, key=lambda d: d[2])


def _growing_preemptions(ctx: Context) -> list[tuple[BenchLevel, float]]:
    """The levels whose preemption counter grew; MissingInput when no level measured it."""
    preempt = [(lv, s.num_preemptions_delta) for lv, s in ctx.level_server() if s.num_preemptions_delta is not None]
    if not preempt:
        raise MissingInput("throughput fell, but preemptions were not measured to tell degradation from other causes")
    return [(lv, n) for lv, n in preempt if n > 0]


def _degraded(ctx: Context, worst: tuple[BenchLevel, float, float], growing: list[tuple[BenchLevel, float]],
              uptime: float | None) -> Hit:
    lv, before, drop = worst
    evidence: dict[str, Any] = {f"baseline.{level_label(lv)}.output_tokens_per_s": before,
                                f"{level_label(lv)}.output_tokens_per_s": lv.output_tokens_per_s,
                                "derived.throughput_drop_frac": round(drop, 3)}
    for glv, n in growing:
        evidence[f"{level_label(glv)}.server.num_preemptions_delta"] = n
    if uptime is not None:
        evidence["server_process.uptime_s"] = uptime
    leaks = _leak_evidence(ctx)
    evidence.update(leaks)
    seen = _leaks_seen(leaks)
    return Hit(
        title="Throughput has degraded since the earlier report",
        message=f"Throughput at {level_label(lv)} fell {pct(drop)} against this host's earlier report "
                f"({before:.0f} -> {lv.output_tokens_per_s:.0f} tok/s) while preemptions accumulate"
                + (f"; {' and '.join(seen)}: a leak." if seen else
                   ". No leak was seen in what was measured (KV usage at idle, RSS); check both over days."),
        evidence=evidence, certainty=Certainty.LIKELY if uptime is not None or seen else Certainty.POSSIBLE,
        impact=0.5,
        fix=Fix("Look for a leak before anything else: KV usage when no request is running should fall back to "
                "~0, and the server's RSS should not grow day over day. If either leaks, check the engine's release "
                "notes for a fix (vLLM #15085, KV usage stuck after failed requests, is still open) and file a "
                "bug with these numbers. A rolling restart is a "
                "workaround until then, not a fix; gate throughput week over week with `triage compare`.",
                ("triage compare BASE.json CAND.json --max-regression output_tokens_per_s=15",)),
    )


def _leaks_seen(leaks: dict[str, Any]) -> list[str]:
    """The leaks found, in words."""
    seen = []
    if "server_metrics.kv_cache_usage_frac" in leaks:
        seen.append(f"KV usage stays at {pct(leaks['server_metrics.kv_cache_usage_frac'])} with no request running")
    if "derived.rss_growth_frac" in leaks:
        seen.append(f"the server's RSS grew {pct(leaks['derived.rss_growth_frac'])} since the earlier report")
    return seen


def _leak_evidence(ctx: Context) -> dict[str, Any]:
    """KV still in use while nothing runs; RSS growth against the baseline report's snapshot."""
    out: dict[str, Any] = {}
    metrics = ctx.seen(ServerMetricsData)
    idle = metrics.num_requests_running_max == 0 and not metrics.num_requests_waiting_max
    if idle and (metrics.kv_cache_usage_frac or 0) >= ctx.th("ENG006.idle_kv_usage_frac"):
        out["server_metrics.kv_cache_usage_frac"] = metrics.kv_cache_usage_frac
        out["server_metrics.num_requests_running_max"] = 0
    now = ctx.seen(ServerProcessData).rss_bytes_end
    before = _baseline_rss_bytes(ctx.baseline)
    if now and before and now / before - 1 >= ctx.th("ENG006.rss_growth_frac"):
        out["baseline.server_process.rss_bytes_end"] = before
        out["server_process.rss_bytes_end"] = now
        out["derived.rss_growth_frac"] = round(now / before - 1, 3)
    return out


def _baseline_rss_bytes(baseline: Report | None) -> int | None:
    for probe in baseline.probes if baseline is not None else ():
        if isinstance(probe.data, ServerProcessData):
            value = probe.data.rss_bytes_end
            return int(value) if value and value > 0 else None
    return None
