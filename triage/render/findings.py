"""Header, probe status and findings: the diagnose view (also shown under bench results)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from triage.core.probe_data import ServerMetricsData, TopologyData
from triage.core.report import Finding, FindingKind, Report, Severity
from triage.core.snapshot import Snapshot
from triage.render.fmt import md_table, num

_SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


def _target_line(report: Report) -> str:
    t = report.target
    bits = [b for b in (t.engine, t.engine_version, t.model, t.url) if b]
    return " · ".join(bits) if bits else "no server target"


def topology_lines(report: Report) -> list[str]:
    """The deployment's shape (docs/TOPOLOGIES.md), when it is more than one instance on its own."""
    snapshot = Snapshot(probes=report.probes)
    topo = snapshot.payload(TopologyData)
    if topo is None or topo.kind in (None, "single instance"):
        return []
    bits = [topo.kind]
    if topo.data_parallel_size:
        bits.append(f"{topo.data_parallel_size} ranks" + (f", {topo.dp_load_balance} balancing"
                                                          if topo.dp_load_balance else ""))
    if topo.role:
        bits.append(f"this instance: {topo.role}")
    if topo.kv_connector:
        bits.append(f"KV connector {topo.kv_connector}")
    if topo.kv_offload:
        bits.append(f"offload {topo.kv_offload}")
    if topo.expert_balancedness is not None:
        bits.append(f"expert balance {topo.expert_balancedness:.2f}")
    lines = ["topology: " + " · ".join(bits)]
    metrics = snapshot.payload(ServerMetricsData)
    if metrics is not None and metrics.ranks:
        lines.append("ranks: " + " · ".join(
            f"{r.rank}: " + ("n/a" if r.num_requests_waiting_max is None else f"{r.num_requests_waiting_max:g}")
            + " waiting, KV "
            + ("n/a" if r.kv_cache_usage_frac_max is None else f"{r.kv_cache_usage_frac_max:.0%}")
            for r in metrics.ranks))
    lines += [f"peer: {p}" for p in topo.peer_roles]
    return lines


def _where(report: Report, quote: str = "") -> str:
    """The machine a report is about: this host, or for a plan the GPU it plans for (not where it ran)."""
    h = report.host
    name = f"{quote}{h.hostname}{quote}"
    planned = (report.plan or {}).get("gpu") or {}
    if planned.get("name"):
        return f"for {planned['name']} (planned on {name})"
    gpus = ", ".join(g.name for g in h.gpus) or "no GPU seen"
    return f"{name} ({h.cpu_model or 'unknown CPU'}, {gpus})"


def header_console(report: Report, out: Console) -> None:
    out.print(f"[bold]triage {report.kind.value}[/] — {escape(_where(report))}")
    out.print(f"target: {_target_line(report)}", markup=False)
    for line in topology_lines(report):
        out.print(line, markup=False)


def header_markdown(report: Report) -> str:
    return (f"## triage {report.kind.value}\n\n"
            f"- {'planned' if (report.plan or {}).get('gpu') else 'host'}: {_where(report, '`')}\n"
            f"- target: {_target_line(report)}\n- created: {report.created_at}"
            + "".join(f"\n- {line}" for line in topology_lines(report)))


def probes_console(report: Report, out: Console) -> None:
    table = Table(title="What triage looked at", title_justify="left")
    table.add_column("probe")
    table.add_column("status")
    table.add_column("took")
    table.add_column("note", overflow="fold")
    for p in report.probes:
        style = "green" if p.status.value == "ok" else "yellow"
        table.add_row(p.name, f"[{style}]{p.status.value}[/]", f"{p.duration_s:.2f}s", p.reason or "")
    out.print(table)


def _split(report: Report) -> tuple[list[Finding], list[Finding]]:
    problems = [f for f in report.findings if f.kind is not FindingKind.OPPORTUNITY]
    return problems, [f for f in report.findings if f.kind is FindingKind.OPPORTUNITY]


def findings_console(report: Report, out: Console) -> None:
    problems, opportunities = _split(report)
    if not problems:
        out.print("[green]No problems found.[/] Nothing triage checks looks wrong on what it could see.")
    _findings_block(problems, out)
    if opportunities:
        out.print("\n[bold]Opportunities[/] [dim](a better configuration; no symptom seen on this deployment)[/]")
        _findings_block(opportunities, out)
    errored = [r for r in report.skipped_rules if r.reason.startswith("errored")]
    for r in errored:
        out.print(f"\n[bold red]{r.code} errored[/] (the other rules ran): {escape(r.reason)}", highlight=False)
    if len(report.skipped_rules) > len(errored):
        out.print(f"\n[dim]{len(report.skipped_rules) - len(errored)} rules skipped for missing inputs "
                  "(see the JSON report's skipped_rules).[/]")


def _findings_block(findings: list[Finding], out: Console) -> None:
    for f in findings:
        style = _SEVERITY_STYLE[f.severity]
        out.print(f"\n[{style}]{f.severity.value.upper()}[/] [bold]{f.code}[/] {f.title} "
                  f"[dim]({f.certainty.value})[/]")
        out.print(f"  {f.message}", markup=False)
        for key, value in f.evidence.items():
            out.print(f"    {key} = {num(value, 2)}", markup=False)
        out.print(f"  [bold]fix:[/] {f.fix.text}")
        for cmd in f.fix.commands:
            out.print(f"    $ {cmd}", markup=False)
        if f.explains:
            out.print(f"  explains: {', '.join(f.explains)}", markup=False)


def findings_markdown(report: Report) -> str:
    problems, opportunities = _split(report)
    head = ["severity", "code", "title", "certainty", "fix"]
    out = "### Findings\n\n" + (md_table(head, [_row(f) for f in problems]) if problems else "No problems found.")
    if opportunities:
        out += ("\n\n### Opportunities\n\nA better configuration; no symptom seen on this deployment.\n\n"
                + md_table(head, [_row(f) for f in opportunities]))
    return out


def _row(f: Finding) -> list[str]:
    return [f.severity.value, f.code, f.title, f.certainty.value, f.fix.text]
