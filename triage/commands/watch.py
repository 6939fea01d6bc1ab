"""`triage watch`: diagnose on a loop, findings and key signals served as Prometheus metrics."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import OptionSpec, console, funnel, option_groups
from triage.watch.run import WatchRequest

WATCH_OPTIONS: OptionSpec = {
    "url": (str, typer.Option(None, "--url", envvar="TRIAGE_URL",
        help="The server to watch. Without it, triage looks for a local vLLM, SGLang, TGI or "
        "`triage serve` process, as diagnose does.")),
    "interval": (str, typer.Option(None, "--interval", help="Time between the starts of two cycles, e.g. 30s, 2m.")),
    "window_s": (float, typer.Option(None, "--window-s",
        help="Seconds each cycle measures rates and deltas over (default: 2, or half "
        "the --interval when that is shorter). Must be shorter than --interval.")),
    "metrics_port": (int, typer.Option(None, "--metrics-port", help="Port of the /metrics endpoint (0: any free port).")),
    "metrics_host": (str, typer.Option(None, "--metrics-host",
        help="Address the /metrics endpoint binds. 0.0.0.0 exposes it to the network "
        "(the DaemonSet sets it explicitly).")),
    "log": (Path, typer.Option(None, "--log", help="A server log to scan each cycle.")),
    "skip": (str, typer.Option(None, "--skip", help="Probes not to run each cycle (default: storage, which "
        "reads model files).")),
    "disable": (str, typer.Option(None, "--disable", help="Rule codes to turn off, comma-separated.")),
    "cycles": (int, typer.Option(None, "--cycles", help="Stop after N cycles (default: run until Ctrl-C).")),
    "print_alert_rules": (bool, typer.Option(None, "--print-alert-rules",
        help="Print a Prometheus rules file (alerts per finding severity, "
        "recording rules, week-over-week regressions) and exit.")),
}


@funnel
@option_groups(req=(WatchRequest, WATCH_OPTIONS))
def watch(req: WatchRequest) -> int:
    """Run the diagnose probes and rules every --interval against a server and serve the findings, probe
    status and key signals on --metrics-port for Prometheus."""
    if req.print_alert_rules:
        from triage.watch.alert_rules import rules_yaml

        typer.echo(rules_yaml(), nl=False)
        return 0
    from triage.watch.run import run_watch

    err = console(stderr=True)
    return run_watch(req, lambda line: err.print(line, markup=False))
