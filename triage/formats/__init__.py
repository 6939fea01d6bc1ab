"""The one registry of output formats: what `--format` offers, for which report kinds, and who writes it.

A format is one file in this package that calls `register(Format(...))`: its name, one writer per report
kind it renders, and whether stdout then carries a view for people (`human`) or only the document.
Every command builds its `--format` option from `names_for(kind)` (`triage.cli_support.format_option`) and
writes through `write(name, Output(...))`; docs/ARCHITECTURE.md shows adding one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from triage.core.registry import Registry
from triage.core.report import Report, ReportKind


@dataclass(frozen=True)
class Output:
    """What a writer receives: the report, the console on stdout, and what a kind renders beyond the
    report (compare: a `triage.compare.CompareView` with the result and the two inputs' names)."""
    report: Report
    screen: Console
    detail: Any = None


Writer = Callable[[Output], None]


@dataclass(frozen=True)
class Format:
    name: str
    writers: Mapping[ReportKind, Writer]  # the kinds it renders, and how
    human: bool = False                   # stdout is a view for people: "written to" notes go there too
    announces_files: bool = True          # say where --json and the other files went
    rank: float = 0.0                     # its place in `--format`'s list of choices: lower first
    rank_for: Mapping[ReportKind, float] = field(default_factory=dict)  # another place for one kind

    def place(self, kind: ReportKind) -> float:
        return self.rank_for.get(kind, self.rank)


# Each module of this package registers one format by being imported (triage.core.registry).
FORMATS: Registry[Format] = Registry("format", lambda fmt: fmt.name, packages=(__name__,))


def register(fmt: Format) -> Format:
    return FORMATS.add(fmt)


def names_for(kind: ReportKind) -> tuple[str, ...]:
    """The formats that render this kind, in the order `--format` lists them (by rank)."""
    offered = [fmt for fmt in FORMATS if kind in fmt.writers]
    return tuple(fmt.name for fmt in sorted(offered, key=lambda fmt: fmt.place(kind)))


def get(name: str) -> Format:
    return FORMATS[name]


def write(name: str, out: Output) -> Format:
    """Write `out` in format `name` (one `names_for(out.report.kind)` offers) and return the format."""
    fmt = FORMATS[name]
    fmt.writers[out.report.kind](out)
    return fmt
