"""triage compare on crafted report pairs: each case can fail if the gate is wrong."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.factories import HOST, bench_report, level
from triage.cli import app
from triage.compare import compare_reports
from triage.compare.bench_diff import Verdict
from triage.compare.thresholds import parse_max_regression
from triage.core.errors import ReportError
from triage.core.report import Certainty, Finding, Fix, Report, ReportKind, Severity
from triage.core.report_io import dumps, write_report

RULES = parse_max_regression(None)
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})


def _level(c, scale_ttft=1.0, scale_tpot=1.0, tput=1000.0, n=400, seed=0, samples=True):
    rng = np.random.default_rng(seed)
    ttft = rng.lognormal(np.log(100), 0.25, n) * scale_ttft
    tpot = rng.normal(20, 1.0, n) * scale_tpot
    e2e = ttft + tpot * 127
    return level(c, ttft, tpot, e2e, tput, samples=samples)


def _row(result, level_name, metric):
    return next(m for m in result.metrics if m.level == level_name and m.metric == metric)


def _write(tmp_path, name, report):
    return str(write_report(report, tmp_path / name))


def test_forty_percent_ttft_p99_regression_fails_fifteen_is_inconclusive():
    base = bench_report([_level(1, seed=1), _level(4, seed=2)])
    cand = bench_report([_level(1, seed=1, scale_ttft=1.4), _level(4, seed=2)])
    result = compare_reports(base, cand, RULES)
    row = _row(result, "c=1", "ttft_ms.p99")
    assert row.change_pct == pytest.approx(40.0, abs=0.01)
    assert row.verdict is Verdict.REGRESSION and row.interval.low_pct > 10.0
    # 15% worse on a p99 of 400 requests: the interval reaches below the 10% limit, so the one rule says
    # inconclusive (not regression), and says how many requests would settle it.
    mild = compare_reports(base, bench_report([_level(1, seed=1, scale_ttft=1.15), _level(4, seed=2)]), RULES)
    row15 = _row(mild, "c=1", "ttft_ms.p99")
    assert row15.verdict is Verdict.INCONCLUSIVE and row15.interval.low_pct < 10.0 < row15.interval.high_pct
    assert "requests a side would settle it" in row15.settle
    from triage.compare import InconclusivePolicy
    strict = compare_reports(base, bench_report([_level(1, seed=1, scale_ttft=1.15), _level(4, seed=2)]), RULES,
                             policy=InconclusivePolicy.FAIL)
    assert strict.failures > mild.failures and _row(strict, "c=1", "ttft_ms.p99") in [
        m for m in strict.metrics if strict.failed(m)]
    assert row.p_value_worse is not None and row.p_value_worse < 0.05
    assert _row(result, "c=4", "ttft_ms.p99").verdict is not Verdict.REGRESSION   # the same data on both sides
    assert result.exit_code == 1


def test_three_percent_noise_passes():
    base = bench_report([_level(1, seed=1)])
    cand = bench_report([_level(1, seed=7, scale_ttft=1.03, scale_tpot=1.02, tput=985.0)])
    result = compare_reports(base, cand, RULES)
    assert result.failures == 0, [m for m in result.metrics if m.failed]
    assert result.exit_code == 0


def test_throughput_drop_fails_with_and_without_repeats():
    base = bench_report([_level(4, seed=3, tput=1000.0)])
    cand = bench_report([_level(4, seed=3, tput=900.0)])
    # Without repeats, a closed loop's rate moves with mean E2E (Little's law): the E2E samples give the interval.
    row = _row(compare_reports(base, cand, RULES), "c=4", "output_tokens_per_s")
    assert row.source == "e2e samples (Little's law)" and row.interval.high_pct < 0
    assert row.verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE)

    def with_repeats(report, values):
        lv = report.bench.levels[0]
        from dataclasses import replace
        lv = replace(lv, repeats=[{"output_tokens_per_s": v} for v in values])
        return replace(report, bench=replace(report.bench, levels=(lv,)))

    rng = np.random.default_rng(0)
    base_r = with_repeats(base, 1000 + rng.normal(0, 5, 10))
    cand_r = with_repeats(cand, 900 + rng.normal(0, 5, 10))
    row = _row(compare_reports(base_r, cand_r, RULES), "c=4", "output_tokens_per_s")
    assert row.verdict is Verdict.REGRESSION
    assert row.interval.high_pct < 0


def test_significant_but_tiny_change_passes():
    base = bench_report([_level(1, seed=1, n=4000)])
    cand = bench_report([_level(1, seed=1, n=4000, scale_tpot=1.02)])
    row = _row(compare_reports(base, cand, RULES), "c=1", "tpot_ms.p50")
    assert row.interval.low_pct > 0          # a real, significant change …
    assert row.change_pct < 10.0             # … below the threshold
    assert row.verdict is Verdict.PASS


def test_big_change_on_tiny_noisy_samples_is_inconclusive():
    # 12 requests from a heavy-tailed distribution: the p99s differ a lot by chance alone.
    def lv(seed):
        rng = np.random.default_rng(seed)
        ttft = rng.lognormal(np.log(100), 1.0, 12)
        return level(1, ttft, np.full(12, 20.0), ttft + 2000, 1000.0)

    row = _row(compare_reports(bench_report([lv(10)]), bench_report([lv(11)]), RULES), "c=1", "ttft_ms.p99")
    assert row.change_pct > 10.0
    assert row.verdict is Verdict.INCONCLUSIVE and "would settle it" in row.settle
    assert row.interval.low_pct < 0 < row.interval.high_pct


def test_threshold_override():
    base = bench_report([_level(1, seed=1)])
    cand = bench_report([_level(1, seed=1, scale_ttft=1.15)])
    loose = parse_max_regression("ttft_ms.p99=20%")
    assert _row(compare_reports(base, cand, loose), "c=1", "ttft_ms.p99").verdict is not Verdict.REGRESSION


@pytest.mark.parametrize("spec", ["ttft_ms.p99", "ttft_ms.p42=5%", "nonsense=5%", "ttft_ms.p99=ten"])
def test_bad_max_regression_is_a_usage_error(spec):
    from triage.core.errors import UsageError
    with pytest.raises(UsageError):
        parse_max_regression(spec)


def test_different_model_is_unusable():
    with pytest.raises(ReportError, match="different model"):
        compare_reports(bench_report([_level(1)], model="a"), bench_report([_level(1)], model="b"), RULES)


def test_no_overlapping_levels_is_unusable():
    with pytest.raises(ReportError, match="no bench level appears in both"):
        compare_reports(bench_report([_level(1)]), bench_report([_level(4)]), RULES)


def test_cli_exit_codes(tmp_path):
    base = _write(tmp_path, "base.json", bench_report([_level(1, seed=1), _level(4, seed=2)]))
    same = _write(tmp_path, "same.json", bench_report([_level(1, seed=5), _level(4, seed=6)]))
    worse = _write(tmp_path, "worse.json", bench_report([_level(1, seed=1, scale_ttft=1.3), _level(4, seed=2)]))
    other = _write(tmp_path, "other.json", bench_report([_level(1)], model="other-model"))
    assert runner.invoke(app, ["compare", base, same]).exit_code == 0
    result = runner.invoke(app, ["compare", base, worse])
    assert result.exit_code == 1
    assert "REGRESSION" in result.stdout
    result = runner.invoke(app, ["compare", base, other])
    assert result.exit_code == 2
    assert "different model" in result.stderr and "Traceback" not in result.stderr


def test_truncated_json_exits_2_with_one_line(tmp_path):
    base = _write(tmp_path, "base.json", bench_report([_level(1)]))
    text = dumps(bench_report([_level(1)]))
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 3])
    result = runner.invoke(app, ["compare", base, str(cut)])
    assert result.exit_code == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "not valid JSON" in lines[0], result.stderr


def test_junit_has_one_case_per_metric_and_level_and_counts_failures(tmp_path):
    base = _write(tmp_path, "base.json", bench_report([_level(1, seed=1), _level(4, seed=2)]))
    worse = _write(tmp_path, "worse.json",
                   bench_report([_level(1, seed=1, scale_ttft=1.5), _level(4, seed=2, tput=800.0)]))
    result = runner.invoke(app, ["compare", base, worse, "--format", "junit"])
    assert result.exit_code == 1
    suite = ET.fromstring(result.stdout.split("?>", 1)[1])
    cases = suite.findall("testcase")
    assert len(cases) == 2 * len(RULES)
    failed = [c for c in cases if c.find("failure") is not None]
    assert {(c.get("classname"), c.get("name")) for c in failed} >= {
        ("triage.compare.c=1", "ttft_ms.p99"), ("triage.compare.c=4", "output_tokens_per_s")}
    assert int(suite.get("failures")) == len(failed)
    skipped = [c.find("skipped") for c in cases if c.find("skipped") is not None]
    assert int(suite.get("skipped")) == len(skipped)
    # Failing cases come first; an inconclusive row is skipped with its reason, not failed.
    assert all(c.find("failure") is not None for c in cases[: len(failed)])
    assert any("inconclusive" in s.get("message") and "straddles" in s.get("message") for s in skipped)


def test_markdown_goes_to_github_step_summary_and_json_validates(tmp_path, monkeypatch, report_validator):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    base = _write(tmp_path, "base.json", bench_report([_level(1, seed=1)]))
    worse = _write(tmp_path, "worse.json", bench_report([_level(1, seed=1, scale_ttft=1.3)]))
    out = tmp_path / "compare.json"
    result = runner.invoke(app, ["compare", base, worse, "--format", "markdown", "--json", str(out)])
    assert result.exit_code == 1
    assert "| c=1 | ttft_ms.p99 |" in result.stdout
    assert "ttft_ms.p99" in summary.read_text()
    data = report_validator(json.loads(out.read_text()))
    assert data["kind"] == "compare" and data["compare"]["verdict"] == "fail"


def _diagnose(*findings):
    return Report(kind=ReportKind.DIAGNOSE, triage_version="0.1.0", created_at="2026-11-21T12:00:00Z",
                  command=("triage", "diagnose"), host=HOST, findings=tuple(findings))


def _finding(code, severity):
    return Finding(code, "some-rule", severity, Certainty.LIKELY, f"{code} title", "msg", {}, Fix("fix it"))


def test_diagnose_new_and_resolved_findings(tmp_path):
    base = _write(tmp_path, "b.json", _diagnose(_finding("KV001", Severity.HIGH), _finding("CPU002", Severity.LOW)))
    cand_low = _write(tmp_path, "c1.json", _diagnose(_finding("KV001", Severity.HIGH), _finding("MEM001", Severity.LOW)))
    cand_high = _write(tmp_path, "c2.json", _diagnose(_finding("GPU002", Severity.HIGH)))
    result = runner.invoke(app, ["compare", base, cand_low, "--format", "json"])
    assert result.exit_code == 0
    section = json.loads(result.stdout)["compare"]
    assert section["new"] == ["MEM001"] and section["resolved"] == ["CPU002"] and section["unchanged"] == ["KV001"]
    assert runner.invoke(app, ["compare", base, cand_high]).exit_code == 1
    assert runner.invoke(app, ["compare", base, cand_low, "--fail-on", "low"]).exit_code == 1


def test_mixed_kinds_are_unusable(tmp_path):
    base = _write(tmp_path, "b.json", _diagnose())
    cand = _write(tmp_path, "c.json", bench_report([_level(1)]))
    result = runner.invoke(app, ["compare", base, cand])
    assert result.exit_code == 2 and "cannot compare a diagnose report with a bench report" in result.stderr


def _with_repeats(report, key, values):
    from dataclasses import replace

    lv = replace(report.bench.levels[0], repeats=[{key: float(v)} for v in values])
    return replace(report, bench=replace(report.bench, levels=(lv,)))


def test_three_repeats_judge_throughput_with_welch_t():
    base = bench_report([_level(4, seed=3, tput=1000.0)])
    cand = bench_report([_level(4, seed=3, tput=880.0)])
    base = _with_repeats(base, "output_tokens_per_s", [995.0, 1003.0, 1002.0])
    drop = _with_repeats(cand, "output_tokens_per_s", [876.0, 884.0, 881.0])
    row = _row(compare_reports(base, drop, RULES), "c=4", "output_tokens_per_s")
    assert row.verdict is Verdict.REGRESSION and row.interval.method == "welch-t"
    assert row.interval.low_pct < -12.0 / 1.2 and row.interval.high_pct < 0 and row.p_value_worse < 0.01
    # The same 12% drop in the means, but repeats that scatter by ±15%: not shown to be real.
    noisy = _with_repeats(cand, "output_tokens_per_s", [740.0, 1020.0, 880.0])
    row = _row(compare_reports(base, noisy, RULES), "c=4", "output_tokens_per_s")
    assert row.verdict is Verdict.INCONCLUSIVE
    assert row.interval.low_pct < 0 < row.interval.high_pct


def test_latency_without_samples_falls_back_to_repeats():
    base = bench_report([_level(1, seed=1, samples=False)])
    cand = bench_report([_level(1, seed=1, samples=False, scale_ttft=1.3)])
    p99 = base.bench.levels[0].ttft_ms.p99
    base = _with_repeats(base, "ttft_ms_p99", [p99 * f for f in (0.99, 1.0, 1.01)])
    cand = _with_repeats(cand, "ttft_ms_p99", [p99 * 1.3 * f for f in (0.99, 1.0, 1.01)])
    row = _row(compare_reports(base, cand, RULES), "c=1", "ttft_ms.p99")
    assert row.verdict is Verdict.REGRESSION and row.interval.method == "welch-t"
    assert row.interval.low_pct > 20.0


def test_a_level_twice_in_one_report_is_unusable():
    with pytest.raises(ReportError, match="has level c=1 twice"):
        compare_reports(bench_report([_level(1)]), bench_report([_level(1), _level(1, seed=3)]), RULES)


def test_text_output_at_80_columns_is_compact_and_splits_no_word(tmp_path):
    from triage.compare.section import interval_text, pct, verdict_text

    base_r = bench_report([_level(1, seed=1, tput=123456.7), _level(16, seed=3)])
    cand_r = bench_report([_level(1, seed=1, scale_ttft=1.3, tput=98765.4), _level(16, seed=4, scale_ttft=1.08)])
    base, worse = _write(tmp_path, "base.json", base_r), _write(tmp_path, "worse.json", cand_r)
    wide = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"}).invoke(app, ["compare", base, worse]).stdout
    result = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"}).invoke(app, ["compare", base, worse])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    assert "123,456.7" in wide and "123,456.7" not in result.stdout     # the full table at 200, compact at 80
    assert "…" not in result.stdout
    # One line per metric: its verdict, name, change and interval whole on that line.
    compared = compare_reports(base_r, cand_r, RULES)
    verdicts = {v.value for v in Verdict} | {v.value.upper() for v in Verdict}
    rows = [ln for ln in lines if ln.startswith("  ") and ln.split()[0] in verdicts]
    assert len(rows) == len(compared.metrics)
    for m, line in zip(compared.metrics, rows, strict=False):
        assert line.split()[:2] == [verdict_text(compared, m), m.metric], line
        for part in (pct(m.change_pct), interval_text(m)):
            assert part in line, (part, line)
    # Notes wrap between words only: joined back, every note reads whole.
    flat = " ".join(" ".join(lines).split())
    for note in compared.notes:
        assert " ".join(note.split()) in flat
    for word in ("REGRESSI", "inconclusi"):
        assert not any(ln.rstrip().endswith(word) for ln in lines)


# ---- --input-len sweeps: levels match on (load, prompt length)


def _swept(c, input_len, scale_ttft=1.0, seed=0):
    import dataclasses

    return dataclasses.replace(_level(c, scale_ttft=scale_ttft, seed=seed), input_len=input_len)


def test_sweep_levels_match_on_concurrency_and_prompt_length():
    base = bench_report([_swept(1, 512), _swept(1, 2048, seed=1)])
    # The 2048 level regresses 40%; the 512 level is unchanged. Listed in the other order on purpose.
    cand = bench_report([_swept(1, 2048, scale_ttft=1.4, seed=1), _swept(1, 512)])
    result = compare_reports(base, cand, RULES)
    assert _row(result, "c=1 in=2048", "ttft_ms.p50").verdict is Verdict.REGRESSION
    assert _row(result, "c=1 in=512", "ttft_ms.p50").verdict is Verdict.PASS
    assert {m.level for m in result.metrics} == {"c=1 in=512", "c=1 in=2048"}


def test_a_sweep_and_a_single_length_run_share_no_level():
    with pytest.raises(ReportError, match=r"no bench level appears in both.*c=1 in=512.*candidate: c=1"):
        compare_reports(bench_report([_swept(1, 512), _swept(1, 2048)]), bench_report([_level(1)]), RULES)


def test_the_same_length_twice_is_still_refused():
    with pytest.raises(ReportError, match="c=1 in=512 twice"):
        compare_reports(bench_report([_swept(1, 512), _swept(1, 512)]), bench_report([_swept(1, 512)]), RULES)
