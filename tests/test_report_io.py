import json
from pathlib import Path

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
    with pytest.raises(ReportError, match=r"probes.0.status: .weird. is not one of"):
        loads(json.dumps(data))


# -- hostile report files (issue: compare on wrongly typed fields ended in AttributeError/TypeError) ----
@pytest.mark.parametrize("mutate, where", [
    (lambda d: d.update(kind=None), "kind"),
    (lambda d: d["bench"]["levels"][0]["ttft_ms"].update(p99="12.5"), "bench.levels.0.ttft_ms.p99"),
    (lambda d: d["bench"].update(levels=None), "bench.levels"),
    (lambda d: d["bench"]["levels"][0].update(concurrency="4"), "bench.levels.0.concurrency"),
])
def test_a_wrongly_typed_report_is_one_line_naming_the_field(mutate, where, tmp_path):
    import json as _json

    from triage.core.report_io import read_report

    data = _json.loads((Path(__file__).parent.parent / "reports" / "examples" / "bench.json").read_text())
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(_json.dumps(data))
    with pytest.raises(ReportError) as info:
        read_report(path)
    message = str(info.value)
    assert "\n" not in message and where.split(".")[0] in message, message


def test_compare_on_a_wrongly_typed_report_exits_2_with_one_line(tmp_path):
    import json as _json
    import subprocess
    import sys

    good = Path(__file__).parent.parent / "reports" / "examples" / "bench.json"
    data = _json.loads(good.read_text())
    data["bench"]["levels"][0]["concurrency"] = "4"
    bad = tmp_path / "bad.json"
    bad.write_text(_json.dumps(data))
    out = subprocess.run([sys.executable, "-m", "triage", "compare", str(good), str(bad)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "unexpected" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "concurrency" in out.stderr


def test_non_finite_numbers_are_written_as_null():
    from triage.core.convert import to_dict

    assert to_dict({"a": float("nan"), "b": [float("inf"), 1.5]}) == {"a": None, "b": [None, 1.5]}


def test_a_report_is_written_with_the_mode_a_plain_write_gives(tmp_path):
    """bench.json and diagnose.json used to be 0600 (mkstemp's) while every other output was 0644."""
    import os
    import stat

    from triage.core.report import ReportKind, Target, new_report
    from triage.core.report_io import write_report
    from triage.diagnose.from_files import unknown_host

    old = os.umask(0o022)
    try:
        path = write_report(new_report(ReportKind.DIAGNOSE, unknown_host(), Target()), tmp_path / "r.json")
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o644
