"""KV004 (kv-cache-fp16-on-fp8-hardware): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV004/."""
from __future__ import annotations

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._kv_sched_shared import SIXTEEN_BIT_KV
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("KV004", "kv-cache-fp16-on-fp8-hardware", Severity.MEDIUM, ("server_config|server_metrics", "gpu"), RuleDoc(
    what="The server is KV-limited on an Ada, Hopper or Blackwell GPU (compute capability >= 8.9) while the KV "
         "cache is stored in 16 bits (cache dtype auto/fp16/bf16).",
    why="FP8 KV halves the bytes per token, which doubles the sequences the cache holds, with < 0.5% quality "
        "loss on these GPUs (an explainer of inference as a memory-bound problem, 'the KV cache').",
    example="server_config.kv_cache_dtype = 'auto', gpu.gpus[0].compute_capability = [9, 0], "
            "server_metrics.num_preemptions_delta = 12",
    fix="`--kv-cache-dtype fp8` (SGLang `--kv-cache-dtype fp8_e4m3`, TGI `--kv-cache-dtype fp8_e4m3fn`).",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'No KV Cache Optimization (PagedAttention)' (--kv-cache-dtype fp8 on H100/Blackwell)", "vLLM docs, 'Quantized KV Cache'",
                "claim:vllm.kv-cache-dtype-fp8", "claim:vllm.fp8-from-sm89", "claim:sglang.kv-cache-dtype-fp8-e4m3",
                "claim:tgi.kv-cache-dtype-fp8"),
), thresholds=("common.kv_limited_usage_frac",))
def kv004(ctx: Context) -> Hit | None:
    dtype, source = ctx.setting("kv_cache_dtype", "cache_dtype")
    if dtype is None:
        raise MissingInput("the KV cache dtype was not measured (server_config.kv_cache_dtype, cache_config)")
    native, cc = ctx.fp8_native()
    if not native or str(dtype).lower() not in SIXTEEN_BIT_KV:
        return None
    limited, kv_evidence = ctx.kv_pressure()
    if not limited:
        return None
    cmds, note = engine_flags({"kv_cache_dtype_fp8": None}, ctx.engine())
    return Hit(
        title="A 16-bit KV cache on FP8-capable hardware is the limit",
        message=f"The KV cache is full and stored in 16 bits (kv_cache_dtype={dtype}) on a compute-capability "
                f"{cc[0]}.{cc[1]} GPU, which could store it in FP8 at half the size.",
        evidence={source: dtype, "gpu.compute_capability": list(cc), **kv_evidence},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix("Store the KV cache in FP8: it doubles the sequences that fit." + note, cmds),
    )
