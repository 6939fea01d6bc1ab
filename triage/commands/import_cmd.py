"""`triage import FILE --json OUT`: a peer's result file (vLLM, AIPerf, GuideLLM) as a triage bench report."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from triage.cli_support import OptionSpec, emit, format_option, funnel, option_groups
from triage.core.report import ReportKind


@dataclass(frozen=True)
class ImportOptions:
    """`triage import`'s command line, as given (each default written here once)."""
    path: Path
    json: Path | None = None
    format: str = "text"


IMPORT_OPTIONS: OptionSpec = {
    "path": (Path, typer.Argument(..., help="A vLLM `bench serve --save-result` JSON, an AIPerf "
                                            "profile_export_aiperf.json or a GuideLLM benchmarks.json.")),
    "json": (Path, typer.Option(None, "--json", help="Write the triage bench report to this file.")),
    "format": (str, format_option(ReportKind.BENCH)),
}


@funnel
@option_groups(opts=(ImportOptions, IMPORT_OPTIONS))
def import_file(opts: ImportOptions) -> int:
    """Convert a peer's result file into a triage bench report (format auto-detected). Per-request samples
    are kept where the file has them; the report's config.missing_fields says what the source lacked."""
    from triage.importers import import_peer

    _, report = import_peer(opts.path)
    emit(report, opts.json, opts.format)
    return 0
