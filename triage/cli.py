"""The typer app. Each command lives in triage/commands/<name>.py and is registered here with one line."""
from __future__ import annotations

import typer

from triage import __version__
from triage.cli_help import TriageCommand, TriageGroup
from triage.cli_support import SETTINGS, manual

app = typer.Typer(
    name="triage",
    help=manual("Why is my LLM inference slow, and what do I change? "
                "Exit codes: 0 ok, 1 gate tripped, 2 could not do the job, 130 interrupted.",
                "triage diagnose --url http://127.0.0.1:8000",
                "triage bench --url http://127.0.0.1:8000 --concurrency 1,4,16 --repeat 3 --json base.json",
                "triage compare base.json cand.json --format markdown"),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=TriageGroup,
)
# The commands in the order a user meets them: find the cause, measure, gate, plan; then the rest.
TriageGroup.order = ("diagnose", "bench", "compare", "plan", "coldstart", "watch", "serve", "baseline", "import",
                     "engines", "rules")


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
from triage.commands import coldstart as _coldstart  # noqa: E402
from triage.commands import compare as _compare  # noqa: E402
from triage.commands import diagnose as _diagnose  # noqa: E402
from triage.commands import engines as _engines  # noqa: E402
from triage.commands import import_cmd as _import  # noqa: E402
from triage.commands import plan as _plan  # noqa: E402
from triage.commands import rules as _rules  # noqa: E402
from triage.commands import serve as _serve  # noqa: E402
from triage.commands import watch as _watch  # noqa: E402

app.command("diagnose", cls=TriageCommand, help=manual(
    "Run every probe and the rules; print ranked findings with evidence and exact flags.",
    "triage diagnose --url http://127.0.0.1:8000",
    "triage diagnose --url http://127.0.0.1:8000 --bench bench.json --format markdown",
    "triage diagnose --prometheus http://127.0.0.1:9090 --history-window 1h"))(_diagnose.diagnose)
bench_app = typer.Typer(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
                        cls=TriageGroup)
bench_app.callback(help=manual(
    "Load-test an OpenAI-compatible server (or the bundled reference engine).\n\n"
    "Closed-loop concurrency and open-loop rate levels, with goodput, server and GPU state per level, and a "
    "verdict on whether the client itself was the bottleneck. `triage bench merge DIR...` merges shard outputs.",
    "triage bench --url http://127.0.0.1:8000 --concurrency 1,4,16 --json bench.json",
    "triage bench --url http://127.0.0.1:8000 --concurrency 1,4 --repeat 3 --output-dir out/base",
    "triage bench --url http://127.0.0.1:8000 --slo ttft_ms=500,tpot_ms=50 --find-max concurrency"))(_bench.bench)
bench_app.command("merge", cls=TriageCommand, help=manual(
    "One report from the per-request records of several shards or workers (percentiles from all records).",
    "triage bench merge out/shard-0 out/shard-1 --json bench.json",
    "triage bench merge out/shard-* --format markdown"))(_bench.merge)
app.add_typer(bench_app, name="bench")
app.command("compare", cls=TriageCommand, help=manual(
    "The CI gate: compare two reports; exit 1 on a regression.\n\n"
    "Exit 0 pass, 1 regression, 2 unusable or incomparable input. Each metric at each level is judged on the "
    "95% interval of its change against its limit (from the repeats, else the per-request samples). "
    "A metric with neither repeats nor per-request samples is judged on its point change against the limit "
    "and marked threshold only. A run whose repeats drifted is flagged as such.",
    "triage compare base.json cand.json",
    "triage compare base.json cand.json --max-regression ttft_ms.p99=10% --format junit > triage.xml",
    "triage compare base.json cand.json --inconclusive fail --format markdown"))(_compare.compare)
app.command("import", cls=TriageCommand, help=manual(
    "Convert a vLLM, AIPerf or GuideLLM result file into a triage bench report.",
    "triage import vllm-result.json --json base.json",
    "triage import profile_export_aiperf.json --json cand.json"))(_import.import_file)
app.command("serve", cls=TriageCommand, help=manual(
    "Serve the reference engine: OpenAI-compatible API, vLLM-named /metrics.",
    "triage serve --port 8000",
    "triage serve --model small --port 8001 --inject-delay-ms 5"))(_serve.serve)
app.add_typer(_rules.app, name="rules", help=manual(
    "The rule registry: `list`, or `explain CODE`.",
    "triage rules list",
    "triage rules explain KV001"))
app.add_typer(_engines.app, name="engines", help=manual(
    "What triage knows of each engine: `list` the engines and the versions tabled, or `show ENGINE` at a version.",
    "triage engines list",
    "triage engines show tgi --version 3.3.6"))
app.command("baseline", cls=TriageCommand, help=manual(
    "Measure each serving optimization's before/after gain on this host with the reference engine.",
    "triage baseline --quick",
    "triage baseline --rows batching,kv-layout --json baseline.json"))(_baseline.baseline)
app.command("watch", cls=TriageCommand, help=manual(
    "Diagnose on a loop and serve findings and key signals as Prometheus metrics.",
    "triage watch --url http://127.0.0.1:8000 --metrics-port 9464",
    "triage watch --print-alert-rules > triage-alerts.yml"))(_watch.watch)
app.command("coldstart", cls=TriageCommand, context_settings={"allow_interspersed_args": False}, help=manual(
    "Start a server and break its time to ready into phases (download, weight load, compile, CUDA graphs, KV, "
    "API server), then time its first token. --repeat shows warm starts apart from the first.",
    "triage coldstart -- triage serve --port 8000",
    "triage coldstart --repeat 3 --json cold.json -- vllm serve Qwen/Qwen3-0.6B --port 8000",
    "triage coldstart --timeout 120 --html cold.html -- llama-server -m model.gguf --port 8080"))(_coldstart.coldstart)
app.command("plan", cls=TriageCommand, help=manual(
    "VRAM fit, KV capacity, roofline speed, fleet size and cost; vLLM flags.",
    "triage plan --model llama-3.1-8b --gpu h100-sxm",
    "triage plan --model llama-3.1-70b --gpu a100-80gb --qps 20 --price-per-gpu-hour 2.5"))(_plan.plan)

def main() -> None:
    app(prog_name="triage")
