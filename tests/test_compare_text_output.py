"""What `triage compare` prints at 100 columns: a report against itself is no change (not 15 inconclusive rows),
the advice on inconclusive rows is one line, a relative change's interval never reaches below −100%, and a
workload mismatch names each differing field as `field: base → cand`, not a Python dict."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
from typer.testing import CliRunner

from tests.factories import bench_report, level
from triage.cli import app
from triage.compare.significance import welch_change_pct
from triage.core.report_io import write_report

runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})


def _noisy_level(c: int, seed: int, n: int = 24, tput: float = 1000.0, repeats=None):
    """A small, heavy-tailed run: most default metrics straddle their limit."""
    rng = np.random.default_rng(seed)
    ttft = rng.lognormal(np.log(100), 0.6, n)
    tpot = rng.lognormal(np.log(20), 0.3, n)
    lv = level(c, ttft, tpot, ttft + tpot * 15, tput)
    return replace(lv, repeats=repeats) if repeats is not None else lv


def _write(tmp_path, name, report) -> str:
    return str(write_report(report, tmp_path / name))


def _compare(*args: str):
    return runner.invoke(app, ["compare", *args])


def test_a_report_against_itself_is_no_change_not_inconclusive(tmp_path):
    path = _write(tmp_path, "a.json", bench_report([_noisy_level(1, 1), _noisy_level(4, 2)]))
    result = _compare(path, path)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "the two reports hold the same measurements: no change" in out
    assert "inconclusive" not in out and "would settle" not in out, out
    assert len(out.splitlines()) <= 4, out          # the headline, the names of the inputs: nothing to estimate
    # the same file content under another name is the same measurements too
    copy = tmp_path / "copy.json"
    copy.write_text((tmp_path / "a.json").read_text())
    assert "same measurements" in _compare(path, str(copy)).stdout
    # the JSON keeps one row per metric, each a pass with no change
    section = json.loads(_compare(path, path, "--format", "json").stdout)["compare"]
    assert section["verdict"] == "pass" and section["inconclusive"] == 0
    measured = [m for m in section["metrics"] if m["verdict"] != "not_measured"]
    assert measured and all(m["verdict"] == "pass" and m["change_pct"] == 0 and m["interval_from"] == "same data"
                            for m in measured)


def test_many_inconclusive_rows_get_one_line_of_advice(tmp_path):
    base = _write(tmp_path, "base.json", bench_report([_noisy_level(1, 1), _noisy_level(4, 2)]))
    cand = _write(tmp_path, "cand.json", bench_report([_noisy_level(1, 3), _noisy_level(4, 4)]))
    section = json.loads(_compare(base, cand, "--format", "json").stdout)["compare"]
    needed = [int(re.search(r"about (\d+) requests", m["settle"]).group(1)) for m in section["metrics"]
              if m["verdict"] == "inconclusive" and m["settle"] and "about" in m["settle"]]
    assert len(needed) >= 3, section["metrics"]                  # the case needs several inconclusive rows
    result = _compare(base, cand)
    assert result.exit_code in (0, 1), result.output
    advice = [ln for ln in result.stdout.splitlines() if "would settle" in ln]
    assert len(advice) == 1, result.stdout
    assert f"about {max(needed)} requests a side would settle all of them" in advice[0]
    assert f"{len(needed)} inconclusive rows" in advice[0]
    assert all(len(ln) <= 100 for ln in result.stdout.splitlines()), result.stdout


def test_relative_change_interval_stays_above_minus_100_percent(tmp_path):
    # Two repeats a side, one of them slow: the interval of the difference of the means, divided by the base
    # mean, reached far below −100% (a latency that went negative).
    low = welch_change_pct([100.0, 300.0], [100.0, 120.0])[0]
    assert -100.0 < low.low_pct < 0 < low.high_pct
    # Through the gate: a latency from repeats, and a throughput (a tenth of the base's, with E2E unchanged)
    # whose interval comes from the E2E samples; both intervals stay above −100%.
    base_lv = _noisy_level(1, 1, repeats=[{"ttft_ms_p99": 100.0}, {"ttft_ms_p99": 300.0}])
    cand_lv = _noisy_level(1, 2, tput=100.0, repeats=[{"ttft_ms_p99": 100.0}, {"ttft_ms_p99": 120.0}])
    base = _write(tmp_path, "base.json", bench_report([base_lv]))
    cand = _write(tmp_path, "cand.json", bench_report([cand_lv]))
    rows = {m["metric"]: m for m in json.loads(_compare(base, cand, "--format", "json").stdout)["compare"]["metrics"]}
    assert rows["ttft_ms.p99"]["interval_from"] == "repeats"
    assert rows["output_tokens_per_s"]["interval_from"] == "e2e samples (Little's law)"
    assert rows["output_tokens_per_s"]["change_pct"] < -89.0
    for name in ("ttft_ms.p99", "output_tokens_per_s"):
        assert rows[name]["ci_low_pct"] > -100.0, rows[name]
        assert rows[name]["ci_low_pct"] <= rows[name]["change_pct"] <= rows[name]["ci_high_pct"], rows[name]
    text = _compare(base, cand).stdout
    assert not re.search(r"\[-(1\d\d|[2-9]\d\d|\d{4,})\.\d%", text), text


def test_workload_mismatch_names_each_differing_field(tmp_path):
    lv = _noisy_level(1, 1)
    cfg = {"endpoint": "completions", "input_len": 32.0, "output_len": 16,
           "slo": {"ttft_ms": 200.0, "tpot_ms": 50.0}}
    base = bench_report([lv])
    base = replace(base, bench=replace(base.bench, config=cfg))
    cand = replace(base, bench=replace(base.bench, config={**cfg, "input_len": 48,
                                                           "slo": {"ttft_ms": 300.0, "tpot_ms": 50.0}}))
    result = _compare(_write(tmp_path, "a.json", base), _write(tmp_path, "b.json", cand))
    assert result.exit_code == 2, result.output
    err = result.stderr
    lines = [ln.strip() for ln in err.splitlines()]
    assert "input_len: 32 → 48" in lines, err             # a whole number as an integer
    assert "slo.ttft_ms: 200 → 300" in lines, err
    assert "{" not in err and "tpot_ms" not in err and "output_len" not in err, err   # only what differs
    assert "--allow-different workload" in err
