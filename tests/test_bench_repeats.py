"""--repeat K in rounds: each level's repeats spread over the run, each repeat records its start, the host's
load and the client's verdict, and a level whose first and last repeats differ beyond the noise within a
repeat is flagged as drift (in the report, and by compare)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import numpy as np
from typer.testing import CliRunner

from tests.factories import bench_report, level
from tests.fake_servers import FakeOpenAIServer
from triage.bench.level_runner import BenchRunner
from triage.bench.records import RecordSink, read_records
from triage.bench.run_config import BenchConfig, LevelSpec
from triage.cli import app
from triage.compare import compare_reports
from triage.compare.thresholds import parse_max_regression
from triage.core.drift import DRIFT_MIN_PCT, drift_check
from triage.core.report_io import dumps, read_report, write_report


def _run(cfg: BenchConfig, tmp_path):
    with RecordSink(tmp_path / "r.jsonl") as sink:
        section = asyncio.run(BenchRunner(cfg, sink=sink).run())
    return section, read_records(tmp_path / "r.jsonl")


def _order(records):
    """(level, repeat) in the order the repeats started."""
    firsts: dict[tuple[str, int], float] = {}
    for r in records:
        if not r.warmup:
            key = (r.level, r.repeat)
            firsts[key] = min(firsts.get(key, r.t0_s), r.t0_s)
    return sorted(firsts, key=firsts.get)


def test_repeats_run_in_rounds_and_record_start_load_and_verdict(tmp_path, report_validator):
    with FakeOpenAIServer() as srv:
        cfg = BenchConfig(url=srv.url, levels=(LevelSpec(concurrency=1), LevelSpec(concurrency=2)),
                          num_requests=4, warmup=0, input_len=8, output_len=4, repeat=3)
        section, records = _run(cfg, tmp_path)
    assert _order(records) == [("c=1", 0), ("c=2", 0), ("c=1", 1), ("c=2", 1), ("c=1", 2), ("c=2", 2)]
    assert section.config.repeat_order == "rounds"
    for lv in section.levels:
        assert lv.requests.completed == 12 and len(lv.samples["ttft_ms"]) == 12
        assert [r["repeat"] for r in lv.repeats] == [0, 1, 2]
        starts = [r["started_epoch_s"] for r in lv.repeats]
        assert starts == sorted(starts) and starts[0] >= section.config.started_epoch_s
        assert all(r["host_load_1m"] is not None and r["host_load_1m"] >= 0 for r in lv.repeats)
        assert all(r["num_completed"] == 4 and isinstance(r["client_valid"], bool) for r in lv.repeats)
        assert all(r["client_valid"] == ("client_invalid_reason" not in r) for r in lv.repeats)
        assert lv.client.valid == all(r["client_valid"] for r in lv.repeats)      # the level: invalid if any was
        assert all(r["ttft_ms_std"] is not None and r["ttft_ms_p99"] > 0 for r in lv.repeats)
        assert lv.drift is not None and set(lv.drift["metrics"]) == {"ttft_ms", "e2e_ms"}
        assert any("repeats interleaved" in n for n in lv.notes)
    report = replace(bench_report(list(section.levels)), bench=section)
    data = report_validator(json.loads(dumps(report)))            # the 1.1 schema knows the new fields
    assert data["bench"]["levels"][0]["repeats"][0]["started_epoch_s"] > 0
    # c=2's first repeat started after c=1's first and before c=1's second: the repeats are interleaved
    c1, c2 = (lv.repeats for lv in section.levels)
    assert c1[0]["started_epoch_s"] < c2[0]["started_epoch_s"] < c1[1]["started_epoch_s"]


def test_back_to_back_order_is_kept_on_request(tmp_path):
    with FakeOpenAIServer() as srv:
        cfg = BenchConfig(url=srv.url, levels=(LevelSpec(concurrency=1), LevelSpec(concurrency=2)),
                          num_requests=2, warmup=0, input_len=8, output_len=4, repeat=2, repeat_order="back-to-back")
        section, records = _run(cfg, tmp_path)
    assert _order(records) == [("c=1", 0), ("c=1", 1), ("c=2", 0), ("c=2", 1)]
    assert all(len(lv.repeats) == 2 and not any("interleaved" in n for n in lv.notes) for lv in section.levels)


def test_bad_repeat_order_is_a_usage_error():
    out = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--repeat-order", "random"])
    assert out.exit_code == 2 and "--repeat-order 'random': use rounds or back-to-back" in out.output


def _rep(i, ttft_mean, n=40, std=5.0, load=0.5):
    return {"repeat": i, "started_epoch_s": 1000.0 + 10 * i, "host_load_1m": load, "num_completed": n,
            "ttft_ms_mean": ttft_mean, "ttft_ms_std": std, "e2e_ms_mean": 10 * ttft_mean, "e2e_ms_std": 10 * std,
            "ttft_ms_p50": ttft_mean}


def test_drift_check_values():
    steady = drift_check([_rep(0, 100.0), _rep(1, 101.0), _rep(2, 100.5)])
    assert steady["drifted"] is False and abs(steady["metrics"]["ttft_ms"]["change_pct"] - 0.5) < 1e-9
    # +20% from the first repeat to the last, with a standard error of about 1.1 ms: drift
    slow = drift_check([_rep(0, 100.0), _rep(1, 110.0), _rep(2, 120.0, load=3.0)])
    m = slow["metrics"]["ttft_ms"]
    assert slow["drifted"] and m["drifted"] and abs(m["change_pct"] - 20.0) < 1e-9
    assert abs(m["z"] - 20.0 / np.sqrt(25 / 40 * 2)) < 1e-9
    assert slow["first_host_load_1m"] == 0.5 and slow["last_host_load_1m"] == 3.0
    # significant but below the floor: not drift
    tiny = drift_check([_rep(0, 100.0, std=0.1), _rep(1, 100.0 + DRIFT_MIN_PCT / 2, std=0.1)])
    assert tiny["metrics"]["ttft_ms"]["z"] > 10 and tiny["drifted"] is False
    # a big change inside a wide spread: not drift either
    assert drift_check([_rep(0, 100.0, n=4, std=60.0), _rep(1, 140.0, n=4, std=60.0)])["drifted"] is False
    # reports from before the check (no spread or count in the repeats): no verdict
    assert drift_check([{"ttft_ms_p99": 1.0}, {"ttft_ms_p99": 2.0}]) is None and drift_check(None) is None


def _with_reps(report, reps):
    lv = replace(report.bench.levels[0], repeats=reps)
    return replace(report, bench=replace(report.bench, levels=(lv,)))


def test_compare_says_which_report_drifted(tmp_path):
    rng = np.random.default_rng(3)
    ttft = rng.lognormal(np.log(100), 0.2, 120)
    base = _with_reps(bench_report([level(1, ttft, np.full(120, 20.0), ttft + 2000, 1000.0)]),
                      [_rep(0, 100.0), _rep(1, 100.4), _rep(2, 99.8)])
    cand = _with_reps(bench_report([level(1, ttft, np.full(120, 20.0), ttft + 2000, 1000.0)]),
                      [_rep(0, 100.0), _rep(1, 112.0), _rep(2, 125.0, load=3.5)])
    result = compare_reports(base, cand, parse_max_regression(None))
    assert [(d["report"], d["level"]) for d in result.drift] == [("candidate", "c=1")]
    assert any(n.startswith("drift in the candidate at c=1") and "ttft_ms mean +25.0%" in n and "3.50" in n
               for n in result.notes)
    b, c = write_report(base, tmp_path / "b.json"), write_report(cand, tmp_path / "c.json")
    out = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["compare", str(b), str(c), "--format", "json"])
    section = json.loads(out.output)["compare"]
    assert section["drift"][0]["report"] == "candidate" and section["drift"][0]["metrics"]["ttft_ms"]["drifted"]
    text = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["compare", str(b), str(c)])
    assert "drift in the candidate at c=1" in text.output


def test_old_reports_without_the_new_fields_still_load_and_compare(tmp_path):
    old = bench_report([level(1, [100.0] * 10, [20.0] * 10, [300.0] * 10, 1000.0)])
    data = json.loads(dumps(old))
    data["bench"]["levels"][0].pop("drift", None)
    data["bench"]["levels"][0]["repeats"] = [{"ttft_ms_p99": 100.0}, {"ttft_ms_p99": 101.0}]
    (tmp_path / "old.json").write_text(json.dumps(data))
    back = read_report(tmp_path / "old.json")
    assert back.bench.levels[0].drift is None
    result = compare_reports(back, back, parse_max_regression(None))
    assert result.drift == () and result.exit_code == 0


def test_a_drift_warning_in_one_report_does_not_make_the_workloads_differ():
    base = bench_report([level(1, [100.0] * 10, [20.0] * 10, [300.0] * 10, 1000.0)])
    cand = replace(base, bench=replace(base.bench, config=replace(base.bench.config, repeat_order="back-to-back",
                                                               warnings=("drift at c=1: ...",))))
    result = compare_reports(base, cand, parse_max_regression(None))
    assert result.changed == () and result.exit_code == 0
