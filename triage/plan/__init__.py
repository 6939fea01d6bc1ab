"""`triage plan`: the seeds' sizing math as a calculator.

    from triage.plan import RawOptions, plan_section
    section = plan_section(RawOptions(model="llama-3.1-70b", gpu="h100-sxm", dtype="fp8"))

Does it fit, how much KV cache is left, which TP, how fast (roofline), how many GPUs for a QPS, what
it costs, and the vLLM flags to start with. Pure arithmetic over spec-sheet figures; nothing is
measured (`triage baseline` measures).
"""
from __future__ import annotations

from typing import Any

from triage.plan.calc import build_plan
from triage.plan.inputs import PlanInputs, RawOptions, resolve_inputs
from triage.plan.tables import plan_tables

__all__ = ["PlanInputs", "RawOptions", "build_plan", "plan_section", "resolve_inputs"]


def plan_section(raw: RawOptions) -> dict[str, Any]:
    """Resolve the options (reading --from-diagnose if given) and build the report's plan section."""
    section = build_plan(resolve_inputs(raw))
    section["tables"] = plan_tables(section)
    return section
