"""Helpers shared by the engine and quantization rules."""
from __future__ import annotations

from triage.core.probe_data import GpuDevice
from triage.core.specs import match_nvml_name
from triage.rules.base import MissingInput
from triage.rules.context import Context

NO_QUANT = frozenset({"none", "null", ""})
SIXTEEN_BIT = frozenset({"auto", "float16", "bfloat16", "half", "fp16", "bf16"})


def weight_bytes(ctx: Context) -> tuple[float, str]:
    found = ctx.weight_bytes()
    if found is None:
        raise MissingInput("the model's weight bytes are unknown (set [model] weight_bytes in triage.toml, or pass "
                           "a `triage plan` report with `triage diagnose --baseline PLAN.json`)")
    return found


def spec_bandwidth_gbps(gpu: GpuDevice) -> float | None:
    """The spec-sheet memory bandwidth (GB/s) of an NVML GPU entry, from the one spec table."""
    name = gpu.name
    if not isinstance(name, str) or not name:
        return None
    total = gpu.memory_total_bytes
    spec = match_nvml_name(name, total if isinstance(total, int) else None)
    return None if spec is None else spec.hbm_bandwidth_bytes_per_s / 1e9
