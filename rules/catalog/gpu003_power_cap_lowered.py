"""GPU003 (power-cap-lowered): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU003/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("GPU003", "power-cap-lowered", Severity.MEDIUM, ("gpu",), RuleDoc(
    what="The enforced power limit is below the board's default power limit.",
    why="A lowered cap makes the GPU clock down as soon as it draws that power, which under serving load is "
        "all the time: throughput drops roughly with the cap.",
    example="gpu.gpus[0].power_limit_enforced_w = 300, gpu.gpus[0].power_limit_default_w = 700",
    fix="Restore the default with `nvidia-smi -i N -pl <default>`, or find the policy (DCGM, a power-capping "
        "daemon, the datacenter's rack budget) that lowered it.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'GPU Layer' (power draw)", "nvidia-smi -q -d POWER"),
), thresholds=("GPU003.power_limit_frac_of_default",))
def gpu003(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    cmds = []
    measured = False
    for g in ctx.serving_gpus():
        enforced, default = g.power_limit_enforced_w, g.power_limit_default_w
        if enforced is None or not default:
            continue
        measured = True
        if enforced < default * ctx.th("GPU003.power_limit_frac_of_default"):
            evidence[f"{gpu_key(g)}.power_limit_enforced_w"] = enforced
            evidence[f"{gpu_key(g)}.power_limit_default_w"] = default
            cmds.append(f"sudo nvidia-smi -i {g.index} -pl {default:.0f}")
    if not measured:
        raise MissingInput("gpu power_limit_enforced_w/power_limit_default_w were not measured")
    if not evidence:
        return None
    return Hit(
        title="The GPU power limit is set below its default",
        message="The power cap is below the board default (" + ", ".join(
            f"GPU {k.split('[')[1].split(']')[0]}: {v:.0f} W of {evidence[k.replace('enforced', 'default')]:.0f} W"
            for k, v in evidence.items() if k.endswith("power_limit_enforced_w")) + "), so it clocks down under load.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Restore the default power limit (and find whatever lowered it, or it will come back).", tuple(cmds)),
    )
