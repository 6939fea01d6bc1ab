"""`triage watch`: diagnose on a loop, findings and key signals served as Prometheus metrics."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import console, funnel

DEFAULT_WINDOW_S = 2.0


@funnel
def watch(
    url: str = typer.Option(None, "--url", envvar="TRIAGE_URL",
                            help="The server to watch. Without it, triage looks for a local vLLM, SGLang, TGI or "
                                 "`triage serve` process, as diagnose does."),
    interval: str = typer.Option("30s", "--interval", help="Time between the starts of two cycles, e.g. 30s, 2m."),
    window_s: float = typer.Option(None, "--window-s",
                                   help="Seconds each cycle measures rates and deltas over (default: 2, or half "
                                        "the --interval when that is shorter). Must be shorter than --interval."),
    metrics_port: int = typer.Option(9464, "--metrics-port", help="Port of the /metrics endpoint (0: any free port)."),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host",
                                     help="Address the /metrics endpoint binds. 0.0.0.0 exposes it to the network "
                                          "(the DaemonSet sets it explicitly)."),
    log: Path = typer.Option(None, "--log", help="A server log to scan each cycle."),
    skip: str = typer.Option("storage", "--skip", help="Probes not to run each cycle (default: storage, which "
                                                       "reads model files)."),
    disable: str = typer.Option(None, "--disable", help="Rule codes to turn off, comma-separated."),
    cycles: int = typer.Option(None, "--cycles", help="Stop after N cycles (default: run until Ctrl-C)."),
    print_alert_rules: bool = typer.Option(False, "--print-alert-rules",
                                           help="Print a Prometheus rules file (alerts per finding severity, "
                                                "recording rules, week-over-week regressions) and exit."),
) -> int:
    """Run the diagnose probes and rules every --interval against a server and serve the findings, probe
    status and key signals on --metrics-port for Prometheus."""
    if print_alert_rules:
        from triage.watch.alert_rules import rules_yaml

        typer.echo(rules_yaml(), nl=False)
        return 0
    from triage.core.durations import parse_duration_s
    from triage.core.errors import UsageError
    from triage.diagnose import DiagnoseOptions
    from triage.rules import load_rules_config
    from triage.watch.exporter import WatchCollector, serve
    from triage.watch.loop import watch_forever

    interval_s = parse_duration_s(interval, "--interval")
    if cycles is not None and cycles < 1:
        raise UsageError(f"--cycles {cycles}: must be at least 1")
    if not 0 <= metrics_port <= 65535:
        raise UsageError(f"--metrics-port {metrics_port}: not a port (0 to 65535)")
    if log is not None and not log.is_file():
        raise UsageError(f"--log {log}: no such file")
    if window_s is None:
        window_s = min(DEFAULT_WINDOW_S, interval_s / 2)  # a default never rejects a valid --interval
    elif not 0 < window_s < interval_s:
        raise UsageError(f"--window-s {window_s:g} must be > 0 and shorter than --interval ({interval_s:g} s)")
    opts = DiagnoseOptions(url=url, window_s=window_s, log_path=str(log) if log else None,
                           skip=tuple(s.strip() for s in (skip or "").split(",") if s.strip()),
                           rules_config=load_rules_config(None).with_disabled((disable or "").split(",")))
    err = console(stderr=True)
    collector = WatchCollector()
    server, port = serve(collector, metrics_host, metrics_port)
    err.print(f"triage watch: serving http://{metrics_host}:{port}/metrics; a cycle every {interval_s:g} s "
              f"against {url or 'the local server'} (Ctrl-C stops)", markup=False)
    try:
        watch_forever(opts, collector, interval_s, cycles, lambda line: err.print(line, markup=False))
    finally:
        server.shutdown()  # type: ignore[attr-defined]
    return 0
