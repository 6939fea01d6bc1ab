"""What `triage diagnose` says beside the report: which target it found, and (as text) the layer table, the
--active measurements against the spec, and what changed in Prometheus history. Lines of plain text."""
from __future__ import annotations

from triage.diagnose.pipeline import DiagnoseResult


def discovery_lines(result: DiagnoseResult) -> list[str]:
    found = result.discovery
    lines = []
    if found.how == "local process":
        lines.append(f"diagnosing the {found.engine} server found on this host: pid {found.pid}, {found.url}")
    elif found.how == "--url":
        engine = result.report.target.engine or found.engine or "an unidentified server"
        lines.append(f"diagnosing {found.url}" + (f" ({engine}, pid {found.pid})" if found.pid else f" ({engine})"))
    elif found.how == "prometheus":
        lines.append("diagnosing from Prometheus history")
    elif found.how == "none":
        lines.append("no server to diagnose: host and GPU probes only")
    if found.note:
        lines.append(f"note: {found.note}")
    if result.not_rederived:
        lines.append(f"not re-derived: {len(result.not_rederived)} of the saved report's findings, and why:")
        lines += [f"  {line}" for line in result.not_rederived]
    return lines


def layer_lines(result: DiagnoseResult) -> list[str]:
    from triage.diagnose.pipeline import layer_summary

    return ["By layer:"] + [f"  {row['layer']:<18} {row['verdict']:<28} ({row['probes']})"
                            for row in layer_summary(result.report)]


def measured_lines(result: DiagnoseResult, model_weight_bytes: float | None) -> list[str]:
    """--active: one line per measured figure against the spec (none when no active probe ran)."""
    from triage.diagnose.active_probes import active_names, measured_rows

    if not any(p.name in active_names() for p in result.report.probes):
        return []
    return ["Measured against the spec (--active):"] + [
        f"  {row['measure']:<26} {row['measured']:>16}  {row['expected']:<26} {row['share']:>5}  "
        f"{row['note']}".rstrip() for row in measured_rows(result.report.probes, model_weight_bytes)]


def change_lines(result: DiagnoseResult) -> list[str]:
    """--prometheus: each signal now against the same window earlier (none when nothing changed)."""
    from triage.diagnose.from_prometheus import change_rows

    rows = change_rows(result.snapshot)
    if not rows:
        return []
    return ["What changed (now vs then):"] + [
        f"  {row['signal']:<24} {row['now']:>12} {row['then']:>12} {row['change']:>8}" for row in rows]
