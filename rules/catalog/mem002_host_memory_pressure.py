"""MEM002 (host-memory-pressure): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/MEM002/."""
from __future__ import annotations

from triage.core.probe_data import MemoryData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("MEM002", "host-memory-pressure", Severity.HIGH, ("memory",), RuleDoc(
    what="Available host RAM is below 10% of the total.",
    why="The engine needs host memory for pinned transfer buffers, CPU KV swap and the tokenizer; near the "
        "limit the kernel reclaims page cache and may OOM-kill the server.",
    example="memory.available_pct = 4.2, memory.total_bytes = 2.7e11",
    fix="Free memory on the host, or lower the engine's CPU offload (`--cpu-offload-gb`). vLLM's "
        "`--swap-space` was removed in 0.18 (PR #36216) and did nothing under V1, so triage never suggests it.",
    references=("'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit' (2026-06-15): leave headroom: memory pressure shows as slow, random requests",
                "claim:vllm.swap-space-0.17", "claim:vllm.cpu-offload-gb",
                "vLLM engine/arg_utils.py: --swap-space present up to 0.17.1, gone from 0.18.0 (engine truth)"),
), thresholds=("MEM002.available_pct",))
def mem002(ctx: Context) -> Hit | None:
    avail = ctx.measured(ctx.need(MemoryData).available_pct, "memory.available_pct")
    if avail >= ctx.th("MEM002.available_pct"):
        return None
    return Hit(
        title="Host memory is nearly exhausted",
        message=f"Only {avail:.1f}% of host RAM is available.",
        evidence={"memory.available_pct": avail, "memory.available_bytes": ctx.seen(MemoryData).available_bytes,
                  "memory.total_bytes": ctx.seen(MemoryData).total_bytes},
        certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Free host memory (other jobs, page-cache hogs), or lower the engine's CPU offload "
                "(--cpu-offload-gb); see what holds it with the command below.", ("ps aux --sort=-rss | head",)),
    )
