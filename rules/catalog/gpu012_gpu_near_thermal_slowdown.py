"""GPU012 (gpu-near-thermal-slowdown): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU012/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("GPU012", "gpu-near-thermal-slowdown", Severity.MEDIUM, ("gpu",), RuleDoc(
    what="A busy GPU runs within 5 °C of its slowdown temperature (NVML's temperature threshold at which the "
         "GPU starts to clock down), before any slowdown reason has shown up.",
    why="The next warm afternoon, a failing fan or a neighbour's heat tips it into HW thermal slowdown "
        "(GPU002): clocks drop and latency jumps. Seen early, it is a cooling ticket, not an incident.",
    example="gpu.gpus[0].temperature_c = 86, gpu.gpus[0].temperature_slowdown_c = 90, "
            "gpu.gpus[0].utilization_gpu_pct = 94",
    fix="Check airflow, fan curves, inlet temperature and blanking panels; compare with the node's other GPUs.",
    references=("DCGM health watches (thermal)", "nvidia-smi -q -d TEMPERATURE (GPU Slowdown Temp)",
                "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'GPU Layer'"),
), thresholds=("GPU012.margin_c", "common.gpu_busy_util_pct"))
def gpu012(ctx: Context) -> Hit | None:
    busy, margin = ctx.th("common.gpu_busy_util_pct"), ctx.th("GPU012.margin_c")
    evidence: dict[str, Any] = {}
    measured = False
    for g in ctx.serving_gpus():
        temp, slowdown, util = g.temperature_c, g.temperature_slowdown_c, g.utilization_gpu_pct
        if None in (temp, slowdown, util):
            continue
        measured = True
        if util >= busy and temp >= slowdown - margin:
            evidence.update({f"{gpu_key(g)}.temperature_c": temp, f"{gpu_key(g)}.temperature_slowdown_c": slowdown,
                             f"{gpu_key(g)}.utilization_gpu_pct": util})
    if not measured:
        raise MissingInput("gpu temperature_c/temperature_slowdown_c/utilization_gpu_pct were not measured")
    if not evidence:
        return None
    return Hit(
        title="The GPU runs close to its thermal slowdown point",
        message="Under load the GPU is within a few degrees of the temperature at which it starts to throttle.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.2,
        fix=Fix("Improve cooling before it throttles: airflow, fans, inlet temperature, blanking panels.",
                ("nvidia-smi -q -d TEMPERATURE",)),
    )
