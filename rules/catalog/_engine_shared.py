"""Helpers shared by the engine and quantization rules."""
from __future__ import annotations

from triage.core.probe_data import GpuDevice
from triage.core.specs import match_nvml_name
from triage.rules.base import MissingInput
from triage.rules.context import Context

NO_QUANT = frozenset({"none", "null", ""})
SIXTEEN_BIT = frozenset({"auto", "float16", "bfloat16", "half", "fp16", "bf16"})


def weight_bytes(ctx: Context) -> tuple[float, str]:
    if ctx.config.model_weight_bytes:
        return ctx.config.model_weight_bytes, "config.model.weight_bytes"
    if ctx.bench is not None and ctx.bench.config.get("model_weight_bytes"):
        return float(ctx.bench.config["model_weight_bytes"]), "bench.config.model_weight_bytes"
    plan_model = ((ctx.baseline or {}).get("plan") or {}).get("model") or {}
    if isinstance(plan_model.get("weight_bytes"), (int, float)) and plan_model["weight_bytes"] > 0:
        return float(plan_model["weight_bytes"]), "baseline.plan.model.weight_bytes"
    raise MissingInput("the model's weight bytes are unknown (set [model] weight_bytes in triage.toml, pass a "
                       "`triage plan` report as the baseline, or put model_weight_bytes in the bench config)")


def spec_bandwidth_gbps(gpu: GpuDevice) -> float | None:
    """The spec-sheet memory bandwidth (GB/s) of an NVML GPU entry, from the one spec table."""
    name = gpu.name
    if not isinstance(name, str) or not name:
        return None
    total = gpu.memory_total_bytes
    spec = match_nvml_name(name, total if isinstance(total, int) else None)
    return None if spec is None else spec.hbm_bandwidth_bytes_per_s / 1e9
