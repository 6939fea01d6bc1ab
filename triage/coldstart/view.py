"""A coldstart report as text (a phase table with bars per start) or as an HTML page of timelines."""
from __future__ import annotations

BAR_WIDTH = 30


def _fmt_bytes(n: int | None) -> str:
    if not n:
        return ""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _fmt_s(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}" if x < 1 else f"{x:.2f}"


def _run_lines(run: dict) -> list[str]:
    start = run.get("startup") or {}
    phases = start.get("phases") or []
    head = f"start {run['run']} ({'cold' if run['run'] == 1 else 'warm'}): {run['outcome']}"
    if run.get("ready_s") is not None:
        head += f", ready in {run['ready_s']:.2f} s"
    if run.get("ttft_s") is not None:
        head += f", first token {run['ttft_s'] * 1000:.0f} ms after ready ({run['first_token_s']:.2f} s from launch)"
    out = [head]
    if not phases:
        out.append("  no start-up phase seen in its log" + ("" if start else " (engine not recognised)"))
    longest = max((p["seconds"] or 0.0 for p in phases), default=0.0) or 1.0
    if phases:
        out.append(f"  {'phase':<32} {'at s':>7} {'seconds':>8} {'bytes':>10} {'MB/s':>8}  ")
    for p in phases:
        bar = "█" * max(1, round(BAR_WIDTH * (p["seconds"] or 0.0) / longest)) if p["seconds"] else ""
        bw = f"{p['bandwidth_bytes_per_s'] / 1e6:.1f}" if p.get("bandwidth_bytes_per_s") else ""
        mark = "" if p["completed"] else "  (reached, not finished)"
        out.append(f"  {p['label']:<32} {_fmt_s(p['started_at_s']):>7} {_fmt_s(p['seconds']):>8} "
                   f"{_fmt_bytes(p['bytes']):>10} {bw:>8}  {bar}{mark}")
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


def render_text(report: dict) -> str:
    lines = [f"triage coldstart: {' '.join(report['argv'])}",
             f"engine: {report['engine'] or 'not recognised (phases need its log markers)'}"
             + (f", {report['url']}" if report.get("url") else "")]
    for run in report["runs"]:
        lines.append("")
        lines.extend(_run_lines(run))
    warm = report.get("warm_vs_first")
    if warm:
        lines += ["", f"first start {warm['first_ready_s']:.2f} s to ready, warm starts {warm['warm_ready_median_s']:.2f} s "
                  f"(median): the first pays {warm['saved_s']:+.2f} s"]
        for name, p in warm["phases"].items():
            lines.append(f"  {name:<12} first {p['first_s']:.2f} s, warm {p['warm_median_s']:.2f} s")
    if report.get("interrupted"):
        lines += ["", "interrupted (Ctrl-C): the server was stopped; the phases above are those it reached"]
    return "\n".join(lines) + "\n"


def render_html(report: dict) -> str:
    """A page with one timeline per start: a lane per phase on a time axis in seconds (triage/render/html_coldstart.py)."""
    from triage.render.html_coldstart import render

    return render(report)
