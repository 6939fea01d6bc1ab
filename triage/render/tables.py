"""Generic sections (baseline, plan, compare): each carries `tables: [{title, columns, rows, notes?}]`
for people, next to its structured data for machines."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from triage.render.fmt import md_table, num


def _tables(section: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in section.get("tables", []) if isinstance(t, dict) and "columns" in t]


def _numeric(cells: list[Any]) -> bool:
    return bool(cells) and all(v is None or isinstance(v, (int, float)) for v in cells)


def section_console(section: dict[str, Any], out: Console) -> None:
    for t in _tables(section):
        table = Table(title=t.get("title"), title_justify="left")
        rows = t.get("rows", [])
        for i, col in enumerate(t["columns"]):
            # A number is never cut to "…": numeric columns keep their width (text columns wrap first), and
            # everything folds rather than ellipsizes on a terminal too narrow for even that.
            table.add_column(str(col), overflow="fold", no_wrap=_numeric([r[i] for r in rows if i < len(r)]))
        for row in rows:
            table.add_row(*(num(v) for v in row))
        out.print(table)
        for note in t.get("notes", []):
            out.print(f"  {note}", markup=False)


def section_markdown(section: dict[str, Any]) -> str:
    parts = []
    for t in _tables(section):
        if t.get("title"):
            parts.append(f"### {t['title']}")
        parts.append(md_table([str(c) for c in t["columns"]], t.get("rows", [])))
        parts += [f"- {n}" for n in t.get("notes", [])]
    return "\n\n".join(parts)
