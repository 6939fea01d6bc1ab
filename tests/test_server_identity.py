"""One identity per server: `triage bench --url` names a server as `triage diagnose` does (the reference engine
is `reference`, not `vllm` for its vLLM-named metrics), an unidentified OpenAI-compatible server is named by
what it says of itself and gets no engine's flags, and a bench of the server diagnose looks at is not taken
for another server's."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from tests.fake_servers import FakeOpenAIServer
from triage.cli import app

LOAD = ["--concurrency", "1", "--num-requests", "2", "--warmup", "0", "--input-len", "16", "--output-len", "4"]


def cli(*args: str):
    return CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"}).invoke(app, ["--no-color", *args])


def test_bench_and_diagnose_name_the_reference_server_alike(reference_server, tmp_path):
    bench, diag = tmp_path / "bench.json", tmp_path / "diag.json"
    res = cli("bench", "--url", reference_server.url, *LOAD, "--json", str(bench))
    assert res.exit_code == 0, res.output
    target = json.loads(bench.read_text())["target"]
    assert target["engine"] == "reference" and target["engine_version"], target
    res = cli("diagnose", "--url", reference_server.url, "--bench", str(bench), "--window-s", "0",
              "--skip", "storage,kernel_log", "--json", str(diag))
    assert res.exit_code in (0, 1), res.output
    report = json.loads(diag.read_text())
    assert report["target"]["engine"] == "reference"
    assert not any("recorded against another server" in f["message"] for f in report["findings"])


def test_an_unidentified_server_is_named_by_what_it_says_and_offered_no_engine_flags(tmp_path):
    out = tmp_path / "bench.json"
    with FakeOpenAIServer(metrics=False) as srv:
        res = cli("bench", "--url", srv.url, *LOAD, "--json", str(out))
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["target"]["engine"] == "openai-compatible"
    assert "owned_by fake" in report["target"]["says"] and "Server: BaseHTTP" in report["target"]["says"]
    assert f"openai-compatible ({report['target']['says']})" in res.output
    for finding in report["findings"]:
        assert not any(c.startswith(("vllm ", "python -m sglang", "text-generation-launcher"))
                       for c in finding["fix"]["commands"]), finding
        assert not finding["fix"].get("flags"), finding
