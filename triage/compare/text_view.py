"""The compare result as plain text for a terminal or a CI log. A full table when it fits the width; else
a compact layout, one line per metric grouped under its level. Lines are broken only between words (a
number, a verdict or a metric name is never split), and nothing is cut to an ellipsis."""
from __future__ import annotations

import textwrap

from triage.compare import CompareResult
from triage.compare.bench_diff import MetricComparison
from triage.compare.section import (
    headline,
    interval_text,
    metric_row,
    pct,
    settle_lines,
    verdict_text,
)
from triage.core.report import ReportKind
from triage.render.fmt import num

COLUMNS = ["level", "metric", "base", "cand", "change", "limit", "95% CI of change", "interval from", "verdict"]
_RIGHT = {2, 3, 4, 5}


def _wrap(text: str, width: int, indent: str = "", more: str = "    ") -> list[str]:
    return textwrap.wrap(text, width=max(20, width), initial_indent=indent, subsequent_indent=indent + more,
                         break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]


def _cells(result: CompareResult, m: MetricComparison) -> list[str]:
    return [v if isinstance(v, str) else num(v) for v in metric_row(result, m)]


def _full(result: CompareResult) -> list[str]:
    rows = [_cells(result, m) for m in result.metrics]
    widths = [max(len(c) for c in [h, *(r[i] for r in rows)]) for i, h in enumerate(COLUMNS)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in _RIGHT else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    return [line(COLUMNS), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _compact(result: CompareResult, width: int) -> list[str]:
    """`  VERDICT  metric  change  [CI]  max L%` under a `level` heading; base and candidate values are in the
    JSON and Markdown."""
    rows = [(m, verdict_text(result, m), pct(m.change_pct), interval_text(m)) for m in result.metrics]
    wv = max(len(r[1]) for r in rows)
    wm = max(len(r[0].metric) for r in rows)
    wc = max(len(r[2]) for r in rows)
    wi = max(len(r[3]) for r in rows)
    out: list[str] = []
    level = None
    for m, verdict, change, ci in rows:
        if m.level != level:
            level = m.level
            out.append(level)
        text = (f"  {verdict.ljust(wv)}  {m.metric.ljust(wm)}  {change.rjust(wc)}  {ci.ljust(wi)}  "
                f"max {m.max_regression_pct:g}%").rstrip()
        if len(text) > width:       # a terminal narrower than one row: break between words only
            out += _wrap(" ".join(text.split()), width, indent="  ")
        else:
            out.append(text)
    return out


def _bench_lines(result: CompareResult, width: int) -> list[str]:
    if result.same_data:        # the headline says so: the difference is exactly zero on every metric
        return []
    full = _full(result)
    lines = [""] + (full if max(len(ln) for ln in full) <= width else _compact(result, width))
    if any(m.interval is not None for m in result.metrics):
        sources = sorted({m.source or "" for m in result.metrics if m.interval})
        lines += _wrap(f"intervals: 95%, from {', '.join(sources)}", width)
    return lines


def render_text(result: CompareResult, width: int, base: str, cand: str) -> str:
    lines = _wrap(headline(result), width)
    lines += _wrap(f"base {base} vs candidate {cand}", width)
    if result.kind is ReportKind.BENCH:
        if result.changed:
            lines.append("what changed:")
            for d in result.changed:
                lines += _wrap(f"{d.category} {d.describe()}", width, indent="  ")
        lines += _bench_lines(result, width)
    else:
        diff = result.findings
        lines.append("")
        for label, findings in (("new", diff.new), ("resolved", diff.resolved), ("unchanged", diff.unchanged)):
            for f in findings:
                lines += _wrap(f"{label}: {f.severity.value} {f.code} {f.title}", width, indent="  ")
        if not (diff.new or diff.resolved or diff.unchanged):
            lines.append("  no findings in either report")
    for note in [*result.notes, *settle_lines(result)]:
        lines += _wrap(note, width, indent="  ")
    return "\n".join(lines) + "\n"
