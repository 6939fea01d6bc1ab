"""llama.cpp's own server, live (slow; runs where llama-server is on PATH): named from its own signals,
benchmarked with no failed request although it closes connections after each stream, and its one slot
named as the cause with `--parallel` in the fix."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from triage.probes.engine_identity import fetch_signals, identify

pytestmark = pytest.mark.slow


def test_live_llamacpp_is_named(llama_server_parallel1):
    who = identify(None, fetch_signals(llama_server_parallel1.url))
    assert who.engine == "llama.cpp", who


def _bench_and_diagnose(url: str, tmp_path, num_requests: int, output_len: int) -> tuple[list[dict], dict]:
    """`triage bench` at c=1,4 then `triage diagnose` with that bench, as a user runs them: (levels, report)."""
    bench_json, diag_json = tmp_path / "bench.json", tmp_path / "diagnose.json"
    run = [sys.executable, "-m", "triage"]
    b = subprocess.run(run + ["bench", "--url", url, "--concurrency", "1,4", "--num-requests", str(num_requests),
                              "--input-len", "32", "--output-len", str(output_len), "--json", str(bench_json),
                              "--format", "json"], capture_output=True, text=True, timeout=300)
    assert b.returncode in (0, 1), b.stderr[-2000:]
    d = subprocess.run(run + ["diagnose", "--url", url, "--bench", str(bench_json), "--window-s", "0.5",
                              "--skip", "storage,kernel_log,memory,gpu", "--json", str(diag_json),
                              "--format", "json"], capture_output=True, text=True, timeout=300)
    assert d.returncode in (0, 1), d.stderr[-2000:]
    return json.loads(bench_json.read_text())["bench"]["levels"], json.loads(diag_json.read_text())


def test_live_llamacpp_one_slot_under_load(llama_server_parallel1, tmp_path):
    levels, report = _bench_and_diagnose(llama_server_parallel1.url, tmp_path, 24, 32)
    assert all(lv["requests"]["failed"] == 0 for lv in levels), levels
    assert report["target"]["engine"] == "llama.cpp"
    eng = {f["code"]: f for f in report["findings"]}.get("ENG001")
    assert eng is not None and any("--parallel" in c for c in eng["fix"]["commands"] + eng["fix"].get("flags", [])), report["findings"]


@pytest.mark.parametrize("server, silent", [("llama_server_parallel1", False), ("llama_server_parallel4", False),
                                            ("llama_server_silent", True)])
def test_live_llamacpp_serves_every_request_even_with_no_text(server, silent, request, tmp_path):
    """A request whose tokens decode to nothing printable makes llama-server stream one final chunk with
    "text": "", finish_reason "length" and usage.completion_tokens 16 (issue 30). Such requests are served:
    counted as completed with no text, and BENCH002 stays quiet. The silent model makes every request one."""
    levels, report = _bench_and_diagnose(request.getfixturevalue(server).url, tmp_path, 16, 16)
    assert [lv["requests"]["failed"] for lv in levels] == [0, 0], [lv["requests"] for lv in levels]
    assert all(lv["requests"]["completed"] == 16 for lv in levels)
    assert [lv["requests"]["completed_no_text"] for lv in levels] == ([16, 16] if silent else [0, 0])
    assert all((lv["ttft_ms"]["p50"] is None) == silent for lv in levels)
    assert "BENCH002" not in {f["code"] for f in report["findings"]}
