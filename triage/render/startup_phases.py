"""The server's start-up phases read from its log (`logs.startup`), under the probe table."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from triage.core.report import Report
from triage.render.fmt import md_table


def _startup(report: Report):
    logs = next((p for p in report.probes if p.name == "logs"), None)
    return getattr(logs.data, "startup", None) if logs is not None and logs.data is not None else None


def _rows(startup) -> list[list[str]]:
    rows = []
    for p in startup.phases:
        bw = f"{p.bandwidth_bytes_per_s / 1e9:.2f} GB/s" if p.bandwidth_bytes_per_s else ""
        size = f"{p.bytes / 2**30:.2f} GiB" if p.bytes else ""
        seconds = "" if p.seconds is None else f"{p.seconds:.2f}" + ("" if p.logged else " (between lines)")
        rows.append([p.label or p.phase or "", seconds, size, bw])
    return rows


def _title(startup) -> str:
    ready = f", ready after {startup.ready_s:.1f} s" if startup.ready_s is not None else ""
    return f"Server start-up from its log ({startup.engine}, {startup.num_starts} start(s) seen{ready})"


def startup_console(report: Report, out: Console) -> None:
    startup = _startup(report)
    if startup is None or not startup.phases:
        return
    table = Table(title=_title(startup), title_justify="left")
    for col in ("phase", "seconds", "bytes", "bandwidth"):
        table.add_column(col)
    for row in _rows(startup):
        table.add_row(*row)
    out.print(table)


def startup_markdown(report: Report) -> str:
    startup = _startup(report)
    if startup is None or not startup.phases:
        return ""
    return f"### {_title(startup)}\n\n" + md_table(["phase", "seconds", "bytes", "bandwidth"], _rows(startup))
