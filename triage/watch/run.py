"""`triage watch` as one call: the command line's options checked, the /metrics endpoint served, and the
diagnose loop run until --cycles or Ctrl-C."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triage.core.errors import UsageError

if TYPE_CHECKING:
    from triage.diagnose import DiagnoseOptions

DEFAULT_WINDOW_S = 2.0


@dataclass(frozen=True)
class WatchRequest:
    """The command line's options, as given (in --help's order)."""
    url: str | None = None
    interval: str = "30s"
    window_s: float | None = None
    metrics_port: int = 9464
    metrics_host: str = "127.0.0.1"
    log: Path | None = None
    skip: str = "storage"
    disable: str | None = None
    cycles: int | None = None
    print_alert_rules: bool = False


def _checked(req: WatchRequest) -> tuple[float, DiagnoseOptions]:
    """(the interval in seconds, what each cycle's diagnose runs), every option checked."""
    from triage.core.durations import parse_duration_s
    from triage.diagnose import DiagnoseOptions
    from triage.rules import load_rules_config

    interval_s = parse_duration_s(req.interval, "--interval")
    if req.cycles is not None and req.cycles < 1:
        raise UsageError(f"--cycles {req.cycles}: must be at least 1")
    if not 0 <= req.metrics_port <= 65535:
        raise UsageError(f"--metrics-port {req.metrics_port}: not a port (0 to 65535)")
    if req.log is not None and not req.log.is_file():
        raise UsageError(f"--log {req.log}: no such file")
    window_s = req.window_s
    if window_s is None:
        window_s = min(DEFAULT_WINDOW_S, interval_s / 2)  # a default never rejects a valid --interval
    elif not 0 < window_s < interval_s:
        raise UsageError(f"--window-s {window_s:g} must be > 0 and shorter than --interval ({interval_s:g} s)")
    opts = DiagnoseOptions(url=req.url, window_s=window_s, log_path=str(req.log) if req.log else None,
                           skip=tuple(s.strip() for s in (req.skip or "").split(",") if s.strip()),
                           rules_config=load_rules_config(None).with_disabled((req.disable or "").split(",")))
    return interval_s, opts


def run_watch(req: WatchRequest, say: Callable[[str], None]) -> int:
    """Serve /metrics and run the loop (each line of its log to `say`); 0 when it stops."""
    from triage.watch.exporter import WatchCollector, serve
    from triage.watch.loop import watch_forever

    interval_s, opts = _checked(req)
    collector = WatchCollector()
    server, port = serve(collector, req.metrics_host, req.metrics_port)
    say(f"triage watch: serving http://{req.metrics_host}:{port}/metrics; a cycle every {interval_s:g} s "
        f"against {req.url or 'the local server'} (Ctrl-C stops)")
    try:
        watch_forever(opts, collector, interval_s, req.cycles, say)
    finally:
        server.shutdown()  # type: ignore[attr-defined]
    return 0
