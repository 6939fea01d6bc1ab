"""`triage watch --print-alert-rules`, checked by the real promtool: the file is valid, and its unit tests
prove the 7-day-offset TTFT alert fires on a 30% rise, stays quiet on noise, and stays quiet when traffic
explains the rise (tests need Debian's `prometheus` package; they skip with the reason without it)."""
from __future__ import annotations

import subprocess

import yaml
from typer.testing import CliRunner

import triage.engines.truth as truth
from tests.live_prometheus import PROMTOOL, needs_promtool
from triage.cli import app
from triage.watch import alert_rules

WEEK_MIN = 7 * 1440
TOTAL_MIN = WEEK_MIN + 180        # a week and three hours of 1-minute samples
CHANGED_MIN = 60                  # the last hour is different
EVAL_MIN = TOTAL_MIN - 5
BUCKETS = ("0.5", "1", "2", "+Inf")


def counter(before_per_min: float, after_per_min: float) -> str:
    """promtool's expanding notation for a counter whose per-minute rise changes for the last hour."""
    n1 = TOTAL_MIN - CHANGED_MIN
    start2 = before_per_min * n1 + after_per_min
    return f"0+{before_per_min:g}x{n1} {start2:g}+{after_per_min:g}x{CHANGED_MIN - 1}"


def p99(cumulative: dict[str, float]) -> float:
    """histogram_quantile(0.99) for per-minute bucket increments (Prometheus' linear interpolation)."""
    total, rank, lower, below = cumulative["+Inf"], 0.99 * cumulative["+Inf"], 0.0, 0.0
    for le in BUCKETS[:-1]:
        if cumulative[le] >= rank:
            return lower + (float(le) - lower) * (rank - below) / (cumulative[le] - below)
        lower, below = float(le), cumulative[le]
    raise AssertionError(total)


BEFORE = {"0.5": 900, "1": 1000, "2": 1000, "+Inf": 1000}
SLOWER = {"0.5": 0, "1": 987, "2": 1000, "+Inf": 1000}      # p99 0.95 s -> 1.23 s: +30%
NOISY = {"0.5": 700, "1": 1000, "2": 1000, "+Inf": 1000}    # p99 0.95 s -> 0.98 s: +3.5%
# instance: (TTFT buckets after, requests per minute before, after)
INSTANCES = {"regressed": (SLOWER, 1000, 1000), "noise": (NOISY, 1000, 1080), "busier": (SLOWER, 1000, 1800)}


def unit_test_file(rules_path: str) -> dict:
    ttft = alert_rules.vllm_series("vllm:time_to_first_token_seconds")
    requests = alert_rules.vllm_series("vllm:request_success")
    generation = alert_rules.vllm_series("vllm:generation_tokens")
    series = []
    for instance, (after, rate_before, rate_after) in INSTANCES.items():
        scale = rate_after / 1000
        for le in BUCKETS:
            series.append({"series": f'{ttft}{{instance="{instance}",model_name="m",le="{le}"}}',
                           "values": counter(BEFORE[le], after[le] * scale)})
        series.append({"series": f'{requests}{{instance="{instance}",model_name="m"}}',
                       "values": counter(rate_before, rate_after)})
        series.append({"series": f'{generation}{{instance="{instance}",model_name="m"}}',
                       "values": counter(rate_before * 50, rate_after * 50)})
    series.append({"series": 'triage_finding{code="KV001",severity="high",certainty="confirmed",engine="vllm",'
                             'model="m",instance="w1"}', "values": "1x20"})
    rule = next(r for r in alert_rules.regression_alerts() if r["alert"] == "TriageTTFTRegressionWeekOverWeek")
    annotations = {k: v.replace("{{ $labels.instance }}", "regressed") for k, v in rule["annotations"].items()}
    finding = next(r for r in alert_rules.finding_alerts() if r["alert"] == "TriageFindingHigh")
    finding_annotations = {k: v.replace("{{ $labels.code }}", "KV001").replace("{{ $labels.instance }}", "w1")
                           for k, v in finding["annotations"].items()}
    return {
        "rule_files": [rules_path],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": f"{EVAL_MIN}m", "alertname": "TriageTTFTRegressionWeekOverWeek",
                 "exp_alerts": [{"exp_labels": {"severity": "high", "instance": "regressed", "model_name": "m"},
                                 "exp_annotations": annotations}]},
                # An hour before the change nothing differs from last week: quiet everywhere.
                {"eval_time": f"{TOTAL_MIN - CHANGED_MIN - 30}m", "alertname": "TriageTTFTRegressionWeekOverWeek",
                 "exp_alerts": []},
                {"eval_time": f"{EVAL_MIN}m", "alertname": "TriageThroughputRegressionWeekOverWeek", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "TriageFindingHigh",
                 "exp_alerts": [{"exp_labels": {"severity": "high", "code": "KV001", "engine": "vllm", "model": "m",
                                                "instance": "w1"}, "exp_annotations": finding_annotations}]},
                {"eval_time": "3m", "alertname": "TriageFindingHigh", "exp_alerts": []},   # not yet `for` 5m
            ],
        }],
    }


