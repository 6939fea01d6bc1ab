"""KV002 (preemptions): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV002/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogsData, ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._kv_sched_shared import kv_relief
from triage.rules.context import Context, level_label
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


def _from_window(metrics: ServerMetricsData | None, evidence: dict[str, Any]) -> tuple[bool, float, float | None]:
    """(measured, preemptions, running at the end) of diagnose's /metrics window; its evidence added."""
    if metrics is None or metrics.num_preemptions_delta is None:
        return False, 0.0, None
    if metrics.num_preemptions_delta <= 0:
        return True, 0.0, None
    evidence["server_metrics.num_preemptions_delta"] = metrics.num_preemptions_delta
    evidence["server_metrics.preemptions_per_s"] = metrics.preemptions_per_s
    evidence["server_metrics.window_s"] = metrics.window_s
    return True, metrics.num_preemptions_delta, metrics.num_requests_running


def _from_log(logs: LogsData, evidence: dict[str, Any]) -> tuple[bool, float, float | None]:
    """(measured, preemptions, running at the peak) from the server's own log: vLLM V0's warning with its running
    total, V1's stats line (0.33), SGLang's retractions. Read only where no live window measured the counter:
    beside a live server, the log's preemptions are history."""
    if not logs.preemptions_total:
        # Not every version writes a line per preemption (vLLM V1 before its stats line carried them), so a log
        # without one does not show there were none.
        return False, 0.0, None
    evidence["logs.preemptions_total"] = logs.preemptions_total
    if logs.preemptions_per_s is not None:
        evidence["logs.preemptions_per_s"] = logs.preemptions_per_s
    evidence["logs.preemption_examples"] = list(logs.preemption_examples[:2])
    # Not the stats lines' running count: it counts requests (V0: sequence groups), not the sequences that
    # max_num_seqs bounds, so it cannot size that cap.
    return True, float(logs.preemptions_total), None


@rule("KV002", "preemptions", Severity.HIGH, ("server_metrics|bench|logs",), RuleDoc(
    what="The engine's preemption counter grew during the window (a count that did not grow is history, "
         "not a current problem); with no live window, the server log's last start states preemptions (vLLM V0's "
         "'preempted ... total_num_cumulative_preemption=N', V1's stats line, SGLang's 'Retract requests').",
    why="A preempted sequence loses its KV blocks and is recomputed when it resumes: sustained preemption "
        "roughly doubles latency (an explainer of inference as a memory-bound problem, 'watching the real ceiling'), and in 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 2: KV-Cache Fragmentation', it came with a 30% throughput loss.",
    example="server_metrics.num_preemptions_delta = 37, server_metrics.preemptions_per_s = 1.2",
    fix="Everything KV001 suggests, and a lower `--max-num-seqs` / `--max-num-batched-tokens` so the batch "
        "fits the cache.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 2: KV-Cache Fragmentation' (Preempted ... sequences warnings)", "vLLM docs, 'Optimization and Tuning': preemption (recompute)",
                "claim:vllm.num-preemptions", "claim:vllm.max-num-seqs-meaning",
                "claim:vllm.max-num-batched-tokens-meaning", "claim:vllm.log-preempted-0.6",
                "claim:vllm.log-stats-preemptions", "claim:sglang.log-retract", "claim:sglang.log-retract-0.4"),
), thresholds=("KV001.gpu_memory_utilization_target",))
def kv002(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    seen, total, running_peak = _from_window(ctx.snapshot.payload(ServerMetricsData), evidence)
    for lv, s in (ctx.level_server() if ctx.bench is not None else ()):
        if s.num_preemptions_delta is None:
            continue
        seen = True
        if s.num_preemptions_delta > 0:
            evidence[f"{level_label(lv)}.server.num_preemptions_delta"] = s.num_preemptions_delta
            total += s.num_preemptions_delta
            if s.num_requests_running_max is not None:
                running_peak = max(running_peak or 0, s.num_requests_running_max)
    from_log = False
    if not seen:
        seen, total, running_peak = _from_log(ctx.seen(LogsData), evidence)
        from_log = seen
    if not seen:
        raise MissingInput("the preemption counter was not measured over a window (no server /metrics), and no "
                           "server log states preemptions (not every engine version logs them)")
    if not evidence:
        return None
    engine = ctx.engine()
    knobs, why = kv_relief(ctx, engine, evidence)
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    if running_peak:
        lower = max(1, int(running_peak * 0.75))
        if seqs is None or lower < seqs:
            knobs.update(max_num_seqs=lower)
            why.append(f"admit fewer sequences at once ({lower}, 3/4 of the {running_peak:.0f} that ran at the peak)")
    cmds, note = engine_flags(knobs, engine)
    span = "in the log's last start" if from_log else "during the window"
    return Hit(
        title="The engine is preempting requests",
        message=f"{total:.0f} preemption(s) {span}: sequences are evicted from the KV cache and "
                "recomputed, which roughly doubles their latency.",
        evidence=evidence, certainty=Certainty.LIKELY if from_log else Certainty.CONFIRMED, impact=0.85,
        fix=Fix("Make the batch fit the KV cache: " + "; ".join(why) + "." + note, cmds),
    )
