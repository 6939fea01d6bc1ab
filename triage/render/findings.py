"""Header, probe status and findings: the diagnose view (also shown under bench results)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from triage.core.probe_data import ServerMetricsData, TopologyData
from triage.core.report import Finding, FindingKind, Report, Severity
from triage.core.snapshot import Snapshot
from triage.engines import GENERIC
from triage.render.coverage import layer_words, not_applicable, skipped_summary
from triage.render.fmt import evidence_value, md_table
from triage.render.hang import hang

_SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


def _target_line(report: Report) -> str:
    t = report.target
    engine = f"{t.engine} ({t.says})" if t.engine == GENERIC and t.says else t.engine
    bits = [b for b in (engine, t.engine_version, t.model, t.url) if b]
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
    """Every probe, its status, time and note (--verbose); a probe that does not apply here reads n/a."""
    table = Table(title="What triage looked at", title_justify="left")
    table.add_column("probe")
    table.add_column("status")
    table.add_column("took")
    table.add_column("note", overflow="fold")
    for p in report.probes:
        why_not = not_applicable(p)
        status = "n/a" if why_not else p.status.value
        style = "green" if p.status.value == "ok" else "dim" if why_not else "yellow"
        table.add_row(p.name, f"[{style}]{status}[/]", f"{p.duration_s:.2f}s", escape(why_not or p.reason or ""))
    out.print(table)


def coverage_console(report: Report, out: Console, layers: bool = True) -> None:
    """The end of the view: the skipped rules by what would let them run, and (unless the probe table is
    shown) one phrase per probe layer."""
    summary = skipped_summary(report)
    if summary:
        out.print()
        hang(out, Text(summary, style="dim"), indent=2)
    phrases = layer_words(report) if layers else []
    if phrases:
        out.print()
        hang(out, Text(" · ".join(phrases) + " (--verbose: each probe)"), Text("looked at: ", style="bold"))


def _split(report: Report) -> tuple[list[Finding], list[Finding]]:
    problems = [f for f in report.findings if f.kind is not FindingKind.OPPORTUNITY]
    return problems, [f for f in report.findings if f.kind is FindingKind.OPPORTUNITY]


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def verdict_text(report: Report) -> Text:
    """The verdict, first thing after the header: how many problems, the most severe, or none."""
    problems, opportunities = _split(report)
    if problems:
        worst = min(problems, key=lambda f: f.severity.rank)
        text = Text.assemble((_plural(len(problems), "problem", "problems") + " found", "bold"),
                             ", most severe " if len(problems) > 1 else ", ",
                             (worst.severity.value.upper(), _SEVERITY_STYLE[worst.severity]),
                             f": {worst.code} {worst.title}.")
    else:
        text = Text.assemble(("No problems found.", "green"),
                             " Nothing triage checks looks wrong on what it could see.")
    if opportunities:
        text.append(f" {_plural(len(opportunities), 'opportunity', 'opportunities')} below.")
    return text


def findings_console(report: Report, out: Console) -> None:
    problems, opportunities = _split(report)
    out.print()
    hang(out, verdict_text(report), indent=2)
    _findings_block(problems, out)
    if opportunities:
        out.print("\n[bold]Opportunities[/] [dim](a better configuration; no symptom seen on this deployment)[/]")
        _findings_block(opportunities, out)
    for r in report.skipped_rules:
        if r.reason.startswith("errored"):
            out.print()
            hang(out, r.reason, Text.assemble((f"{r.code} errored", "bold red"), " (the other rules ran): "),
                 indent=2)


def _findings_block(findings: list[Finding], out: Console) -> None:
    for f in findings:
        out.print()
        head = Text.assemble((f.severity.value.upper(), _SEVERITY_STYLE[f.severity]), " ", (f.code, "bold"), " ")
        hang(out, Text.assemble(f.title, " ", (f"({f.certainty.value})", "dim")), head)
        hang(out, f.message, "  ")
        for key, value in f.evidence.items():
            hang(out, f"{key} = {evidence_value(key, value)}", "    ", indent=6)
        hang(out, f.fix.text, Text.assemble("  ", ("fix:", "bold"), " "))
        for cmd in f.fix.commands:      # one line, never wrapped: it is copied, not read
            out.print(Text.assemble("    $ ", cmd), soft_wrap=True)
        if f.fix.flags:
            hang(out, "  ".join(f.fix.flags), "    set: ")
        if f.explains:
            hang(out, ", ".join(f.explains), "  explains: ")


def verdict_markdown(report: Report) -> str:
    return f"**{verdict_text(report).plain}**"


def coverage_markdown(report: Report) -> str:
    lines = [f"- {line}" for line in (skipped_summary(report),) if line]
    layers = layer_words(report)
    if layers:
        lines.append("- looked at: " + " · ".join(layers))
    return "\n".join(lines)


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
