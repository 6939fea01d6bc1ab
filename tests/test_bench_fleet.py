"""Several replicas in one bench: two real reference servers on loopback, one deliberately undersized. Each
replica gets its own numbers (checked against its records in the JSONL), its own /metrics window, a fleet
summary, and FLEET001 fires on the undersized one and stays quiet on equal replicas."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from triage.bench.fleet import FleetPool, read_urls
from triage.cli import app

COMMON = ["--concurrency", "8", "--num-requests", "48", "--input-len", "24", "--output-len", "32"]


def test_urls_file_and_flags_combine(tmp_path):
    f = tmp_path / "urls.txt"
    f.write_text("# replicas\nhttp://a:8000\n\nhttp://b:8000  # second\nhttp://a:8000\n")
    assert read_urls(["http://c:8000"], f) == ["http://c:8000", "http://a:8000", "http://b:8000"]
    result = CliRunner().invoke(app, ["bench", "--urls", str(tmp_path / "missing.txt")])
    assert result.exit_code == 2 and "--urls" in result.output


def test_least_in_flight_prefers_the_idle_replica():
    class Stub:
        max_connections = 1

    pool = FleetPool([Stub(), Stub(), Stub()], "least-in-flight")
    pool.in_flight = [3, 0, 1]
    assert pool._pick() == 1
    rr = FleetPool([Stub(), Stub()], "round-robin")
    assert [rr._pick() for _ in range(4)] == [0, 1, 0, 1]


@pytest.mark.slow
def test_two_replicas_one_undersized(reference_server, tmp_path):
    launcher = pytest.importorskip("triage.reference_engine.serve.launcher")
    # One request at a time and 64-token answers on the small replica: its queued requests wait whole requests
    # (~0.6 s on a fast CPU against ~14 ms on the big one), far past FLEET001's 2x and 50 ms on any host.
    with launcher.start_reference_server("tiny", extra_args=("--num-kv-blocks", "12", "--block-size", "16",
                                                             "--max-num-seqs", "1")) as small:
        out, jsonl = tmp_path / "fleet.json", tmp_path / "requests.jsonl"
        slow_shape = [*COMMON[:-1], "64"]   # --output-len 64
        result = CliRunner().invoke(app, ["bench", "--url", reference_server.url, "--url", small.url, *slow_shape,
                                          "--json", str(out), "--jsonl", str(jsonl)])
        assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["target"]["url"] == reference_server.url
    assert report["target"]["urls"] == [reference_server.url, small.url]
    level = report["bench"]["levels"][0]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    measured = [r for r in records if not r["warmup"] and r["level"] == "c=8"]
    for rep in level["replicas"]:
        mine = [r for r in measured if r["replica"] == rep["replica"]]
        ttft = [r["ttft_s"] * 1000 for r in mine if r["ttft_s"] is not None]
        assert rep["requests"] == len(mine) == 24                    # round robin: equal shares
        assert rep["ttft_ms"]["p99"] == pytest.approx(float(np.percentile(ttft, 99)), abs=1e-9)
        assert rep["server"]["num_scrapes"] >= 2                    # its own /metrics window
    big, little = level["replicas"]
    assert little["cache_config"]["num_gpu_blocks"] == 12 and big["cache_config"]["num_gpu_blocks"] > 12
    assert little["ttft_ms"]["p99"] > 2 * big["ttft_ms"]["p99"]
    fleet = report["bench"]["summary"]["fleet"]
    assert [r["requests"] for r in fleet["replicas"]] == [24, 24]
    finding = next(f for f in report["findings"] if f["code"] == "FLEET001")
    assert "replica 1" in finding["message"] and "num_gpu_blocks 12 vs" in finding["message"]


@pytest.mark.slow
def test_equal_replicas_raise_no_imbalance(reference_server, tmp_path):
    same = reference_server.url.replace("127.0.0.1", "localhost")
    out = tmp_path / "fleet.json"
    result = CliRunner().invoke(app, ["bench", "--url", reference_server.url, "--url", same, *COMMON,
                                      "--balance", "least-in-flight", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert len(report["bench"]["levels"][0]["replicas"]) == 2
    assert "FLEET001" not in {f["code"] for f in report["findings"]}
