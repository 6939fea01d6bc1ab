"""The launcher and `triage serve` flags: API keys, start-up failures, clean stops."""
from __future__ import annotations

import logging
import os
import socket

import httpx
import openai
import pytest
from typer.testing import CliRunner

from triage.cli import app
from triage.core.errors import EngineError
from triage.reference_engine.serve import launcher
from triage.reference_engine.serve.launcher import start_reference_server

SECRET = "sk-test-0123456789abcdef"


@pytest.mark.slow
def test_api_key_guards_v1_but_not_health_or_metrics():
    with start_reference_server("tiny", api_key=SECRET, keep_log=True) as server:
        with httpx.Client(base_url=server.url, timeout=30.0, trust_env=False) as http:
            body = {"model": "tiny", "prompt": "hi", "max_tokens": 2}
            r = http.post("/v1/completions", json=body)
            assert r.status_code == 401
            assert r.json()["error"]["type"] == "authentication_error"
            wrong = http.post("/v1/completions", json=body, headers={"Authorization": "Bearer wrong"})
            assert wrong.status_code == 401
            assert http.get("/v1/models").status_code == 401
            ok = http.post("/v1/completions", json=body, headers={"Authorization": f"Bearer {SECRET}"})
            assert ok.status_code == 200, ok.text
            assert http.get("/health").status_code == 200
            assert http.get("/metrics").status_code == 200
        bad = openai.OpenAI(base_url=f"{server.url}/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.completions.create(model="tiny", prompt="x", max_tokens=1)
        good = openai.OpenAI(base_url=f"{server.url}/v1", api_key=SECRET, max_retries=0)
        assert good.completions.create(model="tiny", prompt="x", max_tokens=1).usage.completion_tokens == 1
        cmdline = open(f"/proc/{server.pid}/cmdline", "rb").read()
        log_text = server.log_path.read_text()
        assert "API key required: yes" in log_text
    assert SECRET.encode() not in cmdline, "the key travels by environment, never argv"
    assert SECRET not in log_text
    assert not server.alive()
    assert server.process.returncode == 0, "SIGTERM is a clean shutdown"
    assert server.stop() == 0   # a second stop is a no-op
    os.unlink(server.log_path)


@pytest.mark.slow
def test_startup_failure_raises_engine_error_with_the_log_tail():
    with pytest.raises(EngineError) as info:
        start_reference_server("no-such-model-anywhere", startup_timeout_s=120)
    message = str(info.value)
    assert "exited with code 2" in message
    assert "no-such-model-anywhere" in message


def test_shared_server_runs_in_its_own_process_group(reference_server):
    assert reference_server.alive() and reference_server.url.startswith("http://127.0.0.1:")
    assert os.getpgid(reference_server.pid) == reference_server.pid


def test_serve_refuses_a_busy_port_with_exit_2():
    handlers_before = list(logging.getLogger("triage").handlers)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 2
    assert "cannot listen on" in result.output
    assert logging.getLogger("triage").handlers == handlers_before, "a refused start leaves logging alone"


@pytest.mark.parametrize("flag, value", [("--scheduler", "fifo"), ("--attention", "magic"),
                                         ("--dtype", "int3"), ("--log-level", "loud"), ("--port", "70000"),
                                         ("--kv-cache-dtype", "int2")])
def test_serve_rejects_bad_flags_with_exit_2(flag, value):
    result = CliRunner().invoke(app, ["serve", flag, value])
    assert result.exit_code == 2
    assert value in result.output


def test_interrupted_startup_stops_the_child_and_propagates(monkeypatch):
    started = []

    def interrupted(handle, timeout_s):
        started.append(handle)
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher, "_wait_healthy", interrupted)
    with pytest.raises(KeyboardInterrupt):          # not turned into a misleading "did not answer" error
        start_reference_server("tiny")
    (handle,) = started
    assert not handle.alive() and not handle.log_path.exists()
