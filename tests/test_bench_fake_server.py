"""triage bench against a real HTTP server that misbehaves on purpose (tests/fake_servers.py): every error
kind is counted, nothing crashes, the reports validate, a SIGKILL keeps the JSONL, Ctrl-C still reports."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fake_servers import FakeOpenAIServer, free_port_refusing
from triage.bench.level_runner import BenchRunner
from triage.bench.records import RecordSink, read_records
from triage.bench.run_config import BenchConfig, Endpoint, LevelSpec
from triage.cli import app
from triage.core.report_io import read_report

REPO = Path(__file__).resolve().parent.parent
MISBEHAVIOURS = ["http_500", "http_429", "drop", "reset", "garbage", "bad_json", "error_event", "stall",
                 "done_early"]
# A server that sends [DONE] with no finish_reason and closes is "ended_early", told apart from a dropped
# connection ("disconnected").
KINDS = {"http_500": 1, "http_429": 1, "disconnected": 1, "connection_reset": 1, "malformed_sse": 1,
         "malformed_json": 1, "server_error_event": 1, "timeout": 1, "ended_early": 1}


def invoke(args: list[str], monkeypatch: pytest.MonkeyPatch | None = None):
    """`triage bench ARGS` in-process. With `monkeypatch`, sys.argv is the command line too (the report's
    `command` is read from it), so the tests of redaction see what a real run writes."""
    if monkeypatch is not None:
        monkeypatch.setattr(sys, "argv", ["triage", "--no-color", "bench", *args])
    return CliRunner().invoke(app, ["--no-color", "bench", *args], env={"COLUMNS": "200"})


@pytest.mark.slow
def test_every_error_kind_is_counted_and_the_report_is_written(tmp_path, report_validator):
    with FakeOpenAIServer(schedule=list(MISBEHAVIOURS), stall_s=5.0) as srv:
        result = invoke(["--url", srv.url, "--concurrency", "2", "--num-requests", "13", "--warmup", "0",
                         "--input-len", "16", "--output-len", "8", "--timeout", "0.5", "--slo", "ttft_ms=10000",
                         "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = report_validator(json.loads((tmp_path / "bench.json").read_text()))
    (lv,) = data["bench"]["levels"]
    assert lv["requests"] == {"completed": 4, "failed": 9, "errors_by_kind": KINDS, "completed_no_text": 0}
    assert lv["slo_attainment_pct"] == pytest.approx(100 * 4 / 13)  # the 9 failures are misses
    records = read_records(tmp_path / "requests.jsonl")
    assert sorted(r.error_kind for r in records if not r.ok) == sorted(KINDS)
    assert (tmp_path / "levels.csv").read_text().count("\n") == 2
    assert (tmp_path / "report.html").read_text().count("data:image/png;base64,") >= 3


def test_a_level_where_every_request_fails_still_reports_and_exits_2(tmp_path, report_validator):
    """Nothing measured at a level is a bench that could not do its job: exit 2 with the cause in one line, and
    the report still written (docs/BENCH.md)."""
    with FakeOpenAIServer(default="http_500") as srv:
        result = invoke(["--url", srv.url, "--concurrency", "1,2", "--num-requests", "3", "--warmup", "1",
                         "--input-len", "8", "--output-len", "4", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 2, result.output
    assert "every request failed at c=1, c=2 (http_500: 3)" in result.output
    data = report_validator(json.loads((tmp_path / "r.json").read_text()))
    for lv in data["bench"]["levels"]:
        assert lv["requests"] == {"completed": 0, "failed": 3, "errors_by_kind": {"http_500": 3}, "completed_no_text": 0}
        assert lv["ttft_ms"]["p50"] is None
    assert any("warmup requests failed" in n for n in data["bench"]["config"]["notes"])


def test_a_level_with_some_failures_keeps_exit_0(tmp_path):
    with FakeOpenAIServer(schedule=["http_500"]) as srv:
        result = invoke(["--url", srv.url, "--concurrency", "1", "--num-requests", "4", "--warmup", "0",
                         "--input-len", "8", "--output-len", "4", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert "every request failed" not in result.output


def test_a_url_ending_in_v1_is_told_to_drop_it():
    with FakeOpenAIServer() as srv:
        result = invoke(["--url", srv.url + "/v1", "--concurrency", "1", "--num-requests", "2", "--warmup", "0"])
    assert result.exit_code == 2
    assert "/v1/v1/models answered 404" in result.output
    assert f"drop it (--url {srv.url})" in result.output, result.output


def test_an_unreachable_server_exits_2_with_a_clear_message():
    result = invoke(["--url", free_port_refusing(), "--concurrency", "1"])
    assert result.exit_code == 2
    assert "cannot reach the server" in result.output


def test_a_server_that_wants_a_key_exits_2_without_one_and_works_with_it(tmp_path):
    args = ["--concurrency", "1", "--num-requests", "2", "--warmup", "0", "--input-len", "8", "--output-len", "4"]
    with FakeOpenAIServer(require_api_key="sk-right-key-123") as srv:
        refused = invoke(["--url", srv.url, *args])
        ok = invoke(["--url", srv.url, *args, "--api-key", "sk-right-key-123", "--json", str(tmp_path / "r.json")])
    assert refused.exit_code == 2 and "--api-key" in refused.output and "Traceback" not in refused.output
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "r.json").read_text())["bench"]["levels"][0]["requests"]["completed"] == 2


def test_dataset_with_synthetic_length_flags_is_refused(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hello there"}\n')
    result = invoke(["--url", "http://127.0.0.1:9", "--dataset", str(data), "--input-len", "64", "--len-dist",
                     "uniform"])
    assert result.exit_code == 2 and "--input-len, --len-dist would be ignored" in result.output


def test_an_unwritable_output_fails_before_the_run(tmp_path):
    with FakeOpenAIServer() as srv:
        result = invoke(["--url", srv.url, "--concurrency", "1", "--num-requests", "2", "--json", str(tmp_path)])
        assert srv.state.num_requests == 0  # nothing was sent: the error came first
    assert result.exit_code == 2 and "--json" in result.output and "is a directory" in result.output


def test_bad_flags_exit_2():
    assert invoke(["--url", "http://127.0.0.1:9", "--concurrency", "0"]).exit_code == 2
    unused = invoke(["--url", "http://127.0.0.1:9", "--concurrency", "4", "--burstiness", "0.5"])
    assert unused.exit_code == 2 and "no --rate level" in unused.output and "--burstiness" in unused.output
    twice = invoke(["--url", "http://127.0.0.1:9", "--concurrency", "4,4"])
    assert twice.exit_code == 2 and "--repeat" in twice.output
    assert invoke(["--url", "http://127.0.0.1:9", "--slo", "latency=5"]).exit_code == 2
    assert invoke(["--url", "http://127.0.0.1:9", "--endpoint", "grpc"]).exit_code == 2
    result = invoke(["--url", "localhost:8000"])
    assert result.exit_code == 2 and "expected http(s)://" in result.output


def test_secrets_never_reach_any_output(tmp_path, monkeypatch):
    with FakeOpenAIServer() as srv:
        result = invoke(["--url", srv.url, "--concurrency", "1", "--num-requests", "2", "--warmup", "0",
                         "--input-len", "8", "--output-len", "4", "--api-key", "sk-topsecret123456",
                         "--header", "X-Api-Key: hunter2hunter2", "--output-dir", str(tmp_path)], monkeypatch)
    assert result.exit_code == 0, result.output
    for path in tmp_path.iterdir():
        text = path.read_text()
        assert "topsecret" not in text and "hunter2" not in text, path.name
    assert "topsecret" not in result.output
    # The text output says where every file went.
    for what, name in (("report", "bench.json"), ("per-request JSONL", "requests.jsonl"),
                       ("levels CSV", "levels.csv"), ("HTML report", "report.html")):
        assert f"{what} written to {tmp_path / name}" in result.stdout, result.stdout


def test_url_credentials_are_sent_as_basic_auth_and_never_written(tmp_path, monkeypatch):
    with FakeOpenAIServer() as srv:
        url = srv.url.replace("http://", "http://bob:pw-hunter3@")
        result = invoke(["--url", url, "--concurrency", "1", "--num-requests", "2", "--warmup", "0",
                         "--input-len", "8", "--output-len", "4", "--header", "X-Auth: s3cr3t-value",
                         "--header=Cookie: session=abcdef", "--header", "X-Team: infra",
                         "--output-dir", str(tmp_path)], monkeypatch)
        sent = list(srv.state.authorizations)
    assert result.exit_code == 0, result.output
    assert sent and set(sent) == {"Basic " + base64.b64encode(b"bob:pw-hunter3").decode()}
    for path in tmp_path.iterdir():
        text = path.read_text()
        for secret in ("pw-hunter3", "s3cr3t", "abcdef"):
            assert secret not in text, (path.name, secret)
    data = json.loads((tmp_path / "bench.json").read_text())
    assert "X-Team: infra" in data["command"] and data["bench"]["config"]["headers"]["X-Team"] == "infra"
    assert "pw-hunter3" not in result.output


def test_format_json_keeps_stdout_pure_json_and_names_the_files_on_stderr(tmp_path):
    with FakeOpenAIServer() as srv:
        result = invoke(["--url", srv.url, "--concurrency", "1", "--num-requests", "2", "--warmup", "0",
                         "--input-len", "8", "--output-len", "4", "--format", "json",
                         "--jsonl", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "bench"
    assert f"per-request JSONL written to {tmp_path / 'r.jsonl'}" in result.stderr


def run_runner(cfg: BenchConfig, tmp_path: Path):
    with RecordSink(tmp_path / "r.jsonl") as sink:
        runner = BenchRunner(cfg, sink=sink)
        return asyncio.run(runner.run())


def test_chat_reasoning_multi_token_chunks_and_missing_usage(tmp_path):
    with FakeOpenAIServer(schedule=["reasoning"] * 3 + ["multi"] * 3 + ["ok_no_usage"] * 3) as srv:
        cfg = BenchConfig(url=srv.url, endpoint=Endpoint.CHAT, levels=(LevelSpec(concurrency=1),) * 3,
                          num_requests=3, warmup=0, input_len=8, output_len=6)
        section = run_runner(cfg, tmp_path)
    reasoning, multi, no_usage = section.levels
    assert reasoning.output_tokens_mean == 6.0 and any("reasoning chunks" in n for n in reasoning.notes)
    assert multi.output_tokens_mean == 6.0 and any("split evenly" in n for n in multi.notes)
    assert no_usage.output_tokens_mean == 6.0 and any("counted from content chunks" in n for n in no_usage.notes)
    assert no_usage.input_tokens_mean is None  # unknown without usage, not 0


@pytest.mark.parametrize("rejected, continuous, ignore_eos", [
    ("continuous_usage_stats", False, True), ("ignore_eos", False, False)])
def test_optional_request_fields_a_server_refuses_are_dropped_and_noted(tmp_path, rejected, continuous, ignore_eos):
    with FakeOpenAIServer(reject_fields=(rejected,)) as srv:
        cfg = BenchConfig(url=srv.url, levels=(LevelSpec(concurrency=1),), num_requests=2, warmup=0, input_len=8,
                          output_len=4)
        section = run_runner(cfg, tmp_path)
    (lv,) = section.levels
    assert lv.requests.completed == 2 and lv.requests.failed == 0
    assert section.config.continuous_usage_sent is continuous
    assert section.config.ignore_eos_sent is ignore_eos
    assert any("continuous_usage_stats, so it is not sent" in n for n in section.config.notes)


def test_open_loop_rate_level_and_repeats(tmp_path):
    with FakeOpenAIServer() as srv:
        cfg = BenchConfig(url=srv.url, levels=(LevelSpec(request_rate=40.0),), num_requests=10, warmup=0,
                          input_len=8, output_len=4, repeat=2, seed=7)
        section = run_runner(cfg, tmp_path)
    (lv,) = section.levels
    assert lv.request_rate == 40.0 and lv.concurrency is None
    assert lv.requests.completed == 20
    assert len(lv.repeats) == 2 and all(r["output_tokens_per_s"] > 0 for r in lv.repeats)
    assert any("achieved request rate" in n for n in lv.notes)
    assert len(lv.samples["ttft_ms"]) == 20
    assert section.config.repeat == 2 and section.config.seed == 7


def test_duration_mode_stops_issuing_at_the_deadline(tmp_path):
    with FakeOpenAIServer(token_delay_s=0.01) as srv:
        cfg = BenchConfig(url=srv.url, levels=(LevelSpec(concurrency=2), LevelSpec(request_rate=20.0)),
                          duration_s=0.5, warmup=0, input_len=8, output_len=4)
        section = run_runner(cfg, tmp_path)
    closed, rate = section.levels
    # each request takes ~40 ms: two workers fit ~25 in 0.5 s; the last ones finish after the deadline
    assert 5 <= closed.requests.completed <= 40
    assert closed.duration_s < 1.5
    sends = [r.t0_s for r in read_records(tmp_path / "r.jsonl") if r.level == "rate=20/s"]
    assert max(sends) - min(sends) < 0.5  # no arrival scheduled past the deadline
    assert rate.requests.completed == len(sends)


def _sigint_as_at_a_terminal() -> None:
    """In the child, before exec: SIGINT back to its default disposition. A job started in the background by a
    non-interactive shell (as CI does) inherits SIGINT *ignored*; Python then installs no KeyboardInterrupt
    handler, and the Ctrl-C this test sends would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _bench_process(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "triage", "bench", "--url", url, "--warmup", "0", "--input-len", "8",
         "--output-len", "4", "--jsonl", str(tmp_path / "r.jsonl"), "--json", str(tmp_path / "r.json"), *extra],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_sigint_as_at_a_terminal)


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the bench process")
        time.sleep(0.02)


