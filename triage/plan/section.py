"""The report's plan section from the command's options."""
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
