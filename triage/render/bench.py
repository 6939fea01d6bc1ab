"""The bench levels table."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from triage.model import BenchLevel, BenchSection
from triage.render.fmt import md_table, num

COLUMNS = ["level", "ok/fail", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms",
           "ITL p99 ms", "E2E p99 ms", "out tok/s", "goodput req/s", "valid"]


def level_name(level: BenchLevel) -> str:
    if level.concurrency is not None:
        return f"c={level.concurrency}"
    return f"rate={num(level.request_rate, 2)}/s"


def row_cells(level: BenchLevel) -> list[str]:
    return [
        level_name(level),
        f"{level.requests.completed}/{level.requests.failed}",
        num(level.ttft_ms.p50), num(level.ttft_ms.p99),
        num(level.tpot_ms.p50), num(level.tpot_ms.p99),
        num(level.itl_ms.p99), num(level.e2e_ms.p99),
        num(level.output_tokens_per_s), num(level.goodput_requests_per_s, 2),
        "yes" if level.client.valid else f"NO: {level.client.invalid_reason}",
    ]


def levels_console(section: BenchSection, out: Console) -> None:
    table = Table(title="Load levels", title_justify="left")
    for col in COLUMNS:
        table.add_column(col, justify="right" if col not in ("level", "valid") else "left")
    for level in section.levels:
        table.add_row(*row_cells(level))
    out.print(table)
    for key, value in (section.summary or {}).items():
        out.print(f"  {key}: {value}", markup=False)


def levels_markdown(section: BenchSection) -> str:
    text = "### Load levels\n\n" + md_table(COLUMNS, [row_cells(lv) for lv in section.levels])
    if section.summary:
        text += "\n\n" + "\n".join(f"- {k}: {v}" for k, v in section.summary.items())
    return text