@pytest.mark.slow
def test_sigkill_keeps_every_completed_request_in_the_jsonl(tmp_path):
    with FakeOpenAIServer(schedule=["ok"] * 5, default="hang") as srv:
        proc = _bench_process(srv.url, tmp_path, "--concurrency", "1", "--num-requests", "50")
        try:
            # With one request in flight, the 6th request arrives only after the 5th was recorded.
            _wait_for(lambda: len(srv.state.seen) >= 6 or proc.poll() is not None)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    records = read_records(tmp_path / "r.jsonl")
    assert [r.index for r in records] == [0, 1, 2, 3, 4]
    assert all(r.ok and r.output_tokens == 4 for r in records)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_ctrl_c_writes_the_finished_levels_and_exits_130(tmp_path, report_validator):
    with FakeOpenAIServer(schedule=["ok"] * 3, default="hang") as srv:
        proc = _bench_process(srv.url, tmp_path, "--concurrency", "1,2", "--num-requests", "3")
        try:
            _wait_for(lambda: len(srv.state.seen) >= 5 or proc.poll() is not None)  # level c=2 hanging
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    data = report_validator(read_report(tmp_path / "r.json"))
    assert [lv["concurrency"] for lv in data["bench"]["levels"]] == [1]
    assert data["bench"]["config"]["interrupted"] is True
    assert data["bench"]["levels"][0]["requests"]["completed"] == 3


def test_an_error_message_never_shows_the_password_in_the_url():
    url = free_port_refusing().replace("://", "://user:hunter2secret@")
    result = invoke(["--url", url, "--concurrency", "1"])
    assert result.exit_code == 2
    assert "cannot reach the server" in result.output
    assert "hunter2secret" not in result.output


def test_the_api_key_comes_from_openai_api_key_in_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-123456")
    with FakeOpenAIServer(require_api_key="sk-env-key-123456") as srv:
        result = invoke(["--url", srv.url, "--concurrency", "1", "--num-requests", "2", "--warmup", "0",
                         "--input-len", "8", "--output-len", "4", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["bench"]["levels"][0]["requests"]["completed"] == 2
