"""MEM001 (swap-active): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/MEM001/."""
from __future__ import annotations

from triage.core.probe_data import MemoryData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("MEM001", "swap-active", Severity.HIGH, ("memory",), RuleDoc(
    what="Swap is enabled and pages moved in or out of it during the window.",
    why="A server whose pages (pinned buffers' neighbours, Python heaps, the tokenizer) are swapped stalls "
        "for milliseconds per fault: random, large latency spikes.",
    example="memory.swap_total_bytes = 8.6e9, memory.swap_in_bytes_delta = 2.1e8, memory.window_s = 5",
    fix="`sudo swapoff -a` on serving hosts, and size host RAM for the engine's pinned buffers and host-side "
        "caches (vLLM's CPU swap space is gone since 0.18 and inert in V1: see MEM002).",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Memory Layer' (disable swap: sudo swapoff -a)", "claim:vllm.swap-space-0.17"),
), thresholds=("MEM001.swap_activity_bytes",))
def mem001(ctx: Context) -> Hit | None:
    total = ctx.measured(ctx.need(MemoryData).swap_total_bytes, "memory.swap_total_bytes")
    if total == 0:
        return None
    swap_in, swap_out = ctx.measured(ctx.need(MemoryData).swap_in_bytes_delta, "memory.swap_in_bytes_delta"), ctx.measured(ctx.need(MemoryData).swap_out_bytes_delta, "memory.swap_out_bytes_delta")
    if swap_in + swap_out < ctx.th("MEM001.swap_activity_bytes"):
        return None
    return Hit(
        title="The host is swapping",
        message=f"{(swap_in + swap_out) / 2**20:.0f} MiB moved through swap in {ctx.seen(MemoryData).window_s} s.",
        evidence={"memory.swap_total_bytes": total, "memory.swap_in_bytes_delta": swap_in,
                  "memory.swap_out_bytes_delta": swap_out, "memory.window_s": ctx.seen(MemoryData).window_s},
        severity=Severity.HIGH if swap_in > 0 else Severity.MEDIUM, certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Turn swap off on serving hosts and give the host enough RAM for the engine's pinned buffers and "
                "host-side caches.", ("sudo swapoff -a",)),
    )
