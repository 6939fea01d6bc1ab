"""SCHED002 (max-num-seqs-too-low): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED002/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label, metrics_kv_usage
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import pct, seqs_at_least
from triage.rules.registry import rule


@rule("SCHED002", "max-num-seqs-too-low", Severity.MEDIUM, ("server_config", "server_metrics|bench"), RuleDoc(
    what="Requests wait while KV usage is below 70% and the running batch equals max_num_seqs: the "
         "sequence cap, not memory, is the limit.",
    why="The scheduler stops admitting at max_num_seqs even when the KV cache has room, so requests queue "
        "and TTFT grows while the GPU could batch more ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Quick Reference: If You See X, Try Y').",
    example="server_config.max_num_seqs = 16, bench.c64.server.num_requests_running_max = 16, "
            "bench.c64.server.num_requests_waiting_mean = 40, bench.c64.server.kv_cache_usage_frac_max = 0.31",
    fix="Raise `--max-num-seqs` (doubled, rounded to a multiple of 8); SGLang `--max-running-requests`, TGI "
        "2.x `--max-batch-size` (TGI 3.x ignores it while prefill chunking is on: its token budget "
        "`--max-batch-total-tokens` bounds the batch). No power of two is needed: vLLM captures CUDA graphs for "
        "batch 1, 2, 4, then every 8 below 256 and every 16 above.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Quick Reference: If You See X, Try Y' (good single-request latency, poor concurrency: --max-num-seqs)",
                "an explainer of inference as a memory-bound problem, 'serving the model' (tuning --max-num-seqs)",
                "a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM says keep it a power of two for CUDA graphs; vLLM captures 1, 2, 4, then steps of 8 "
                "and 16, so triage follows the source",
                "claim:vllm.max-num-seqs-meaning", "claim:vllm.cuda-graph-sizes",
                "claim:sglang.max-running-requests", "claim:tgi.max-batch-size-meaning",
                "claim:tgi.chunking-ignores-max-batch-size", "claim:tgi.prefill-chunking-default-on",
                "claim:tgi.max-batch-total-tokens-meaning", "claim:tgi.max-concurrent-requests-refuses"),
), thresholds=("SCHED002.max_kv_usage_frac",))
def sched002(ctx: Context) -> Hit | None:
    seqs = ctx.measured(ctx.need(ServerConfigData).max_num_seqs, "server_config.max_num_seqs")
    max_kv = ctx.th("SCHED002.max_kv_usage_frac")
    evidence: dict[str, Any] = {}
    seen = False
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if metrics is not None:
        running, waiting = metrics.num_requests_running, metrics.num_requests_waiting
        usage, usage_key = metrics_kv_usage(metrics)
        if None not in (running, waiting, usage):
            seen = True
            if waiting > 0 and usage < max_kv and running >= seqs:
                evidence.update({"server_metrics.num_requests_running": running,
                                 "server_metrics.num_requests_waiting": waiting, usage_key: usage})
    for lv, s in (ctx.level_server() if ctx.bench is not None else ()):
        running, waiting, usage = s.num_requests_running_max, s.num_requests_waiting_mean, s.kv_cache_usage_frac_max
        if None in (running, waiting, usage):
            continue
        seen = True
        if waiting > 0 and usage < max_kv and running >= seqs:
            p = level_label(lv)
            evidence.update({f"{p}.server.num_requests_running_max": running,
                             f"{p}.server.num_requests_waiting_mean": waiting,
                             f"{p}.server.kv_cache_usage_frac_max": usage})
    if not seen:
        raise MissingInput("running/waiting requests and KV usage were not measured together")
    if not evidence:
        return None
    proposed = seqs_at_least(seqs * 2)
    cmds, note = engine_flags({"max_num_seqs": proposed}, ctx.engine())
    return Hit(
        title="max_num_seqs caps the batch while KV has room",
        message=f"The batch is full at max_num_seqs={seqs} while requests wait and the KV cache is below "
                f"{pct(max_kv)}: the sequence cap, not memory, limits concurrency.",
        evidence={"server_config.max_num_seqs": seqs, **evidence}, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix(f"Raise max_num_seqs to {proposed} (twice the cap; no power of two is needed for CUDA graphs)."
                + note, cmds),
    )
