"""`triage diagnose --from FILE` as a user runs it: a server log (or its rotated parts), a saved report, a bundle;
a file it cannot read is one line and exit 2. Live logs of `triage serve` and `llama-server`, diagnosed offline."""
from __future__ import annotations

import json
import tarfile

import pytest
from typer.testing import CliRunner

from tests.incidents import FIXTURES
from triage.cli import app
from triage.core.probe_data import LogsData, ServerConfigData
from triage.core.report import Severity
from triage.diagnose.from_files import diagnose_logs, sniff


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def said(res) -> str:
    """The output with the terminal's line wrapping undone."""
    return " ".join(res.output.split())


def test_a_log_alone_names_the_cause_on_the_command_line(tmp_path):
    log = FIXTURES / "vllm-v0-kv-below-max-len-7526.log"
    out = tmp_path / "report.json"
    res = cli("diagnose", "--from", str(log), "--json", str(out), "--fail-on", "critical")
    assert res.exit_code == 1, res.output                    # the critical finding trips --fail-on
    assert "CRITICAL KV007" in said(res) and "--max-model-len 3840" in said(res)
    assert "no probe of this host ran" in said(res)
    report = json.loads(out.read_text())
    assert report["target"]["engine"] == "vllm" and report["target"]["engine_version"] == "0.6.6"
    assert {p["name"] for p in report["probes"]} == {"server_config", "logs"}


def test_several_from_files_are_one_rotated_log(tmp_path):
    lines = (FIXTURES / "tgi-prefill-oom-1067.log").read_text().splitlines()
    first, second = tmp_path / "launcher.log.1", tmp_path / "launcher.log"
    first.write_text("\n".join(lines[:6]) + "\n")
    second.write_text("\n".join(lines[6:]) + "\n")
    res = cli("diagnose", "--from", str(first), "--from", str(second))
    assert res.exit_code == 0, res.output
    assert "ENG010" in said(res) and "--max-batch-prefill-tokens 2048" in said(res)


@pytest.mark.parametrize("content, says", [
    (b"", "empty"),
    (b"\x00\x01\x02binary", "binary"),
    (b'{"hello": "world"}', "neither a triage report nor a snapshot"),
])
def test_a_file_it_cannot_read_is_one_line_and_exit_2(tmp_path, content, says):
    bad = tmp_path / "bad"
    bad.write_bytes(content)
    res = cli("diagnose", "--from", str(bad))
    assert res.exit_code == 2 and says in said(res), res.output
    assert "Traceback" not in res.output


def test_from_cannot_be_mixed_with_a_live_server_or_two_saved_reports(tmp_path):
    log = str(FIXTURES / "vllm-v0-kv-below-max-len-7526.log")
    res = cli("diagnose", "--from", log, "--url", "http://127.0.0.1:9")
    assert res.exit_code == 2 and "--from" in res.output
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"probes": []}))
    res = cli("diagnose", "--from", str(snap), "--from", log)
    assert res.exit_code == 2 and "one saved report" in said(res)


def test_sniffing_goes_by_content_not_by_name(tmp_path):
    jsonl = tmp_path / "server.json"
    jsonl.write_text(json.dumps({"log": "INFO vLLM API server version 0.6.6\n"}) + "\n"
                     + json.dumps({"log": "second line\n"}) + "\n")
    assert sniff(jsonl) == "log"
    snap = tmp_path / "server.log"
    snap.write_text(json.dumps({"probes": []}))
    assert sniff(snap) == "snapshot"


def test_a_bundle_is_replayed_from_its_snapshot(tmp_path):
    log = FIXTURES / "sglang-kv-saturated-14972.log"
    bundle = tmp_path / "triage.tar.gz"
    res = cli("diagnose", "--from", str(log), "--bundle", str(bundle))
    assert res.exit_code == 0, res.output
    with tarfile.open(bundle) as tar:
        names = [m.name for m in tar.getmembers()]
        assert any(n.endswith("snapshot.json") for n in names) and any(n.endswith("logs/server.log") for n in names)
    again = cli("diagnose", "--from", str(bundle))
    assert again.exit_code == 0, again.output
    assert "KV001" in again.output


def _loud(result) -> list[str]:
    return [f"{f.severity.value} {f.code} {f.title}" for f in result.report.findings
            if f.severity.rank < Severity.LOW.rank]


def test_a_live_reference_server_log_diagnosed_offline_is_quiet_and_named(reference_server):
    result = diagnose_logs([reference_server.log_path], None, None, None)
    logs = result.snapshot.payload(LogsData)
    assert logs.engine == "reference" and logs.engine_version, logs
    assert logs.kv_cache_tokens and logs.max_concurrency
    cfg = result.snapshot.payload(ServerConfigData)
    assert cfg.max_model_len and cfg.sources["max_model_len"] == "log"
    assert not _loud(result), _loud(result)


def test_a_live_llama_server_log_diagnosed_offline(llama_server_parallel1):
    server = llama_server_parallel1
    result = diagnose_logs([server.log], None, None, None)
    logs = result.snapshot.payload(LogsData)
    assert logs.engine == "llama.cpp", (logs.engine, server.log.read_text()[:2000])
    cfg = result.snapshot.payload(ServerConfigData)
    assert (cfg.max_num_seqs, cfg.max_model_len) == (1, 2048)      # --parallel 1 -c 2048: one slot of 2048 tokens
    assert not _loud(result), _loud(result)


def test_log_beside_a_live_server_agrees_with_it(reference_server):
    """--log beside a live server: the log's own figures agree with what the server reports where they overlap."""
    from triage.core.probe_data import ServerMetricsData
    from triage.diagnose.pipeline import DiagnoseOptions, diagnose

    opts = DiagnoseOptions(url=reference_server.url, window_s=0.5, log_path=str(reference_server.log_path),
                           skip=("storage", "network"))
    result = diagnose(opts)
    logs = result.snapshot.payload(LogsData)
    cfg = result.snapshot.payload(ServerConfigData)
    metrics = result.snapshot.payload(ServerMetricsData)
    assert logs.source == "--log" and logs.engine == "reference"
    assert logs.config["max_model_len"] == cfg.max_model_len
    cache = metrics.cache_config or {}
    assert logs.kv_cache_tokens == int(cache["num_gpu_blocks"]) * int(cache["block_size"])
    assert not _loud(result), _loud(result)
