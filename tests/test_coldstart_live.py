"""`triage coldstart` against real servers on this box: the reference engine (`triage serve`), a server that never
becomes ready, Ctrl-C, and a real llama-server where one is built."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _coldstart(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "triage", "coldstart", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, **kw)


def _sigint_as_at_a_terminal() -> None:
    """SIGINT back to its default in the child: a background job inherits it ignored (tests/conftest.py)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stuck_server(tmp_path: Path) -> tuple[Path, Path]:
    """A 'server' that logs the reference engine's first phase, starts a helper process, and never serves."""
    script, pidfile = tmp_path / "stuck.py", tmp_path / "helper.pid"
    script.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pidfile)!r}, "w").write(str(helper.pid))
        print("INFO 11-27 10:00:00 [engine.py:98] Loading weights (load format auto)", flush=True)
        for i in range(1000):
            print(f"INFO 11-27 10:00:01 [engine.py:99] still loading shard {{i}}", flush=True)
            time.sleep(0.2)
    """))
    return script, pidfile


@pytest.mark.slow
def test_coldstart_of_triage_serve_adds_up_and_shows_warm_starts_apart(tmp_path):
    port = _free_port()
    out = tmp_path / "cold.json"
    done = _coldstart("--repeat", "2", "--json", str(out), "--html", str(tmp_path / "cold.html"), "--",
                      PY, "-m", "triage", "serve", "--port", str(port))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["engine"] == "reference" and len(report["runs"]) == 2
    for run in report["runs"]:
        assert run["outcome"] == "ready" and run["ttft_s"] is not None and run["ttft_s"] < 5
        phases = {p["phase"]: p for p in run["startup"]["phases"]}
        assert list(phases) == ["process", "weight_load", "kv_alloc", "warmup", "api_server"]
        assert phases["weight_load"]["logged"] and phases["weight_load"]["seconds"] > 0
        assert phases["weight_load"]["bytes"] == 0 and phases["weight_load"]["bandwidth_bytes_per_s"] is None
        assert phases["kv_alloc"]["bytes"] > 0
        assert abs(run["startup"]["phases_total_s"] - run["ready_s"]) <= 0.10 * run["ready_s"]
    assert report["warm_vs_first"]["first_ready_s"] == report["runs"][0]["ready_s"]
    assert "weight_load" in report["warm_vs_first"]["phases"]
    assert "start 2 (warm): ready" in done.stdout and "phases add up to" in done.stdout
    assert "<div" in (tmp_path / "cold.html").read_text()
    with pytest.raises(OSError):                          # nothing is left listening
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


@pytest.mark.slow
def test_a_server_that_never_becomes_ready_reports_the_phase_reached_and_leaves_nothing(tmp_path):
    script, pidfile = _stuck_server(tmp_path)
    done = _coldstart("--engine", "reference", "--timeout", "3", "--url", f"http://127.0.0.1:{_free_port()}",
                      "--", PY, str(script), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "start 1 (cold): timeout" in done.stdout
    assert "weight load" in done.stdout and "(reached, not finished)" in done.stdout
    assert "last log lines:" in done.stdout and "still loading shard" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert _gone(int(pidfile.read_text()))


@pytest.mark.slow
def test_ctrl_c_stops_the_server_group_and_reports_what_was_reached(tmp_path):
    script, pidfile = _stuck_server(tmp_path)
    proc = subprocess.Popen([PY, "-m", "triage", "coldstart", "--engine", "reference", "--url",
                             f"http://127.0.0.1:{_free_port()}", "--", PY, str(script)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_at_a_terminal)
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)                                        # a few log lines in
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, out + err
    assert "start 1 (cold): interrupted" in out and "interrupted (Ctrl-C)" in out
    assert "weight load" in out and "still loading shard" in out
    assert "Traceback" not in out + err
    assert _gone(int(pidfile.read_text()))


def test_no_command_is_a_one_line_usage_error():
    done = _coldstart(timeout=60)
    assert done.returncode == 2
    assert "give the launch command after `--`" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_real_llama_server_start_is_broken_into_its_phases(tmp_path):
    binary = os.environ.get("TRIAGE_LLAMA_SERVER") or shutil.which("llama-server")
    if not binary:
        pytest.skip("llama-server is not on PATH or TRIAGE_LLAMA_SERVER (see docs/ENGINES.md to build it)")
    pytest.importorskip("gguf", reason="writing the test's GGUF needs the `gguf` package")
    from tests.live_llamacpp import write_tiny_gguf

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    out = tmp_path / "cold.json"
    done = _coldstart("--json", str(out), "--", binary, "-m", str(model), "-a", "tiny-llama", "--host",
                      "127.0.0.1", "--port", str(_free_port()), "-c", "512", "-t", "1", "--parallel", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(out.read_text())["runs"][0]
    phases = [p["phase"] for p in run["startup"]["phases"]]
    assert phases == ["process", "weight_load", "kv_alloc", "api_server"]
    assert run["ttft_s"] is not None
    assert abs(run["startup"]["phases_total_s"] - run["ready_s"]) <= 0.10 * run["ready_s"]


@pytest.mark.slow
def test_a_compiled_serve_shows_its_compile_phase_and_a_warm_cache_shortens_it_with_eng008_quiet(tmp_path):
    """`triage serve --compile on`, started twice on one Inductor cache: the compile phase is timed from the
    engine's own log lines, the second start's is shorter, and the saved log judged by diagnose does not fire
    ENG008 (compile repeated on every start)."""
    out, log = tmp_path / "cold.json", tmp_path / "server.log"
    done = _coldstart("--repeat", "2", "--json", str(out), "--log", str(log), "--", PY, "-m", "triage", "serve",
                      "--port", str(_free_port()), "--max-num-seqs", "1", "--compile", "on",
                      "--compile-cache-dir", str(tmp_path / "inductor"))
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads(out.read_text())["runs"]
    compile_s = []
    for run in runs:
        phases = {p["phase"]: p for p in run["startup"]["phases"]}
        assert list(phases) == ["process", "weight_load", "kv_alloc", "warmup", "compile", "api_server"]
        assert phases["compile"]["logged"] and phases["compile"]["completed"]
        compile_s.append(phases["compile"]["seconds"])
    assert compile_s[1] < compile_s[0], compile_s
    assert "torch.compile" in done.stdout and f"server log: {log}" in done.stderr
    judged = subprocess.run([PY, "-m", "triage", "diagnose", "--log", str(log), "--format", "json"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    report = json.loads(judged.stdout)
    startup = next(p for p in report["probes"] if p["name"] == "logs")["data"]["startup"]
    assert startup["num_starts"] == 2 and startup["compile_s_each_start"] == pytest.approx(compile_s, abs=0.01)
    assert "ENG008" not in {s["code"] for s in report["skipped_rules"]}       # it judged the two starts
    assert "ENG008" not in {f["rule_id"] for f in report["findings"]}
