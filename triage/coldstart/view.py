"""A coldstart report as text (a phase table with bars per start, fitted to the terminal's width), as Markdown,
or as an HTML page of timelines."""
from __future__ import annotations

import textwrap

from triage.render.fmt import size_text

BAR_WIDTH = 30
DEFAULT_WIDTH = 80
LABEL_MIN, LABEL_MAX = 12, 32
UNFINISHED = "(reached, not finished)"
# (heading, width) of the numeric columns after the phase's label.
COLUMNS = (("at s", 7), ("seconds", 8), ("bytes", 10), ("MB/s", 8))


def _fmt_s(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}" if x < 1 else f"{x:.2f}"


def _cells(p: dict) -> list[str]:
    bw = f"{p['bandwidth_bytes_per_s'] / 1e6:.1f}" if p.get("bandwidth_bytes_per_s") else ""
    return [_fmt_s(p["started_at_s"]), _fmt_s(p["seconds"]), size_text(p["bytes"]), bw]


def _head(run: dict) -> str:
    head = f"start {run['run']} ({'cold' if run['run'] == 1 else 'warm'}): {run['outcome']}"
    if run.get("ready_s") is not None:
        head += f", ready in {run['ready_s']:.2f} s"
    if run.get("ttft_s") is not None:
        head += f", first token {run['ttft_s'] * 1000:.0f} ms after ready ({run['first_token_s']:.2f} s from launch)"
    return head


def _phase_table(phases: list[dict], width: int) -> list[str]:
    """The table at `width` columns: the label column as wide as its longest label (cut with … below that),
    the byte columns only where a phase has bytes, the bar in what is left; an unfinished phase says so on
    its own line below its row."""
    rows = [(p, _cells(p)) for p in phases]
    shown = [i for i, _ in enumerate(COLUMNS) if i < 2 or any(cells[i] for _, cells in rows)]
    numbers = sum(COLUMNS[i][1] + 1 for i in shown)
    label_w = max(LABEL_MIN, min(LABEL_MAX, max(len(p["label"]) for p in phases), width - 2 - numbers - 3))
    bar_w = max(0, min(BAR_WIDTH, width - 2 - label_w - numbers - 2))
    longest = max((p["seconds"] or 0.0 for p in phases), default=0.0) or 1.0

    def row(label: str, cells: list[str]) -> str:
        label = label if len(label) <= label_w else label[:label_w - 1] + "…"
        return f"  {label:<{label_w}}" + "".join(f" {cells[i]:>{COLUMNS[i][1]}}" for i in shown)

    out = [row("phase", [name for name, _ in COLUMNS]).rstrip()]
    for p, cells in rows:
        bar = "█" * max(1, round(bar_w * (p["seconds"] or 0.0) / longest)) if p["seconds"] and bar_w else ""
        out.append((row(p["label"], cells) + "  " + bar).rstrip())
        if not p["completed"]:
            out.append(f"    {UNFINISHED}")
    return out


def _run_lines(run: dict, width: int) -> list[str]:
    start = run.get("startup") or {}
    phases = start.get("phases") or []
    out = [_head(run)]
    if not phases:
        out.append("  no start-up phase seen in its log" + ("" if start else " (engine not recognised)"))
    else:
        out.extend(_phase_table(phases, width))
    if phases and run.get("ready_s"):
        total = start.get("phases_total_s") or 0.0
        out.append(f"  phases add up to {total:.2f} s of {run['ready_s']:.2f} s to ready "
                   f"({100 * total / run['ready_s']:.0f}%)")
    if run["outcome"] != "ready":
        if run.get("exit_code") is not None:
            out.append(f"  the server exited with code {run['exit_code']}")
        out.append("  last log lines:")
        out.extend(f"    {line}" for line in run.get("last_lines", []))
    if run.get("error"):
        out.append(f"  {run['error']}")
    return out


def _fit(line: str, width: int) -> list[str]:
    """A line longer than `width` wrapped at its own indent plus two (a word longer than a line is cut)."""
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()))
    return textwrap.wrap(line, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, drop_whitespace=True) or [line[:width]]


def render_text(report: dict, width: int | None = None) -> str:
    """The report for a terminal `width` columns wide (default 80): no line is longer."""
    width = max(40, width or DEFAULT_WIDTH)
    lines = [f"triage coldstart: {' '.join(report['argv'])}",
             f"engine: {report['engine'] or 'not recognised (phases need its log markers)'}"
             + (f", {report['url']}" if report.get("url") else "")]
    for run in report["runs"]:
        lines.append("")
        lines.extend(_run_lines(run, width))
    warm = report.get("warm_vs_first")
    if warm:
        lines += ["", f"first start {warm['first_ready_s']:.2f} s to ready, warm starts {warm['warm_ready_median_s']:.2f} s "
                  f"(median): the first pays {warm['saved_s']:+.2f} s"]
        for name, p in warm["phases"].items():
            lines.append(f"  {name:<12} first {p['first_s']:.2f} s, warm {p['warm_median_s']:.2f} s")
    if report.get("interrupted"):
        lines += ["", "interrupted (Ctrl-C): the server was stopped; the phases above are those it reached"]
    return "\n".join(part for line in lines for part in _fit(line, width)) + "\n"


def _md_run(run: dict) -> list[str]:
    from triage.render.fmt import md_table

    start = run.get("startup") or {}
    phases = start.get("phases") or []
    out = ["", f"### {_head(run)}", ""]
    if phases:
        rows = [[p["label"], *_cells(p), "" if p["completed"] else "reached, not finished"] for p in phases]
        out.append(md_table(["phase", "at s", "seconds", "bytes", "MB/s", "note"], rows))
        if run.get("ready_s"):
            out += ["", f"Phases add up to {start.get('phases_total_s') or 0.0:.2f} s of {run['ready_s']:.2f} s "
                    "to ready."]
    else:
        out.append("No start-up phase seen in its log" + ("." if start else " (engine not recognised)."))
    if run["outcome"] != "ready":
        code = run.get("exit_code")
        out += ["", (f"The server exited with code {code}. " if code is not None else "") + "Last log lines:", "",
                "```", *run.get("last_lines", []), "```"]
    if run.get("error"):
        out += ["", run["error"]]
    return out


def render_markdown(report: dict) -> str:
    """The report as Markdown: a table of phases per start, then the first start against the warm ones."""
    from triage.render.fmt import md_table

    engine = report["engine"] or "not recognised (phases need its log markers)"
    lines = [f"## triage coldstart: `{' '.join(report['argv'])}`", "",
             f"Engine: {engine}" + (f", {report['url']}" if report.get("url") else "")]
    for run in report["runs"]:
        lines += _md_run(run)
    warm = report.get("warm_vs_first")
    if warm:
        lines += ["", "### First start against the warm ones", "",
                  f"First start {warm['first_ready_s']:.2f} s to ready, warm starts {warm['warm_ready_median_s']:.2f} s "
                  f"(median): the first pays {warm['saved_s']:+.2f} s.", ""]
        if warm["phases"]:
            lines.append(md_table(["phase", "first s", "warm median s"],
                                  [[name, f"{p['first_s']:.2f}", f"{p['warm_median_s']:.2f}"]
                                   for name, p in warm["phases"].items()]))
    if report.get("interrupted"):
        lines += ["", "Interrupted (Ctrl-C): the server was stopped; the phases above are those it reached."]
    return "\n".join(lines) + "\n"


def render_html(report: dict) -> str:
    """A page with one timeline per start: a lane per phase on a time axis in seconds (triage/render/html_coldstart.py)."""
    from triage.render.html_coldstart import render

    return render(report)
