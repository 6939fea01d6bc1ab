"""Start a server, read its log as it streams, poll its health route, time its first token; stop it, leaving no
process behind (its whole process group is signalled). Phases come from triage/engines/startup_log.py."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

import httpx
from rich.console import Console

from triage.coldstart.progress import Progress
from triage.core.errors import UsageError
from triage.core.redact import redact_argv, redact_text
from triage.engines import get, launched_by, names
from triage.engines.argv import flag_value
from triage.engines.base import Engine
from triage.engines.startup_log import parse_startup

LAST_LINES = 15
_URL_IN_LOG = re.compile(r"https?://(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1?\]):(\d+)")


@dataclass
class Run:
    run: int
    outcome: str = "starting"          # ready | timeout | exited | interrupted
    ready_s: float | None = None       # launch -> the health route answers 200
    ttft_s: float | None = None        # one streamed request, sent once ready -> its first token
    first_token_s: float | None = None  # launch -> first token
    exit_code: int | None = None
    startup: dict = field(default_factory=dict)
    last_lines: list[str] = field(default_factory=list)
    error: str | None = None


def engine_of(argv: Sequence[str]) -> Engine | None:
    """The engine a launch command starts, from each engine's launch forms."""
    return launched_by(argv)


def base_url(argv: Sequence[str], url: str | None) -> str | None:
    """--url, else the --host/--port of the command (a wildcard host is reached on loopback)."""
    if url:
        return url.rstrip("/")
    port = flag_value(argv, ("--port", "-p"))
    if port is None or port == "0":
        return None
    host = flag_value(argv, ("--host", "--hostname")) or "127.0.0.1"
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]") else host
    return f"http://{host}:{port}"


class _Server:
    """The launched process in its own process group, and its log lines with their arrival times."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None):
        self.t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        except OSError as e:
            raise UsageError(f"cannot start {argv[0]!r}: {e.strerror or e}") from None
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines.append((time.monotonic() - self.t0, raw.decode(errors="replace").rstrip("\n")))

    def stop(self, timeout_s: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
        self._signal(signal.SIGKILL)       # whatever it left in its group (workers, shards)
        self._reader.join(2)
        return self.proc.returncode

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


def _first_token_s(client: httpx.Client, url: str, timeout_s: float) -> float | None:
    """Seconds from sending one streamed completion to its first token (None if none came)."""
    model = "default"
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError):
        model = client.get(url + "/v1/models", timeout=5).json()["data"][0]["id"]
    body = {"model": model, "prompt": "Hello", "max_tokens": 4, "stream": True, "temperature": 0}
    sent = time.monotonic()
    with client.stream("POST", url + "/v1/completions", json=body, timeout=timeout_s) as resp:
        if resp.status_code != 200:
            return None
        for line in resp.iter_lines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                with contextlib.suppress(ValueError):
                    if json.loads(line[5:])["choices"][0].get("text") is not None:
                        return time.monotonic() - sent
    return None


def _wait_ready(server: _Server, client: httpx.Client, run: Run, url: str | None, health: str, deadline: float,
                poll_s: float, progress: Progress) -> float | None:
    """Seconds from the launch to the health route's first 200, or None (`run.outcome` says why)."""
    while True:
        progress.tick(time.monotonic() - server.t0, server.lines)
        if server.proc.poll() is not None:
            run.outcome, run.exit_code = "exited", server.proc.returncode
            return None
        if time.monotonic() > deadline:
            run.outcome = "timeout"
            return None
        target = url or _url_from_log(server.lines)
        if target:
            with contextlib.suppress(httpx.HTTPError):
                if client.get(target + health, timeout=1.0).status_code == 200:
                    return time.monotonic() - server.t0
        time.sleep(poll_s if time.monotonic() - server.t0 > 2 else min(poll_s, 0.02))


def start_once(argv: Sequence[str], n: int, url: str | None, timeout_s: float, engine: Engine | None,
               poll_s: float = 0.1, progress: Progress | None = None, log_out: TextIO | None = None) -> Run:
    """One start: launch, wait for the health route, time the first token, stop. Ctrl-C stops the server and
    re-raises with the run (phases reached, last lines) attached as `exc.coldstart_run`. `progress` hears of the
    launch, the phases as the log shows them and the wait (triage/coldstart/progress.py). `log_out` receives the
    server's whole log, redacted."""
    run = Run(n)
    progress = progress or Progress(None, engine, timeout_s)
    server = _Server(argv)
    health = engine.identity.health_path if engine is not None else "/health"
    progress.started(server.proc.pid, url, health)
    ready_at: float | None = None
    try:
        with httpx.Client(trust_env=False) as client:
            deadline = server.t0 + timeout_s
            ready_at = _wait_ready(server, client, run, url, health, deadline, poll_s, progress)
            if ready_at is not None:
                progress.ready(ready_at)
                run.outcome, run.ready_s = "ready", round(ready_at, 3)
                target = url or _url_from_log(server.lines)
                try:
                    ttft = _first_token_s(client, target, max(5.0, deadline - time.monotonic()))
                except httpx.HTTPError as e:
                    ttft, run.error = None, f"the first request failed: {e}"
                if ttft is not None:
                    run.ttft_s = round(ttft, 3)
                    run.first_token_s = round(ready_at + ttft, 3)
    except KeyboardInterrupt as e:
        run.outcome = "interrupted"
        e.coldstart_run = run  # type: ignore[attr-defined]   (filled in below, before it propagates)
        raise
    finally:
        progress.close()
        try:
            _finish(run, server, engine, ready_at, log_out)
        finally:
            server.stop()                  # a second Ctrl-C while stopping still leaves no process behind
    return run


