"""ENG010 (startup-out-of-memory): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG010/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogEvent
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.catalog._log_shared import events, log_evidence, need_engine_log, restarts_note, where
from triage.rules.catalog._oom_fixes import PHASE_WHY, oom_relief
from triage.rules.context import Context
from triage.rules.engine_flags import LAUNCHERS, engine_flags
from triage.rules.fmt import gib
from triage.rules.registry import rule

MEMORY_FACTS = ("oom", "startup_failure", "no_cache_memory")


@rule("ENG010", "startup-out-of-memory", Severity.CRITICAL, ("logs",), RuleDoc(
    what="The server's log shows it ran out of GPU memory: CUDA out of memory (torch's allocator, or llama.cpp's "
         "cudaMalloc and buffer allocations), an engine's own start-up memory error (vLLM's 'No available memory "
         "for the cache blocks', SGLang's 'Not enough memory. Please try to increase --mem-fraction-static', TGI's "
         "'Not enough memory to handle N prefill tokens'), with the phase it struck in: weight load, the profiling "
         "run, KV allocation, CUDA-graph capture, warm-up, or serving.",
    why="Each phase takes memory for a different reason, so each has its own fix: weights that do not fit need "
        "more GPUs or fewer bytes per weight; a profiling run or warm-up that does not fit needs a smaller batch; "
        "graphs need room the KV cache took; an OOM while serving needs fewer sequences or shorter ones (\"Why Your "
        "LLM Inference Is Slow\", Spheron, 2026: "
        "OOM errors mid-generation → lower --max-model-len or --max-num-seqs).",
    example="logs.oom.phase = cuda_graph, logs.oom.line = 'torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 112.00 MiB. GPU 0 has a total capacity of 44.35 GiB of which 53.38 MiB is free.'",
    fix="By phase: weights: more tensor parallelism or a quantized checkpoint; profiling run: a smaller "
        "`--max-num-batched-tokens`; no KV left: a larger memory share; CUDA graphs: a lower memory share or "
        "`--enforce-eager`; warm-up: a smaller `--max-num-seqs` (vLLM's sampler) or `--max-batch-prefill-tokens` "
        "(TGI); serving: a smaller `--max-num-seqs` or `--max-model-len`.",
    references=("\"Why Your LLM Inference Is Slow (And How to Fix It)\", Spheron blog, 2026-03-29: OOM errors "
                "mid-generation → lower --max-model-len or --max-num-seqs",
                "claim:runtime.torch-oom-2.1", "claim:vllm.log-no-cache-memory-0.6", "claim:vllm.log-no-cache-memory",
                "claim:sglang.log-not-enough-memory", "claim:tgi.log-prefill-oom", "claim:tgi.log-decode-graph-oom",
                "claim:llamacpp.log-cuda-malloc-failed", "claim:llamacpp.log-kv-alloc-failed",
                "claim:vllm.gpu-memory-utilization-meaning", "claim:sglang.mem-fraction-static-meaning",
                "claim:vllm.sampler-warmup-max-num-seqs-0.10", "claim:vllm.sampler-warmup-size-0.10",
                "claim:vllm.cudagraph-memory-outside-budget-0.10", "claim:vllm.cudagraph-memory-in-budget",
                "claim:vllm.fp8-online-loads-full-precision-0.10", "claim:vllm.quantize-after-full-load-0.10",
                "claim:vllm.fp8-online-quantizes-while-loading", "claim:vllm.online-quant-layerwise-process",
                "claim:vllm.fp8-config-no-online", "claim:llamacpp.flag-n-gpu-layers",
                "claim:llamacpp.n-gpu-layers-auto", "claim:llamacpp.flag-ctx-size"),
), thresholds=("KV007.max_gpu_memory_utilization",))
def eng010(ctx: Context) -> Hit | None:
    logs = need_engine_log(ctx)
    found = events(logs, *MEMORY_FACTS)
    if not found:
        return None
    event = _decisive(found)
    phase = event.phase or "unknown"
    evidence: dict[str, Any] = {**log_evidence(logs, event), f"logs.{event.fact}.phase": phase,
                                "logs.event_counts": {k: v for k, v in (logs.event_counts or {}).items()
                                                      if k in MEMORY_FACTS}}
    engine = ctx.engine()
    knobs, why = oom_relief(ctx, logs, event, phase, evidence)
    cmds, note = engine_flags(knobs, engine) if knobs and engine.name in LAUNCHERS else ((), "")
    serving = phase == "serving"
    what = PHASE_WHY.get(phase, "the log does not show which start-up phase it struck in")
    return Hit(
        title="The server ran out of GPU memory " + ("while serving" if serving else f"at start-up ({phase})"),
        message=f"{_said(event)} ({where(logs, event)}): {what}." + restarts_note(logs),
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=1.0,
        severity=Severity.HIGH if serving else None,
        fix=Fix("; ".join(why) + "." + note, cmds),
    )


def _decisive(found: list[LogEvent]) -> LogEvent:
    """The event that ended the start: an engine's own memory error states the cause more exactly than the CUDA
    error under it, so it wins when both come from the same start."""
    own = [e for e in found if e.fact != "oom"]
    return own[-1] if own else found[-1]


def _said(event: LogEvent) -> str:
    if event.fact == "oom" and event.alloc_bytes is not None:
        total = f"GPU total {gib(event.gpu_total_bytes)}" if event.gpu_total_bytes else "GPU total not stated"
        free = f", free {event.free_bytes / 2**20:.2f} MiB" if event.free_bytes is not None else ""
        return f"CUDA out of memory trying to allocate {event.alloc_bytes / 2**20:.2f} MiB ({total}{free})"
    return {"no_cache_memory": "No memory was left for the KV cache",
            "startup_failure": "The engine stopped: not enough memory"}.get(event.fact, "Out of GPU memory")

