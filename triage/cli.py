"""The typer app. Each command lives in triage/commands/<name>.py; it is registered here, with its help, by where
it lives, and imported only when it runs."""
from __future__ import annotations

import typer

from triage import __version__
from triage.cli_help import SETTINGS, Lazy, TriageGroup, manual


class RootGroup(TriageGroup):
    """`triage`: its commands are the lazy table below."""


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
    cls=RootGroup,
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


# The commands, in the order a user meets them (find the cause, measure, gate, plan; then the rest). Each is
# imported only when it runs or its own help is asked for: `triage --version` and `triage --help` load none.
RootGroup.lazy = {
    "diagnose": Lazy("triage.commands.diagnose:diagnose", manual(
        "Run every probe and the rules; print ranked findings with evidence and exact flags.",
        "triage diagnose --url http://127.0.0.1:8000",
        "triage diagnose --url http://127.0.0.1:8000 --bench bench.json --format markdown",
        "triage diagnose --prometheus http://127.0.0.1:9090 --history-window 1h")),
    "bench": Lazy("triage.commands.bench:app", manual(
        "Load-test an OpenAI-compatible server (or the bundled reference engine).\n\n"
        "Closed-loop concurrency and open-loop rate levels, with goodput, server and GPU state per level, and a "
        "verdict on whether the client itself was the bottleneck. `triage bench merge DIR...` merges shard outputs.",
        "triage bench --url http://127.0.0.1:8000 --concurrency 1,4,16 --json bench.json",
        "triage bench --url http://127.0.0.1:8000 --concurrency 1,4 --repeat 3 --output-dir out/base",
        "triage bench --url http://127.0.0.1:8000 --slo ttft_ms=500,tpot_ms=50 --find-max concurrency")),
    "compare": Lazy("triage.commands.compare:compare", manual(
        "The CI gate: compare two reports; exit 1 on a regression.\n\n"
        "Exit 0 pass, 1 regression, 2 unusable or incomparable input. Each metric at each level is judged on the "
        "95% interval of its change against its limit (from the repeats, else the per-request samples). "
        "A metric with neither repeats nor per-request samples is judged on its point change against the limit "
        "and marked threshold only. A run whose repeats drifted is flagged as such.",
        "triage compare base.json cand.json",
        "triage compare base.json cand.json --max-regression ttft_ms.p99=10% --format junit > triage.xml",
        "triage compare base.json cand.json --inconclusive fail --format markdown")),
    "plan": Lazy("triage.commands.plan:plan", manual(
        "VRAM fit, KV capacity, roofline speed, fleet size and cost; vLLM flags.",
        "triage plan --model llama-3.1-8b --gpu h100-sxm",
        "triage plan --model llama-3.1-70b --gpu a100-80gb --qps 20 --price-per-gpu-hour 2.5")),
    "coldstart": Lazy("triage.commands.coldstart:coldstart", manual(
        "Start a server and break its time to ready into phases (download, weight load, compile, CUDA graphs, KV, "
        "API server), then time its first token. --repeat shows warm starts apart from the first.",
        "triage coldstart -- triage serve --port 8000",
        "triage coldstart --repeat 3 --json cold.json -- vllm serve Qwen/Qwen3-0.6B --port 8000",
        "triage coldstart --timeout 120 --html cold.html -- llama-server -m model.gguf --port 8080"),
        context_settings={"allow_interspersed_args": False}),
    "watch": Lazy("triage.commands.watch:watch", manual(
        "Diagnose on a loop and serve findings and key signals as Prometheus metrics.",
        "triage watch --url http://127.0.0.1:8000 --metrics-port 9464",
        "triage watch --print-alert-rules > triage-alerts.yml")),
    "serve": Lazy("triage.commands.serve:serve", manual(
        "Serve the reference engine: OpenAI-compatible API, vLLM-named /metrics.",
        "triage serve --port 8000",
        "triage serve --model small --port 8001 --inject-delay-ms 5")),
    "baseline": Lazy("triage.commands.baseline:baseline", manual(
        "Measure each serving optimization's before/after gain on this host with the reference engine.",
        "triage baseline --quick",
        "triage baseline --rows batching,kv-layout --json baseline.json")),
    "import": Lazy("triage.commands.import_cmd:import_file", manual(
        "Convert a vLLM, AIPerf or GuideLLM result file into a triage bench report.",
        "triage import vllm-result.json --json base.json",
        "triage import profile_export_aiperf.json --json cand.json")),
    "engines": Lazy("triage.commands.engines:app", manual(
        "What triage knows of each engine: `list` the engines and the versions tabled, or `show ENGINE` at a "
        "version.",
        "triage engines list",
        "triage engines show tgi --version 3.3.6")),
    "rules": Lazy("triage.commands.rules:app", manual(
        "The rule registry: `list`, or `explain CODE`.",
        "triage rules list",
        "triage rules explain KV001")),
}


def main() -> None:
    app(prog_name="triage")
