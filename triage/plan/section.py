"""The report's plan section from the command's options."""
from __future__ import annotations

from typing import Any

from triage.core.report import Report, ReportKind, Target, new_report
from triage.plan.calc import build_plan
from triage.plan.inputs import PlanInputs, RawOptions, resolve_inputs
from triage.plan.plan_tables import plan_tables

__all__ = ["PlanInputs", "RawOptions", "build_plan", "plan_report", "plan_section", "resolve_inputs"]


def plan_section(raw: RawOptions) -> dict[str, Any]:
    """Resolve the options (reading --from-diagnose if given) and build the report's plan section."""
    section = build_plan(resolve_inputs(raw))
    section["tables"] = plan_tables(section)
    return section


def plan_report(raw: RawOptions) -> Report:
    """`triage plan` as one call: the plan section in a report on this host, for the model planned."""
    from triage.probes.host import host_info

    section = plan_section(raw)
    model_id = section["model"]["hf_id"] or section["model"]["name"]
    return new_report(ReportKind.PLAN, host_info(), Target(model=model_id), plan=section)
