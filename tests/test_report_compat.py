"""Reports written by triage 0.1.0 (schema_version 1.0, probe data as untyped dicts) still work: `--from`
replays them with the same findings, and `compare` takes a 0.1.0 baseline against a new candidate.
The fixtures under tests/fixtures/reports_0_1_0/ are real 0.1.0 reports (reports/examples and the
kv_saturated golden report as committed before schema 1.1)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
from typer.testing import CliRunner

from triage.cli import app
from triage.core.probe_data import PAYLOAD_TYPES, GpuData, ServerMetricsData
from triage.core.report import SCHEMA_VERSION
from triage.core.report_io import load_schema, read_report, write_report

OLD = Path(__file__).resolve().parent / "fixtures" / "reports_0_1_0"


def cli(*args: str):
    return CliRunner().invoke(app, ["--no-color", *args], env={})


def test_the_fixtures_are_real_0_1_0_reports():
    for path in OLD.glob("*.json"):
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert raw["schema_version"] == "1.0" and raw["triage_version"] == "0.1.0"
        jsonschema.Draft202012Validator(load_schema("1.0")).validate(raw)


def test_a_0_1_0_report_reads_into_typed_payloads():
    report = read_report(OLD / "diagnose_kv_saturated.json")
    by_name = {p.name: p for p in report.probes}
    for name, probe in by_name.items():
        assert probe.data is None or isinstance(probe.data, PAYLOAD_TYPES[name]), name
    metrics = by_name["server_metrics"].data
    assert isinstance(metrics, ServerMetricsData) and metrics.num_requests_waiting_max is not None
    gpu = by_name["gpu"].data
    assert isinstance(gpu, GpuData) and gpu.gpus[0].memory_total_bytes > 0


def test_from_replays_a_0_1_0_report_with_the_same_findings(tmp_path, report_validator):
    old = OLD / "diagnose_kv_saturated.json"
    before = json.loads(old.read_text(encoding="utf-8"))
    out = tmp_path / "replayed.json"
    # The golden report carries the bench it was judged with: the replay judges it again, so the rules see the
    # same inputs.
    result = cli("diagnose", "--from", str(old), "--json", str(out))
    assert result.exit_code == 0, result.output
    after = json.loads(out.read_text(encoding="utf-8"))
    assert after["schema_version"] == SCHEMA_VERSION
    report_validator(after)
    assert [f["code"] for f in after["findings"]] == [f["code"] for f in before["findings"]]
    # Rules added since 0.1.0 (the --active ones, history, replicas, topologies) are skipped on a passive
    # snapshot; the rest match.
    added = {"GPU014", "GPU015", "MEM003", "NET004", "HIST001", "FLEET001", "ENG008", "NET005", "ENG009",
             "TOPO001", "TOPO002", "TOPO003", "TOPO004", "TOPO005",
             "KV007", "ENG010", "ENG011", "ENG012", "NET006"}   # the log's events: a 0.1.0 report did not record them
    assert {s["code"] for s in after["skipped_rules"]} - added == {s["code"] for s in before["skipped_rules"]}


def test_compare_takes_a_0_1_0_baseline_against_a_new_candidate(tmp_path):
    base = OLD / "bench.json"
    candidate = tmp_path / "candidate.json"
    # The same run, written by this triage (schema_version as this triage writes it).
    write_report(dataclasses.replace(read_report(base), schema_version=SCHEMA_VERSION), candidate)
    assert json.loads(candidate.read_text(encoding="utf-8"))["schema_version"] == SCHEMA_VERSION
    result = cli("compare", str(base), str(candidate), "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["kind"] == "compare"
