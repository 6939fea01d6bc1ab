"""`triage coldstart` while it waits and what it prints: progress on stderr during a slow start (a real server
process that logs the reference engine's phase lines and opens its port only when the test says so), the text
report within 80 and 100 columns, and `--format json|markdown` through the formats registry."""
from __future__ import annotations

import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from rich.console import Console

from triage.engines import get

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

# Logs the reference engine's start-up lines; holds its weight load open until GATE exists (when given), then
# serves /health, /v1/models and one streamed completion on loopback.
SERVER = textwrap.dedent("""
    import json, os, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    port, gate, note = int(sys.argv[1]), sys.argv[2], sys.argv[3]

    def log(msg):
        print(f"INFO 11-27 10:00:00 [engine.py:98] {msg}", flush=True)

    log("Loading weights (load format auto)")
    while gate and not os.path.exists(gate):
        time.sleep(0.02)
    log("Loading weights took 0.250 seconds, 1073741824 bytes")
    log("KV cache allocation took 0.050 seconds, 2097152 bytes")
    log(note)
    log(f"Starting triage-reference API server on http://127.0.0.1:{port}")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def _send(self, body, kind="application/json"):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body.encode())

        def do_GET(self):
            self._send(json.dumps({"data": [{"id": "tiny"}]}) if self.path == "/v1/models" else "{}")

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", "0")))
            chunk = json.dumps({"choices": [{"text": " hi", "index": 0}]})
            self._send(f"data: {chunk}\\n\\ndata: [DONE]\\n\\n", "text/event-stream")

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log("Started server process")
    server.serve_forever()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_argv(tmp_path: Path, port: int, gate: str = "", note: str = "ready") -> list[str]:
    script = tmp_path / "tiny_server.py"
    script.write_text(SERVER)
    return [PY, str(script), str(port), gate, note]


def _coldstart(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "triage", "coldstart", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def _sigint_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class _Stderr:
    """The command's stderr line by line as it comes, so a test waits on a line, not on a clock."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self._q.put(line)
        self._q.put(None)

    def wait_for(self, text: str, within_s: float = 30.0) -> str:
        while True:
            line = self._q.get(timeout=within_s)
            if line is None:
                raise AssertionError(f"stderr ended before {text!r}: {''.join(self.lines)}")
            self.lines.append(line)
            if text in line:
                return line

    def rest(self) -> str:
        while (line := self._q.get(timeout=30)) is not None:
            self.lines.append(line)
        return "".join(self.lines)


def _launch(tmp_path: Path, *args: str, gate: Path) -> subprocess.Popen:
    port = _free_port()
    return subprocess.Popen([PY, "-m", "triage", "coldstart", "--engine", "reference", "--url",
                             f"http://127.0.0.1:{port}", "--timeout", "60", *args, "--",
                             *_server_argv(tmp_path, port, str(gate))],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_at_a_terminal)


def test_a_slow_start_shows_its_launch_and_phases_on_stderr_while_it_waits(tmp_path):
    gate = tmp_path / "open"
    proc = _launch(tmp_path, gate=gate)
    err = _Stderr(proc)
    started = err.wait_for("started pid")
    assert "waiting up to 60 s for http://127.0.0.1:" in started and started.rstrip().endswith("/health")
    assert "weight load started at" in err.wait_for("weight load started at")
    assert proc.poll() is None                     # still waiting: the port is not open yet
    gate.touch()
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 0, out + err.rest()
    rest = err.rest()
    assert "weight load took" in rest and "ready after" in rest
    assert "\r" not in rest                        # plain lines: stderr is not a terminal here
    assert "start 1 (cold): ready" in out and "started pid" not in out and "weight load started" not in out


def test_the_heartbeat_names_the_last_phase_every_ten_seconds():
    from triage.coldstart.progress import Progress

    buf = io.StringIO()
    progress = Progress(Console(file=buf, force_terminal=False, width=200), get("reference"), 600.0)
    progress.started(4242, "http://127.0.0.1:8000", "/health")
    lines = [(0.4, "INFO 11-27 10:00:00 [engine.py:98] Loading weights (load format auto)")]
    progress.tick(1.0, lines)
    assert buf.getvalue() == ""                    # under 2 s: nothing yet
    for t in (2.0, 5.0, 10.0, 15.0, 20.5):
        progress.tick(t, lines)
    said = buf.getvalue().splitlines()
    assert said == ["coldstart: started pid 4242, waiting up to 600 s for http://127.0.0.1:8000/health",
                    "coldstart: weight load started at 0.4 s",
                    "coldstart: still waiting: 10 s, last phase: weight load (under way)",
                    "coldstart: still waiting: 20 s, last phase: weight load (under way)"]


def test_ctrl_c_while_waiting_still_reports_the_phases_seen(tmp_path):
    proc = _launch(tmp_path, "--format", "json", gate=tmp_path / "never")
    err = _Stderr(proc)
    err.wait_for("weight load started at")
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    assert proc.wait(timeout=30) == 130, out + err.rest()
    report = json.loads(out)
    assert report["interrupted"] and report["runs"][0]["outcome"] == "interrupted"
    assert [p["phase"] for p in report["runs"][0]["startup"]["phases"]][-1] == "weight_load"
    assert "Traceback" not in err.rest()


@pytest.mark.parametrize("columns", [80, 100])
def test_the_text_report_fits_the_terminal(tmp_path, columns):
    note = "a long engine line " + "x" * 150
    done = _coldstart("--engine", "reference", "--", *_server_argv(tmp_path, _free_port(), note=note),
                      env={"COLUMNS": str(columns)})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if "█" in line]
    assert rows and "1.0 GiB" in done.stdout and max(len(line) for line in rows) <= columns, done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= columns, done.stdout