def _finish(run: Run, server: _Server, engine: Engine | None, ready_at: float | None,
            log_out: TextIO | None) -> None:
    code = server.stop()
    if run.exit_code is None and run.outcome == "exited":
        run.exit_code = code
    lines = list(server.lines)
    if log_out is not None:
        log_out.writelines(redact_text(text) + "\n" for _, text in lines)
        log_out.flush()
    run.last_lines = [redact_text(text)[:300] for _, text in lines[-LAST_LINES:]]
    if engine is not None:
        cut = [(t, text) for t, text in lines if ready_at is None or t <= ready_at]
        startup = parse_startup(cut, engine, t0=0.0)
        if ready_at is not None:
            _close_api_server(startup, ready_at)
        run.startup = startup.to_dict()
        for phase in run.startup["phases"]:
            phase["line"] = redact_text(phase["line"]) if phase["line"] else None


def _close_api_server(startup, ready_at: float) -> None:
    """The API server phase ends when the health route answers: from its begin line, or the last phase's end."""
    api = startup.phase("api_server")
    ends = [p.ended_at_s for p in startup.phases if p.ended_at_s is not None and p.phase != "api_server"]
    begin = api.started_at_s if api is not None and api.started_at_s is not None else max(ends, default=0.0)
    if api is None:
        from triage.engines.startup_log import Phase
        api = Phase("api_server", "API server up")
        startup.phases.append(api)
    if not api.completed:
        api.started_at_s, api.ended_at_s, api.completed = begin, round(ready_at, 3), True
        api.seconds = round(ready_at - begin, 3)
    elif api.ended_at_s is not None and ready_at > api.ended_at_s and not api.logged:
        # From the client's side the server is up when its health route answers, not at its ready line.
        api.seconds = round((api.seconds or 0.0) + ready_at - api.ended_at_s, 3)
        api.ended_at_s = round(ready_at, 3)
    startup.ready_s = round(ready_at, 3)
    startup.phases_total_s = round(sum(p.seconds for p in startup.phases if p.seconds is not None), 3)


def _url_from_log(lines: list[tuple[float, str]]) -> str | None:
    for _, text in reversed(lines[-200:]):
        if m := _URL_IN_LOG.search(text):
            return f"http://127.0.0.1:{m.group(1)}"
    return None


def coldstart(argv: Sequence[str], repeat: int = 1, url: str | None = None, timeout_s: float = 600.0,
              engine_name: str | None = None, progress_to: Console | None = None,
              log_out: TextIO | None = None) -> dict:
    """K starts of the same command; the report as a dict (runs, the first against the warm ones). Each start
    over 2 s tells `progress_to` (stderr) how it is going; None: silent. `log_out` receives every start's log, one
    after the other, redacted: what `triage diagnose --log` reads."""
    if not argv:
        raise UsageError("give the launch command after `--`: triage coldstart -- vllm serve MODEL")
    if repeat < 1:
        raise UsageError(f"--repeat {repeat}: give 1 or more starts")
    engine = engine_of(argv)
    if engine_name:
        engine = get(engine_name)
        if engine is None:
            raise UsageError(f"--engine {engine_name!r}: not an engine triage knows ({', '.join(names())})")
    target = base_url(argv, url)
    report = {"kind": "coldstart", "argv": redact_argv(list(argv)), "engine": engine.name if engine else None,
              "url": target, "repeat": repeat, "timeout_s": timeout_s, "runs": [], "interrupted": False}
    try:
        for n in range(1, repeat + 1):
            prefix = "coldstart: " if repeat == 1 else f"coldstart, start {n} of {repeat}: "
            run = start_once(argv, n, target, timeout_s, engine,
                             progress=Progress(progress_to, engine, timeout_s, prefix=prefix), log_out=log_out)
            report["runs"].append(run.__dict__)
            if run.outcome != "ready":
                break
    except KeyboardInterrupt as e:
        run = getattr(e, "coldstart_run", None)
        if run is not None:
            report["runs"].append(run.__dict__)
        report["interrupted"] = True
    report["warm_vs_first"] = warm_vs_first(report["runs"])
    return report


def warm_vs_first(runs: list[dict]) -> dict | None:
    """The first start's ready time and phases against the warm starts' median (None with fewer than 2)."""
    done = [r for r in runs if r["outcome"] == "ready"]
    if len(done) < 2:
        return None
    median = statistics.median([r["ready_s"] for r in done[1:]])
    phases: dict[str, dict] = {}
    for p in done[0]["startup"].get("phases", []):
        later = [q["seconds"] for r in done[1:] for q in r["startup"].get("phases", [])
                 if q["phase"] == p["phase"] and q["seconds"] is not None]
        if p["seconds"] is not None and later:
            phases[p["phase"]] = {"first_s": p["seconds"], "warm_median_s": round(statistics.median(later), 3)}
    return {"first_ready_s": done[0]["ready_s"], "warm_ready_median_s": round(median, 3),
            "saved_s": round(done[0]["ready_s"] - median, 3), "phases": phases}
