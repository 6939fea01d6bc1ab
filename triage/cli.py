"""The typer app. Each command lives in triage/commands/<name>.py and is registered here with one line."""
from __future__ import annotations

import typer

from triage import __version__
from triage.cli_support import SETTINGS

app = typer.Typer(
    name="triage",
    help="Why is my LLM inference slow, and what do I change? "
         "Exit codes: 0 ok, 1 gate tripped, 2 could not do the job, 130 interrupted.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"triage {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    no_color: bool = typer.Option(False, "--no-color", help="No colour (NO_COLOR is honoured too)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    SETTINGS.debug = debug
    SETTINGS.no_color = no_color


# Command registration: one line per command module.
from triage.commands import baseline as _baseline  # noqa: E402
from triage.commands import bench as _bench  # noqa: E402
from triage.commands import compare as _compare  # noqa: E402
from triage.commands import diagnose as _diagnose  # noqa: E402
from triage.commands import import_cmd as _import  # noqa: E402
from triage.commands import plan as _plan  # noqa: E402
from triage.commands import rules as _rules  # noqa: E402
from triage.commands import serve as _serve  # noqa: E402
from triage.commands import watch as _watch  # noqa: E402

app.command("diagnose", help="Run every probe and the rules; print ranked findings with evidence and exact flags.")(
    _diagnose.diagnose)
bench_app = typer.Typer(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
bench_app.callback(help="Load-test an OpenAI-compatible server (or the bundled reference engine); "
                        "`triage bench merge DIR...` merges shard outputs.")(_bench.bench)
bench_app.command("merge", help="One report from the per-request records of several shards or workers "
                                "(percentiles from all records).")(_bench.merge)
app.add_typer(bench_app, name="bench")
app.command("compare")(_compare.compare)
app.command("import", help="Convert a vLLM, AIPerf or GuideLLM result file into a triage bench report.")(
    _import.import_file)
app.command("serve", help="Serve the reference engine: OpenAI-compatible API, vLLM-named /metrics.")(_serve.serve)
app.add_typer(_rules.app, name="rules", help="The rule registry: `list`, or `explain CODE`.")
app.command("baseline", help="Measure seed 000's before/after table on this host with the reference engine.")(_baseline.baseline)
app.command("watch", help="Diagnose on a loop and serve findings and key signals as Prometheus metrics.")(
    _watch.watch)
app.command("plan", help="VRAM fit, KV capacity, roofline speed, fleet size and cost; vLLM flags.")(_plan.plan)


def main() -> None:
    app(prog_name="triage")
