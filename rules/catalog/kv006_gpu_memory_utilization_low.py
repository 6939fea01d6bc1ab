"""KV006 (gpu-memory-utilization-low): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV006/."""
from __future__ import annotations

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("KV006", "gpu-memory-utilization-low", Severity.MEDIUM, ("server_config|server_metrics",), RuleDoc(
    what="`gpu_memory_utilization` is below 0.85 while the server is KV-limited.",
    why="vLLM gives the KV cache what is left of `gpu_memory_utilization` x VRAM after weights, "
        "activations and CUDA graphs; on an 80 GB GPU, 0.80 instead of 0.92 leaves ~9.6 GB unused, about 73K tokens of KV for "
        "a Llama-3.1-8B (128 KiB per token in 16 bits).",
    example="server_config.gpu_memory_utilization = 0.7, server_metrics.kv_cache_usage_frac_max = 0.97, "
            "server_metrics.num_requests_waiting = 9",
    fix="`--gpu-memory-utilization 0.92` (0.90 if other processes share the GPU); TGI `--cuda-memory-fraction "
        "1.0`. SGLang's `--mem-fraction-static` excludes activations and CUDA graphs: it rises a few hundredths "
        "at a time, keeping >= 10 GiB free on GPUs over 60 GiB.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'No KV Cache Optimization (PagedAttention)' (tune --gpu-memory-utilization 0.92)", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Configuration Layer' (0.92)",
                "claim:sglang.mem-fraction-static-meaning", "claim:sglang.mem-fraction-static-reserve",
                "claim:tgi.cuda-memory-fraction-default", "claim:vllm.kv-is-what-is-left",
                "claim:vllm.gpu-memory-utilization-meaning", "claim:vllm.gpu-memory-utilization-0.92"),
), thresholds=("KV006.min_gpu_memory_utilization", "KV001.gpu_memory_utilization_target"))
def kv006(ctx: Context) -> Hit | None:
    util, where = ctx.setting("gpu_memory_utilization", "gpu_memory_utilization")
    if util is None:
        raise MissingInput("gpu_memory_utilization was not measured (server_config or cache_config)")
    engine = ctx.engine()
    module = engine.module
    static = module is not None and module.memory_share == "static"
    if not static and util >= ctx.th("KV006.min_gpu_memory_utilization"):
        return None
    limited, kv_evidence = ctx.kv_pressure()
    if not limited:
        return None
    target = ctx.th("KV001.gpu_memory_utilization_target")
    if static:
        # SGLang's --mem-fraction-static leaves out activations and CUDA graphs on purpose (claim
        # sglang.mem-fraction-static-meaning): what lies outside it is not "unused". Judge it by SGLang's reserve.
        proposed, reason = module.memory_share_target(util, ctx.vram_bytes(), target)
        if proposed is None:
            return None
        cmds, note = engine_flags({"gpu_memory_utilization": f"{proposed:.2f}"}, engine)
        return Hit(
            title="The KV cache is starved by a low --mem-fraction-static",
            message=f"--mem-fraction-static is {util} while the KV cache is the limit; SGLang's reserve for "
                    f"activations and CUDA graphs still fits at {proposed:.2f}.",
            evidence={where: util, **kv_evidence}, certainty=Certainty.LIKELY, impact=0.4,
            fix=Fix(reason[:1].upper() + reason[1:] + "." + note, cmds))
    # The engine's own target: vLLM's 0.92, TGI's whole GPU (its --cuda-memory-fraction defaults to 1.0).
    proposed = module.memory_share_target(util, ctx.vram_bytes(), target)[0] if module is not None else target
    proposed = target if proposed is None else proposed
    cmds, note = engine_flags({"gpu_memory_utilization": f"{proposed:.2f}"}, engine)
    return Hit(
        title="The KV cache is starved by a low gpu_memory_utilization",
        message=f"gpu_memory_utilization is {util}, leaving {pct(proposed - util)} of VRAM unused while the KV "
                "cache is the limit.",
        evidence={where: util, **kv_evidence}, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix(f"Raise it to {proposed:.2f}" + (" (0.90 if another process shares the GPU)." if proposed < 1.0
                                                else ".") + note, cmds),
    )
