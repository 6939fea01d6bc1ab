"""QUANT001 (fp16-on-fp8-hardware): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/QUANT001/."""
from __future__ import annotations

from typing import Any

from triage.core.bench_data import LevelServer
from triage.core.probe_data import ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.catalog._engine_shared import NO_QUANT, SIXTEEN_BIT
from triage.rules.context import Context, level_label
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("QUANT001", "fp16-on-fp8-hardware", Severity.MEDIUM, ("server_config", "gpu"), RuleDoc(
    what="The model is served in fp16/bf16 without quantization on an Ada, Hopper or Blackwell GPU (compute "
         "capability >= 8.9), which runs FP8 natively. An opportunity (LOW) unless a symptom shows on this "
         "deployment: memory pressure (KV usage >= 90% or preemptions) or decode slower than the bench's TPOT SLO.",
    why="Decode is memory-bound: FP8 weights halve the bytes read per token, for 1.5-2x throughput with "
        "< 1-2% quality loss, and free VRAM for KV ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Using FP16 When INT8 or INT4 Would Be Fine').",
    example="server_config.dtype = 'bfloat16', server_config.quantization = null, gpu.gpus[0].compute_capability = [9, 0]",
    fix="`--quantization fp8` (not `--dtype fp8`, which vLLM rejects), or serve a pre-quantized FP8 "
        "checkpoint; SGLang `--quantization fp8`, TGI `--quantize fp8`.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Using FP16 When INT8 or INT4 Would Be Fine' (FP16 when lower precision works)", "vLLM docs, 'FP8 W8A8' (FP8 on Hopper and Ada)",
                "claim:vllm.fp8-from-sm89", "claim:vllm.dtype-choices", "claim:vllm.quantization-fp8-deprecated",
                "claim:sglang.quantization-fp8", "claim:tgi.quantize-fp8"),
))
def quant001(ctx: Context) -> Hit | None:
    data = ctx.need(ServerConfigData)
    quant = data.quantization
    if quant is not None and str(quant).lower() not in NO_QUANT:
        return None
    dtype = ctx.measured(ctx.need(ServerConfigData).dtype, "server_config.dtype")
    if str(dtype).lower() not in SIXTEEN_BIT:
        return None
    native, cc = ctx.fp8_native()
    if not native:
        return None
    explicit = ctx.cfg_source("quantization") not in (None, "default")
    cmds, note = engine_flags({"quantization_fp8": None}, ctx.engine())
    symptom = _fp8_symptom(ctx)
    return Hit(
        kind=FindingKind.PROBLEM if symptom else FindingKind.OPPORTUNITY,
        severity=None if symptom else Severity.LOW,
        title="16-bit weights on a GPU with native FP8",
        message=(f"The model is served as {dtype} with no quantization on a compute-capability {cc[0]}.{cc[1]} GPU: "
                 "FP8 would halve the bytes each decode step reads." if explicit else
                 f"No quantization was seen (dtype {dtype}, no --quantization flag) on a compute-capability "
                 f"{cc[0]}.{cc[1]} GPU: if the weights really are 16-bit, FP8 would halve the bytes each decode "
                 "step reads (a pre-quantized checkpoint needs no flag: check the model's config.json)."),
        evidence={"server_config.dtype": dtype, "server_config.quantization": quant,
                  "server_config.sources.quantization": ctx.cfg_source("quantization"),
                  "gpu.compute_capability": list(cc), **symptom},
        certainty=Certainty.LIKELY if explicit else Certainty.POSSIBLE, impact=0.5,
        fix=Fix("Serve FP8 weights (dynamic FP8 quantization, or an FP8 checkpoint); check quality on your own "
                "eval set. Note: `--dtype fp8` is not accepted, use `--quantization fp8`." + note, cmds),
    )


def _fp8_symptom(ctx: Context) -> dict[str, Any]:
    """Evidence that 16-bit weights hurt this deployment: memory pressure, or decode slower than the SLO."""
    ev: dict[str, Any] = {}
    metrics = ctx.seen(ServerMetricsData)
    if metrics.kv_cache_usage_frac_max is not None and metrics.kv_cache_usage_frac_max >= 0.9:
        ev["server_metrics.kv_cache_usage_frac_max"] = metrics.kv_cache_usage_frac_max
    if metrics.num_preemptions_delta:
        ev["server_metrics.num_preemptions_delta"] = metrics.num_preemptions_delta
    if ctx.bench is not None:
        slo = ctx.bench_config().slo
        slo_tpot = slo.tpot_ms if slo is not None else None
        for lv in ctx.bench.levels:
            server = lv.server or LevelServer()
            if (server.kv_cache_usage_frac_max or 0) >= 0.9 or server.num_preemptions_delta:
                ev[f"{level_label(lv)}.server.kv_cache_usage_frac_max"] = server.kv_cache_usage_frac_max
            if slo_tpot and lv.tpot_ms.p50 and lv.tpot_ms.p50 > slo_tpot:
                ev[f"{level_label(lv)}.tpot_ms.p50"] = lv.tpot_ms.p50
                ev["bench.config.slo.tpot_ms"] = slo_tpot
    return ev
