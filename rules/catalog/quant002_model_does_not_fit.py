"""QUANT002 (model-does-not-fit): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/QUANT002/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("QUANT002", "model-does-not-fit", Severity.CRITICAL, ("server_config", "server_metrics|logs"), RuleDoc(
    what="Weights + minimum KV + overhead exceed VRAM x utilization for the chosen TP: the KV cache left after "
         "loading cannot hold one max_model_len sequence (from the log's KV cache size or the cache_config "
         "block count).",
    why="The engine either refuses to start, or runs with a KV pool so small that every long request "
        "preempts the others; in frameworks without paging it spills to the CPU ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong GPU: Your Model Doesn't Fit in VRAM', 'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit').",
    example="server_config.max_model_len = 32768, logs.kv_cache_tokens = 9120",
    fix="Quantize, raise TP, or lower `--max-model-len` to what fits; `triage plan` gives the numbers.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Wrong GPU: Your Model Doesn't Fit in VRAM' (the model doesn't fit in VRAM)", "'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit' (2026-06-15): the model fitting is only step one"),
))
def quant002(ctx: Context) -> Hit | None:
    max_len = ctx.measured(ctx.need(ServerConfigData).max_model_len, "server_config.max_model_len")
    capacity, where = ctx.kv_capacity_tokens()
    if capacity >= max_len:
        return None
    if ctx.setting(None, "num_gpu_blocks_override")[0] is not None:
        return None     # the cache's size is set by hand, not what the memory left: KV008 names that
    engine = ctx.engine()
    fit_len = max(256, (int(capacity) // 256) * 256)
    cmds, note = engine_flags({"max_model_len": fit_len}, engine)
    plan = ctx.plan_command()
    return Hit(
        title="The model does not fit with room for one full-length request",
        message=f"After the weights, the KV cache holds {capacity:.0f} tokens, less than max_model_len={max_len}: "
                "one maximum-length request cannot fit.",
        evidence={"server_config.max_model_len": max_len, where: capacity,
                  "server_config.tensor_parallel_size": ctx.seen(ServerConfigData).tensor_parallel_size},
        certainty=Certainty.CONFIRMED, impact=1.0,
        fix=Fix(f"Quantize the weights, add tensor parallelism, or cap the context at {fit_len} tokens; "
                + (f"`{plan}` computes the fit." if plan else "`triage plan --model M --gpu G` computes the fit.")
                + note, cmds + ((plan,) if plan else ())),
    )
