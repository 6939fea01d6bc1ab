"""The rich live view while a run goes: one row per level with progress, errors and running TTFT p50/p99.
It renders on rich's refresh thread (a few times a second), never per chunk."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.live import Live
from rich.table import Table

from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec
from triage.core.report import BenchLevel, level_name
from triage.render.fmt import num


@dataclass(slots=True)
class _Row:
    name: str
    total: int | None
    repeat: int = 0
    done: int = 0
    failed: int = 0
    ttft_ms: list[float] = field(default_factory=list)
    output_tokens: int = 0
    finished: bool = False


class LiveView:
    """An Observer (see level_runner.py) that draws a rich Live table on `console`."""

    def __init__(self, console: Console, refresh_per_second: float = 4.0):
        self.rows: dict[str, _Row] = {}
        self.warmup_done = 0
        self._live = Live(self, console=console, refresh_per_second=refresh_per_second, transient=True)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(*exc)

    def level_started(self, spec: LevelSpec, repeat: int, num_requests: int | None) -> None:
        row = self.rows.setdefault(spec.name, _Row(spec.name, num_requests))
        row.repeat, row.done = repeat, 0  # progress is per repeat

    def record(self, record: RequestRecord) -> None:
        if record.warmup:
            self.warmup_done += 1
            return
        row = self.rows.get(record.level)
        if row is None:
            return
        row.done += 1
        if record.ok:
            if record.ttft_s is not None:
                row.ttft_ms.append(record.ttft_s * 1000.0)
            row.output_tokens += record.output_tokens or 0
        else:
            row.failed += 1

    def level_finished(self, level: BenchLevel) -> None:
        row = self.rows.get(level_name(level))
        if row is not None:
            row.finished = True

    def __rich__(self) -> Table:
        table = Table(title="triage bench (live)", title_justify="left")
        for col in ("level", "repeat", "requests", "failed", "TTFT p50\nms", "TTFT p99\nms", "out\ntokens", "state"):
            # fold, never "…": a number is shown whole even on a narrow terminal
            table.add_column(col, justify="left" if col in ("level", "state") else "right", overflow="fold")
        if self.warmup_done and not self.rows:
            table.add_row("warmup", "", str(self.warmup_done), "", "", "", "", "running")
        for row in list(self.rows.values()):
            ttft = np.asarray(row.ttft_ms[-2000:]) if row.ttft_ms else None
            p50, p99 = (np.percentile(ttft, [50, 99]).tolist() if ttft is not None else (None, None))
            total = f"/{row.total}" if row.total else ""
            table.add_row(row.name, str(row.repeat + 1), f"{row.done}{total}", str(row.failed), num(p50), num(p99),
                          str(row.output_tokens), "done" if row.finished else "running")
        return table
