"""Peers' result files: real AIPerf 0.13.0 and GuideLLM 0.8.1 output (runs against the reference server, see
tests/fixtures/peers/README.md) and vLLM fixtures built from the keys in vLLM's source. Each converts with
`triage import`, keeps its per-request samples, says what it lacked, and gates in `triage compare`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage.cli import app
from triage.importers import detect, load_any
from triage.importers.common import workload

PEERS = "tests/fixtures/peers"
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
FILES = {
    "vllm": (f"{PEERS}/vllm/vllm_a.json", f"{PEERS}/vllm/vllm_b.json"),
    "aiperf": (f"{PEERS}/aiperf_a/profile_export_aiperf.json", f"{PEERS}/aiperf_b/profile_export_aiperf.json"),
    "guidellm": (f"{PEERS}/guidellm/benchmarks.json", f"{PEERS}/guidellm/benchmarks.json"),
}


@pytest.mark.parametrize("fmt", FILES)
def test_import_converts_keeps_samples_and_names_what_is_missing(fmt, tmp_path, report_validator):
    path = FILES[fmt][0]
    assert detect(json.load(open(path))) == fmt
    out = tmp_path / "imported.json"
    result = runner.invoke(app, ["import", path, "--json", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = report_validator(json.loads(out.read_text()))
    assert data["kind"] == "bench" and data["target"]["model"] == "tiny"
    levels = data["bench"]["levels"]
    assert levels and all(len(lv["samples"]["ttft_ms"]) == lv["requests"]["completed"] for lv in levels)
    assert all(lv["ttft_ms"]["p99"] > 0 and lv["output_tokens_per_s"] > 0 for lv in levels)
    missing = data["bench"]["config"]["missing_fields"]
    assert "repeats" in missing and "goodput_requests_per_s" in missing
    if fmt == "aiperf":
        assert "samples.itl_ms" in missing      # AIPerf's records keep chunk gaps as lists; not imported


def test_guidellm_levels_are_its_concurrencies():
    report = load_any(FILES["guidellm"][0])
    assert [lv.concurrency for lv in report.bench.levels] == [1, 4]


@pytest.mark.parametrize("fmt", FILES)
def test_compare_gates_peer_files(fmt):
    base, cand = FILES[fmt]
    result = runner.invoke(app, ["compare", base, cand, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    section = json.loads(result.stdout)["compare"]
    assert section["metrics"] and all(m["verdict"] in ("regression", "pass", "inconclusive", "not_measured")
                                      for m in section["metrics"])
    ttft = next(m for m in section["metrics"] if m["metric"] == "ttft_ms.p50")
    if base == cand:            # one file against itself: the same measurements, nothing to estimate
        assert result.exit_code == 0 and ttft["interval_from"] == "same data" and ttft["change_pct"] == 0
        return
    assert ttft["interval_from"] == "samples" and ttft["ci_low_pct"] is not None


def test_a_peer_file_against_a_slower_copy_of_itself_fails(tmp_path):
    data = json.load(open(FILES["vllm"][0]))
    slow = dict(data, ttfts=[t * 2 for t in data["ttfts"]], latencies=[t * 2 for t in data["latencies"]])
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    result = runner.invoke(app, ["compare", FILES["vllm"][0], str(tmp_path / "slow.json"), "--format", "json"])
    assert result.exit_code == 1
    rows = {m["metric"]: m for m in json.loads(result.stdout)["compare"]["metrics"]}
    assert rows["ttft_ms.p50"]["verdict"] == "regression"


@pytest.mark.parametrize("content, expected", [
    ('{"foo": 1}', "unknown result format"),
    ('{"benchmarks": [1, 2', "not valid JSON"),
    ('[1, 2, 3]', "unknown result format"),
])
def test_bad_peer_input_is_one_line_exit_2(tmp_path, content, expected):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    for args in (["compare", str(bad), FILES["vllm"][0]], ["import", str(bad)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and expected in lines[0] and "Traceback" not in result.stderr, result.stderr


def test_demo_pair_workload_difference_exits_2_unless_allowed(tmp_path):
    """The two reports `make demo` writes differ in workload (lengths, shared prefix) and server: refused, named."""
    from dataclasses import replace

    import numpy as np

    from tests.factories import bench_report, level
    from triage.core.bench_data import BenchRunConfig

    rng = np.random.default_rng(0)
    lv = level(4, rng.lognormal(3, 0.2, 64), rng.normal(5, 0.3, 64), rng.normal(100, 5, 64), 500.0)
    base = bench_report([lv])
    base = replace(base, bench=replace(base.bench, config=BenchRunConfig(
        endpoint="completions", input_len=32, output_len=16, shared_prefix_len=0, concurrency=(1, 4, 16),
        max_model_len=4096)))
    cand = replace(base, target=replace(base.target, engine="vllm"),
                   bench=replace(base.bench, config=replace(base.bench.config, input_len=48, output_len=32,
                                                           shared_prefix_len=32, concurrency=(4, 16),
                                                           max_model_len=1024, turns=2)))
    from triage.core.report_io import write_report
    a, b = write_report(base, tmp_path / "a.json"), write_report(cand, tmp_path / "b.json")
    result = runner.invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 2
    err = result.stderr
    for key in ("input_len: 32 → 48", "output_len: 16 → 32", "shared_prefix_len: 0 → 32", "turns"):
        assert key in err, err
    assert "concurrency" not in err                      # the level set is matched, not compared
    result = runner.invoke(app, ["compare", str(a), str(b), "--allow-different", "workload"])
    assert result.exit_code in (0, 1), result.output
    assert "what changed" in result.stdout and "engine engine: reference → vllm" in result.stdout
    assert "server_flags max_model_len: 4096 → 1024" in result.stdout
    assert runner.invoke(app, ["compare", str(a), str(b), "--allow-different", "bogus"]).exit_code == 2


def test_two_tools_runs_of_one_workload_show_no_workload_difference():
    """AIPerf 0.13 and GuideLLM 0.8.1 ran the same synthetic 32-in/16-out streaming completions workload: each
    importer speaks triage's vocabulary, so nothing but the level set differs."""
    from triage.compare.comparability import differences

    aiperf, guidellm, vllm = (load_any(Path(FILES[f][0])) for f in ("aiperf", "guidellm", "vllm"))
    for a, b in ((aiperf, guidellm), (guidellm, aiperf)):
        assert [d.describe() for d in differences(a, b) if d.category == "workload"] == []
    # vLLM's result file (this one) does not name its dataset: that alone is left as unknown
    assert [d.describe() for d in differences(aiperf, vllm) if d.category == "workload"] == \
        ["dataset: synthetic → unset"]
    cfg = aiperf.bench.config
    assert (cfg.endpoint, cfg.streaming, cfg.input_len, cfg.dataset, cfg.turns) == \
        ("completions", True, 32, "synthetic", 1)
    chat = workload(endpoint="/v1/chat/completions", streaming="yes", input_len=31.5, output_len=None,
                    dataset="sharegpt", turns=3)
    assert chat == {"endpoint": "chat", "streaming": None, "input_len": 31.5, "output_len": None,
                    "dataset": "sharegpt", "turns": 3}
