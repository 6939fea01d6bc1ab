import json

import numpy as np
import pytest

from tests.factories import HOST, bench_report, level
from triage.core.errors import ReportError
from triage.core.report import Certainty, Finding, Fix, Report, ReportKind, Severity
from triage.core.report_io import dumps, loads, read_report, write_report
from triage.core.snapshot import ProbeResult, ProbeStatus


def _diagnose() -> Report:
    return Report(
        kind=ReportKind.DIAGNOSE, triage_version="0.1.0", created_at="2026-11-21T12:00:00Z",
        command=("triage", "diagnose"), host=HOST,
        probes=(ProbeResult("gpu", ProbeStatus.UNSUPPORTED, 0.01, "libnvidia-ml.so.1 not found", {}),),
        findings=(Finding("KV001", "kv-cache-saturated", Severity.HIGH, Certainty.CONFIRMED, "KV cache full",
                          "KV usage 97% with 12 waiting", {"kv_cache_usage_pct": 97.0},
                          Fix("Give the KV cache more room", ("--gpu-memory-utilization 0.92",))),),
    )


def test_diagnose_round_trips_and_validates(report_validator):
    report = _diagnose()
    back = loads(dumps(report))
    assert back == report
    assert back.probes[0].status is ProbeStatus.UNSUPPORTED
    assert back.findings[0].severity is Severity.HIGH
    report_validator(back)


def test_bench_round_trips_and_validates(report_validator, tmp_path):
    rng = np.random.default_rng(0)
    report = bench_report([level(c, rng.normal(100, 5, 50), rng.normal(20, 1, 50), rng.normal(2000, 50, 50), 300.0 * c)
                           for c in (1, 4)])
    path = write_report(report, tmp_path / "sub" / "bench.json")
    back = read_report(path)
    assert back == report
    assert back.bench.levels[1].concurrency == 4
    report_validator(back)


def test_schema_rejects_a_bad_severity(report_validator):
    data = json.loads(dumps(_diagnose()))
    data["findings"][0]["severity"] = "urgent"
    with pytest.raises(AssertionError, match="urgent"):
        report_validator(data)


def test_truncated_json_is_a_report_error():
    text = dumps(_diagnose())
    with pytest.raises(ReportError, match="not valid JSON"):
        loads(text[: len(text) // 2], "base.json")


def test_schema_major_mismatch_is_refused():
    data = json.loads(dumps(_diagnose()))
    data["schema_version"] = "2.0"
    with pytest.raises(ReportError, match="incompatible"):
        loads(json.dumps(data))


def test_unknown_fields_are_ignored_within_major():
    data = json.loads(dumps(_diagnose()))
    data["schema_version"] = "1.7"
    data["a_future_field"] = {"x": 1}
    assert loads(json.dumps(data)).kind is ReportKind.DIAGNOSE


def test_missing_file_is_a_report_error(tmp_path):
    with pytest.raises(ReportError, match="no such file"):
        read_report(tmp_path / "nope.json")


def test_bad_enum_value_names_the_choices():
    data = json.loads(dumps(_diagnose()))
    data["probes"][0]["status"] = "weird"
    with pytest.raises(ReportError, match="not one of ok, unsupported"):
        loads(json.dumps(data))
