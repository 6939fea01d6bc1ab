"""--shard i/N, --workers N and `bench merge`: shares add up, and merged statistics are exactly those of the
pooled per-request records (computed here with numpy from the JSONL, not through triage's own summary)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from triage.bench.run_config import BenchConfig, LevelSpec
from triage.bench.shards import parse_shard, shard_config, skew_bound_s
from triage.cli import app

DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
COMMON = ["--concurrency", "2,4", "--num-requests", "16", "--input-len", "32", "--output-len", "16",
          "--slo", "ttft_ms=50"]


def test_shares_add_up_to_the_whole_load():
    cfg = BenchConfig(url="http://x", levels=(LevelSpec(concurrency=10), LevelSpec(request_rate=3.0)), num_requests=101)
    shares = [shard_config(cfg, i, 3) for i in range(3)]
    assert sum(s.levels[0].concurrency for s in shares) == 10
    assert sum(s.levels[1].request_rate for s in shares) == pytest.approx(3.0)
    assert sum(s.num_requests for s in shares) == 101
    assert len({s.seed for s in shares}) == 3


def test_shard_flags_and_env(monkeypatch):
    assert parse_shard("1/4") == (1, 4)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "3")
    monkeypatch.setenv("TRIAGE_SHARDS", "8")
    assert parse_shard("env") == (3, 8)
    for bad in ("4/4", "x", "1/0"):
        with pytest.raises(Exception, match="--shard"):
            parse_shard(bad)
    with pytest.raises(Exception, match="cannot be split"):
        shard_config(BenchConfig(url="http://x", levels=(LevelSpec(concurrency=2),)), 0, 4)


def test_skew_bound_from_offset_intervals():
    assert skew_bound_s([[-0.2, 0.8], [-0.7, 0.3]]) == pytest.approx(1.5)
    assert skew_bound_s([[-0.2, 0.8], None]) is None


def test_the_indexed_job_manifest_runs_n_shards_and_a_merge():
    docs = [d for d in yaml.safe_load_all((DEPLOY / "bench-indexed-job.yaml").read_text()) if d]
    jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    shards = jobs["triage-bench"]["spec"]
    assert shards["completionMode"] == "Indexed" and shards["completions"] == shards["parallelism"]
    container = shards["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["TRIAGE_SHARDS"]) == shards["completions"]
    assert "--shard env" in container["args"][0] and "$JOB_COMPLETION_INDEX" in container["args"][0]
    merge = jobs["triage-bench-merge"]["spec"]["template"]["spec"]["containers"][0]
    assert "triage bench merge /results/shard-*" in merge["args"][0]


def _pooled(dirs: list[Path], level: str) -> dict[str, np.ndarray]:
    records = [json.loads(line) for d in dirs for line in (d / "requests.jsonl").read_text().splitlines()]
    mine = [r for r in records if not r["warmup"] and r["level"] == level]
    ok = [r for r in mine if r["http_status"] == 200 and r["error_kind"] is None]
    return {"n": len(mine), "ttft_ms": np.array([r["ttft_s"] * 1000 for r in ok]),
            "e2e_ms": np.array([r["e2e_s"] * 1000 for r in ok]),
            "met": sum(1 for r in ok if r["ttft_s"] * 1000 <= 50)}


def _assert_exact(merged: dict, dirs: list[Path], shard_level_names: dict[str, list[str]]) -> None:
    for lv in merged["bench"]["levels"]:
        name = f"c={lv['concurrency']}"
        parts = [_pooled([d], n) for d, n in zip(dirs, shard_level_names[name], strict=True)]
        ttft = np.concatenate([p["ttft_ms"] for p in parts])
        e2e = np.concatenate([p["e2e_ms"] for p in parts])
        assert lv["requests"]["completed"] + lv["requests"]["failed"] == sum(p["n"] for p in parts)
        for q, key in ((50, "p50"), (90, "p90"), (99, "p99")):
            assert lv["ttft_ms"][key] == pytest.approx(float(np.percentile(ttft, q)), abs=1e-9)
            assert lv["e2e_ms"][key] == pytest.approx(float(np.percentile(e2e, q)), abs=1e-9)
        assert lv["ttft_ms"]["max"] == pytest.approx(float(ttft.max()), abs=1e-9)
        assert lv["slo_attainment_pct"] == pytest.approx(100 * sum(p["met"] for p in parts) / sum(p["n"] for p in parts))


@pytest.mark.slow
def test_two_shards_merge_to_the_statistics_of_their_pooled_records(reference_server, tmp_path):
    dirs = [tmp_path / "s0", tmp_path / "s1"]

    def shard(i: int) -> None:
        subprocess.run([sys.executable, "-m", "triage", "bench", "--url", reference_server.url, *COMMON,
                        "--shard", f"{i}/2", "--output-dir", str(dirs[i]), "--format", "json"],
                       check=True, capture_output=True, timeout=300)

    threads = [threading.Thread(target=shard, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = tmp_path / "merged.json"
    result = CliRunner().invoke(app, ["bench", "merge", str(dirs[0]), str(dirs[1]), "--json", str(out)])
    assert result.exit_code == 0, result.output
    merged = json.loads(out.read_text())
    assert [lv["concurrency"] for lv in merged["bench"]["levels"]] == [2, 4]       # the whole run's loads
    assert merged["bench"]["config"]["num_shards"] == 2
    assert merged["bench"]["config"]["clock"]["skew_bound_s"] is not None          # uvicorn sends Date
    _assert_exact(merged, dirs, {"c=2": ["c=1", "c=1"], "c=4": ["c=2", "c=2"]})
    # Mismatched shards are refused.
    bad = tmp_path / "bad"
    (bad).mkdir()
    (bad / "bench.json").write_text((dirs[1] / "bench.json").read_text().replace('"output_len": 16', '"output_len": 17'))
    (bad / "requests.jsonl").write_text("")
    refused = CliRunner().invoke(app, ["bench", "merge", str(dirs[0]), str(bad)])
    assert refused.exit_code == 2 and "not the same bench" in refused.output


@pytest.mark.slow
def test_workers_give_the_statistics_of_their_pooled_records(reference_server, tmp_path):
    out = tmp_path / "merged.json"
    result = CliRunner().invoke(app, ["bench", "--url", reference_server.url, *COMMON, "--workers", "2",
                                      "--output-dir", str(tmp_path / "run"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    dirs = [tmp_path / "run" / "worker-0", tmp_path / "run" / "worker-1"]
    merged = json.loads(out.read_text())
    _assert_exact(merged, dirs, {"c=2": ["c=1", "c=1"], "c=4": ["c=2", "c=2"]})


def test_a_shard_with_output_dir_and_json_keeps_its_directory_complete_and_merges(tmp_path):
    """--json beside --output-dir writes a copy: the directory still holds bench.json and requests.jsonl, so
    `bench merge` takes it."""
    from tests.fake_servers import FakeOpenAIServer

    dirs = [tmp_path / "s0", tmp_path / "s1"]
    with FakeOpenAIServer() as srv:
        for i, d in enumerate(dirs):
            result = CliRunner().invoke(app, [
                "bench", "--url", srv.url, "--concurrency", "2", "--num-requests", "4", "--warmup", "0",
                "--input-len", "8", "--output-len", "4", "--shard", f"{i}/2", "--output-dir", str(d),
                "--json", str(tmp_path / f"copy{i}.json"), "--jsonl", str(tmp_path / f"copy{i}.jsonl"),
                "--format", "json"])
            assert result.exit_code == 0, result.output
    for i, d in enumerate(dirs):
        assert (d / "bench.json").read_text() == (tmp_path / f"copy{i}.json").read_text()
        assert (d / "requests.jsonl").read_text() == (tmp_path / f"copy{i}.jsonl").read_text()
        assert len((d / "requests.jsonl").read_text().splitlines()) == 2  # each shard sends half the requests
    merged = CliRunner().invoke(app, ["bench", "merge", str(dirs[0]), str(dirs[1]), "--format", "json"])
    assert merged.exit_code == 0, merged.output
    report = json.loads(merged.stdout)
    (level,) = report["bench"]["levels"]
    assert level["concurrency"] == 2 and level["requests"]["completed"] == 4