@pytest.mark.parametrize("columns", [80, 100])
def test_a_never_ready_start_with_long_lines_fits_too(columns):
    from triage.coldstart.view import render_text

    phases = [{"phase": name, "label": label, "seconds": s, "logged": True, "bytes": 2**30,
               "bandwidth_bytes_per_s": 2**30 / s if s else None, "started_at_s": 1.0, "ended_at_s": None,
               "completed": s is not None, "line": None}
              for name, label, s in (("weight_load", "weight load", 20.0), ("cuda_graph", "CUDA-graph capture", 9.0),
                                     ("kv_alloc", "memory profile / KV allocation", None))]
    run = {"run": 1, "outcome": "timeout", "ready_s": None, "ttft_s": None, "first_token_s": None,
           "exit_code": None, "error": None, "startup": {"phases": phases, "phases_total_s": 29.0},
           "last_lines": ["INFO " + "word " * 60, "y" * 250]}
    report = {"argv": ["vllm", "serve", "/models/" + "m" * 120], "engine": "vllm", "url": None,
              "runs": [run], "interrupted": True, "warm_vs_first": None}
    text = render_text(report, columns)
    assert max(len(line) for line in text.splitlines()) <= columns, text
    assert "memory profile / KV allocation" in text and "(reached, not finished)" in text


def test_format_json_prints_the_report_on_stdout(tmp_path):
    done = _coldstart("--engine", "reference", "--format", "json", "--json", str(tmp_path / "cold.json"), "--",
                      *_server_argv(tmp_path, _free_port()))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "coldstart" and report["runs"][0]["outcome"] == "ready"
    assert report == json.loads((tmp_path / "cold.json").read_text())


def test_format_markdown_prints_a_phase_table(tmp_path):
    done = _coldstart("--engine", "reference", "--format", "markdown", "--",
                      *_server_argv(tmp_path, _free_port()))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("## triage coldstart: `")
    assert "### start 1 (cold): ready" in done.stdout
    assert "| phase | at s | seconds | bytes | MB/s | note |" in done.stdout
    assert "| weight load |" in done.stdout and "1.0 GiB" in done.stdout
    assert "started pid" not in done.stderr        # a start under 2 s says nothing while it waits


def test_format_offers_the_registrys_choices():
    done = _coldstart("--format", "junit", "--", "true")
    assert done.returncode == 2 and "'junit' is not one of text, json, markdown" in done.stderr
