"""`triage coldstart -- <launch command...>`: time to ready and to the first token, phase by phase."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import typer

from triage.cli_support import OptionSpec, console, format_option, funnel, option_groups
from triage.coldstart.writers import COLDSTART, ColdstartDoc, dumps


@dataclass(frozen=True)
class ColdstartOptions:
    """`triage coldstart`'s command line, as given (each default written here once)."""
    command: tuple[str, ...] = ()
    repeat: int = 1
    url: str | None = None
    engine: str | None = None
    timeout_s: float = 600.0


COLDSTART_OPTIONS: OptionSpec = {
    "command": (list[str], typer.Argument(None, metavar="-- COMMAND...",
                                          help="The server's launch command, after `--`.")),
    "repeat": (int, typer.Option(None, "--repeat", help="Start it K times: the first start against the warm ones.")),
    "url": (str, typer.Option(None, "--url", help="Where it serves (default: its --host/--port, or the address its "
                                                  "log prints).")),
    "engine": (str, typer.Option(None, "--engine", help="Whose log markers to read, when the command does not say "
                                                        "(a wrapper script): vllm, sglang, tgi, llama.cpp, reference.")),
    "timeout_s": (float, typer.Option(None, "--timeout", help="Seconds to wait for its health route to answer.")),
}


@funnel
@option_groups(opts=(ColdstartOptions, COLDSTART_OPTIONS))
def coldstart(
    opts: ColdstartOptions,
    json_out: Path = typer.Option(None, "--json", help="Write the JSON report to FILE ('-': stdout, as --format "
                                                       "json)."),
    fmt: str = format_option(COLDSTART),
    html_out: Path = typer.Option(None, "--html", help="Write an HTML bar chart of the phases to FILE."),
    log_file: Path = typer.Option(None, "--log", help="Write every start's server log to FILE, one after the "
                                                      "other, redacted: `triage diagnose --log FILE` judges "
                                                      "the starts (a compile that does not shrink, ...)."),
) -> int:
    """Start the server, read its log as it streams, poll its health route, time one request's first token,
    stop it. Exit 0 ready, 2 never ready (timeout or exit), 130 on Ctrl-C; no process is left behind. While a
    start takes over 2 s, its launch, phases and a heartbeat go to stderr; stdout carries only the report."""
    command, repeat, url, engine, timeout_s = opts.command, opts.repeat, opts.url, opts.engine, opts.timeout_s
    from triage.coldstart.run import coldstart as run_coldstart
    from triage.coldstart.view import render_html
    from triage.core.errors import UsageError
    from triage.formats import Output, write

    if timeout_s <= 0:
        raise UsageError(f"--timeout {timeout_s:g}: must be positive")
    to_stdout = json_out is not None and str(json_out) == "-"
    if to_stdout and fmt not in ("text", "json"):
        raise UsageError(f"--json - and --format {fmt} both write stdout: give --json a FILE")
    with _opened(log_file) as log_out:
        report = run_coldstart(list(command), repeat=repeat, url=url, timeout_s=timeout_s, engine_name=engine,
                               progress_to=console(stderr=True), log_out=log_out)
    if log_file is not None:
        typer.echo(f"server log: {log_file}", err=True)
    write("json" if to_stdout else fmt, Output(ColdstartDoc(report), console()))  # type: ignore[arg-type]
    if json_out is not None and not to_stdout:
        json_out.write_text(dumps(report))
        typer.echo(f"JSON report: {json_out}", err=True)
    if html_out is not None:
        html_out.write_text(render_html(report))
        typer.echo(f"HTML chart: {html_out}", err=True)
    if report["interrupted"]:
        return 130
    return 0 if report["runs"] and all(r["outcome"] == "ready" for r in report["runs"]) else 2


@contextlib.contextmanager
def _opened(path: Path | None) -> Iterator[TextIO | None]:
    if path is None:
        yield None
        return
    from triage.core.errors import UsageError

    try:
        out = path.open("w", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--log {path}: cannot write it ({e.strerror or e})") from None
    with out:
        yield out
