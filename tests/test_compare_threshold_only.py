"""One rule for a metric without an interval: judged on the point change against its limit, marked
"threshold only" in every format; --inconclusive governs only intervals that straddle the limit."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from tests.factories import bench_report, level
from triage.cli import app
from triage.compare import compare_reports
from triage.compare.bench_diff import INCONCLUSIVE_RULE, NO_INTERVAL_RULE, THRESHOLD_ONLY, Verdict
from triage.compare.thresholds import parse_max_regression
from triage.core.report_io import write_report

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})


def _summary_only(scale_ttft: float) -> object:
    """A report with summaries only (no per-request samples, no repeats), as an imported peer result is."""
    rng = np.random.default_rng(7)
    ttft = rng.lognormal(np.log(100), 0.2, 200)
    tpot = rng.normal(20, 0.5, 200)
    return bench_report([level(1, ttft * scale_ttft, tpot, ttft * scale_ttft + tpot * 127, 1000.0, samples=False)])


def _pair(tmp_path: Path) -> tuple[str, str]:
    base = write_report(_summary_only(1.0), tmp_path / "base.json")
    cand = write_report(_summary_only(1.15), tmp_path / "cand.json")
    return str(base), str(cand)


def test_fifteen_percent_worse_without_interval_is_a_regression():
    result = compare_reports(_summary_only(1.0), _summary_only(1.15), parse_max_regression(None))
    rows = {m.metric: m for m in result.metrics}
    for metric in ("ttft_ms.p50", "ttft_ms.p99"):
        row = rows[metric]
        assert abs(row.change_pct - 15.0) < 1e-6
        assert row.interval is None and row.threshold_only and row.source == THRESHOLD_ONLY
        assert row.verdict is Verdict.REGRESSION and result.failed(row)
    assert rows["tpot_ms.p50"].verdict is Verdict.PASS and rows["tpot_ms.p50"].threshold_only
    # e2e p99 moved by less than the limit (TPOT dominates it): a pass, still marked threshold only.
    assert rows["e2e_ms.p99"].change_pct < 10.0 and rows["e2e_ms.p99"].verdict is Verdict.PASS
    assert result.count(Verdict.INCONCLUSIVE) == 0 and result.exit_code == 1
    assert any(NO_INTERVAL_RULE in n for n in result.notes)


def test_summary_only_pair_exits_1_by_default_in_every_format(tmp_path):
    base, cand = _pair(tmp_path)
    text = runner.invoke(app, ["compare", base, cand])
    assert text.exit_code == 1, text.output
    ttft = [ln for ln in text.output.splitlines() if "ttft_ms.p" in ln]
    assert len(ttft) == 2 and all("REGRESSION" in ln and THRESHOLD_ONLY in ln for ln in ttft), text.output
    assert text.output.startswith("compare: FAIL (2 regression(s), 0 inconclusive, 8 threshold only")  # goodput: not measured

    md = runner.invoke(app, ["compare", base, cand, "--format", "markdown"])
    assert md.exit_code == 1
    rows = [ln for ln in md.output.splitlines() if ln.startswith("|") and "ttft_ms.p" in ln]
    assert len(rows) == 2 and all(THRESHOLD_ONLY in r and "REGRESSION" in r for r in rows), md.output

    js = runner.invoke(app, ["compare", base, cand, "--format", "json"])
    assert js.exit_code == 1
    section = json.loads(js.output)["compare"]
    by_metric = {m["metric"]: m for m in section["metrics"]}
    for metric in ("ttft_ms.p50", "ttft_ms.p99"):
        m = by_metric[metric]
        assert m["verdict"] == "regression" and m["failed"] is True and m["threshold_only"] is True
        assert m["interval_from"] == THRESHOLD_ONLY and m["ci_low_pct"] is None
        assert abs(m["change_pct"] - 15.0) < 1e-6
    assert section["threshold_only"] == 8 and section["inconclusive"] == 0

    junit = runner.invoke(app, ["compare", base, cand, "--format", "junit"])
    assert junit.exit_code == 1
    suite = ET.fromstring(junit.output.split("?>", 1)[1])
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert set(failures) >= {"ttft_ms.p50", "ttft_ms.p99"}
    assert all(THRESHOLD_ONLY in f.get("message") for f in failures.values())
    passed = [c for c in suite.iter("testcase") if c.get("name") == "tpot_ms.p50"][0]
    assert THRESHOLD_ONLY in passed.find("system-out").text
    assert suite.get("skipped") == "1"          # goodput, not measured on either side; nothing inconclusive


def test_inconclusive_policy_does_not_change_threshold_only_rows(tmp_path):
    base, cand = _pair(tmp_path)
    for policy in ("pass", "fail"):
        out = runner.invoke(app, ["compare", base, cand, "--inconclusive", policy, "--format", "json"])
        assert out.exit_code == 1
        rows = {m["metric"]: m["verdict"] for m in json.loads(out.output)["compare"]["metrics"]}
        assert rows["ttft_ms.p99"] == "regression" and rows["tpot_ms.p99"] == "pass"
    same = runner.invoke(app, ["compare", base, base, "--inconclusive", "fail"])
    assert same.exit_code == 0, same.output


def _plain(text: str) -> str:
    """Prose without Markdown or the help box: backticks, emphasis and box-drawing gone, whitespace collapsed."""
    text = re.sub(r"[`*│╭╮╰╯─]", " ", text)
    return " ".join(text.split())


def test_readme_compare_doc_and_help_say_the_same_rule():
    help_out = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(app, ["compare", "--help"])
    assert help_out.exit_code == 0
    sources = {"README.md": (ROOT / "README.md").read_text(), "docs/COMPARE.md": (ROOT / "docs/COMPARE.md").read_text(),
               "triage compare --help": help_out.output}
    for name, text in sources.items():
        plain = _plain(text)
        for sentence in (NO_INTERVAL_RULE, INCONCLUSIVE_RULE):
            assert _plain(sentence) in plain, f"{name} does not say: {sentence}"
        # and none of them still says the old rule
        assert "no interval; worse than L is inconclusive" not in plain, name