def test_the_planted_series_are_what_the_test_says():
    base = p99(BEFORE)
    assert abs(p99(SLOWER) / base - 1.30) < 0.01
    assert p99(NOISY) / base < 1.05
    assert alert_rules.TTFT_RISE_X < 1.30 < alert_rules.TTFT_RISE_X + 0.1


def test_print_alert_rules_is_yaml_with_an_alert_per_severity_and_engine_names_from_the_tables():
    result = CliRunner().invoke(app, ["watch", "--print-alert-rules"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.output)
    groups = {g["name"]: g["rules"] for g in doc["groups"]}
    assert {r["alert"] for r in groups["triage-findings"]} == {
        "TriageFindingCritical", "TriageFindingHigh", "TriageFindingMedium", "TriageFindingLow", "TriageFindingInfo"}
    regressions = " ".join(r["expr"] for r in groups["triage-regressions"])
    assert "offset 7d" in regressions
    names = set(truth.metric_names("vllm", truth.newest("vllm")))
    for series in ("vllm:time_to_first_token_seconds_bucket", "vllm:request_success_total",
                   "vllm:generation_tokens_total", "vllm:prompt_tokens_total"):
        assert series in result.output
        assert series.removesuffix("_bucket").removesuffix("_total") in names


@needs_promtool
def test_promtool_checks_the_rules_file(tmp_path):
    path = tmp_path / "triage-rules.yml"
    path.write_text(alert_rules.rules_yaml())
    out = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def promtool_test_rules(tmp_path) -> subprocess.CompletedProcess:
    """`promtool test rules` on the generated rules file and the unit tests of unit_test_file()."""
    rules = tmp_path / "triage-rules.yml"
    rules.write_text(alert_rules.rules_yaml())
    tests = tmp_path / "triage-rules.test.yml"
    tests.write_text(yaml.safe_dump(unit_test_file(rules.name), sort_keys=False, width=400))
    return subprocess.run([PROMTOOL, "test", "rules", str(tests)], capture_output=True, text=True, timeout=240,
                          cwd=tmp_path)


@needs_promtool
def test_promtool_unit_tests_fire_on_a_30_percent_ttft_rise_and_stay_quiet_on_noise_and_traffic(tmp_path):
    out = promtool_test_rules(tmp_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "SUCCESS" in out.stdout


@needs_promtool
def test_promtool_unit_test_fails_when_the_alert_is_wrong(tmp_path, monkeypatch):
    """The unit test can fail: with the threshold at 1.35x the 30% rise no longer fires."""
    monkeypatch.setattr(alert_rules, "TTFT_RISE_X", 1.35)
    assert promtool_test_rules(tmp_path).returncode != 0
