"""reports/examples/ holds real output of each command; each must load and validate against the schema."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.core.report import ReportKind
from triage.core.report_io import read_report

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
FILES = sorted(EXAMPLES.glob("*.json"))


def test_there_is_an_example_of_each_kind_users_read():
    kinds = {read_report(p).kind for p in FILES}
    assert {ReportKind.DIAGNOSE, ReportKind.BENCH, ReportKind.BASELINE, ReportKind.PLAN} <= kinds


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_example_loads_and_validates(path, report_validator):
    report = read_report(path)
    report_validator(json.loads(path.read_text()))
    if report.kind is ReportKind.BENCH:
        assert len(report.bench.levels) >= 2
        assert all(lv.requests.completed > 0 for lv in report.bench.levels)
    if report.kind is ReportKind.DIAGNOSE:
        assert report.probes, "a diagnose example without probe results shows nothing"


def test_examples_carry_no_secrets():
    import re
    text = "\n".join(p.read_text() for p in FILES)
    for pattern in (r"\bsk-[A-Za-z0-9_-]{8,}", r"\bhf_[A-Za-z0-9]{20,}", r"Bearer \S{8,}"):
        assert not re.search(pattern, text), pattern


def test_the_bench_examples_cover_every_workload_users_ask_about():
    workloads = [read_report(p).bench.config.workload for p in FILES if read_report(p).kind is ReportKind.BENCH]
    kinds = {w.kind for w in workloads if w is not None}
    assert {"synthetic", "multi_turn", "trace"} <= kinds
    found = [read_report(p) for p in FILES if read_report(p).kind is ReportKind.BENCH
             and (read_report(p).bench.summary or {}).get("find_max")]
    assert found and found[0].bench.summary["find_max"]["answer"] is not None


def test_the_demo_closing_hint_names_a_command_that_runs_here():
    """After `make demo`, `triage` is not on PATH: the hint names .venv/bin/triage (or python -m triage)."""
    import importlib.util
    import shlex
    import subprocess

    spec = importlib.util.spec_from_file_location("demo", Path(__file__).resolve().parents[1] / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    hint = demo.closing_hint()
    command = shlex.split(hint.split(": ", 1)[1].split(" compare ")[0])
    assert command != ["triage"], hint
    assert subprocess.run([*command, "--version"], capture_output=True, timeout=60).returncode == 0, hint
