"""`triage import FILE --json OUT`: a peer's result file (vLLM, AIPerf, GuideLLM) as a triage bench report."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import emit, format_option, funnel
from triage.core.report import ReportKind


@funnel
def import_file(
    path: Path = typer.Argument(..., help="A vLLM `bench serve --save-result` JSON, an AIPerf "
                                          "profile_export_aiperf.json or a GuideLLM benchmarks.json."),
    json_path: Path = typer.Option(None, "--json", help="Write the triage bench report to this file."),
    fmt: str = format_option(ReportKind.BENCH),
) -> int:
    """Convert a peer's result file into a triage bench report (format auto-detected). Per-request samples
    are kept where the file has them; the report's config.missing_fields says what the source lacked."""
    from triage.importers import import_peer

    _, report = import_peer(path)
    emit(report, json_path, fmt)
    return 0
