"""`triage coldstart -- <launch command...>`: time to ready and to the first token, phase by phase."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from triage.cli_support import funnel


@funnel
def coldstart(
    command: list[str] = typer.Argument(None, metavar="-- COMMAND...",
                                        help="The server's launch command, after `--`."),
    repeat: int = typer.Option(1, "--repeat", help="Start it K times: the first start against the warm ones."),
    url: str = typer.Option(None, "--url", help="Where it serves (default: its --host/--port, or the address its "
                                                "log prints)."),
    engine: str = typer.Option(None, "--engine", help="Whose log markers to read, when the command does not say "
                                                      "(a wrapper script): vllm, sglang, tgi, llama.cpp, reference."),
    timeout_s: float = typer.Option(600.0, "--timeout", help="Seconds to wait for its health route to answer."),
    json_out: Path = typer.Option(None, "--json", help="Write the JSON report to FILE ('-': stdout)."),
    html_out: Path = typer.Option(None, "--html", help="Write an HTML bar chart of the phases to FILE."),
) -> int:
    """Start the server, read its log as it streams, poll its health route, time one request's first token,
    stop it. Exit 0 ready, 2 never ready (timeout or exit), 130 on Ctrl-C; no process is left behind."""
    from triage.coldstart.run import coldstart as run_coldstart
    from triage.coldstart.view import render_html, render_text
    from triage.core.errors import UsageError

    if timeout_s <= 0:
        raise UsageError(f"--timeout {timeout_s:g}: must be positive")
    report = run_coldstart(command or [], repeat=repeat, url=url, timeout_s=timeout_s, engine_name=engine)
    text = json.dumps(report, indent=1)
    if json_out is not None and str(json_out) == "-":
        typer.echo(text)
    else:
        typer.echo(render_text(report), nl=False)
        if json_out is not None:
            json_out.write_text(text + "\n")
            typer.echo(f"JSON report: {json_out}", err=True)
    if html_out is not None:
        html_out.write_text(render_html(report))
        typer.echo(f"HTML chart: {html_out}", err=True)
    if report["interrupted"]:
        return 130
    return 0 if report["runs"] and all(r["outcome"] == "ready" for r in report["runs"]) else 2
