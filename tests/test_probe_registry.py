"""Probes register themselves (probes/registry.py); diagnose runs what is registered, phase by phase."""
from __future__ import annotations

import pytest

from triage.core.errors import UsageError
from triage.diagnose import DiagnoseOptions, collect, discover
from triage.probes.registry import ProbeRun, probes


def test_the_registry_holds_each_probe_once_with_its_phase():
    entries = probes()
    by_name = {e.name: e for e in entries}
    assert len(by_name) == len(entries) == 13
    assert by_name["network"].phase == 0 and by_name["server_config"].phase == 1
    assert by_name["storage"].phase == 3
    assert {e.phase for e in entries} == {0, 1, 2, 3}
    run = ProbeRun(window_s=2.0, grace_s=6.0)
    assert by_name["gpu"].timeout_s(run) == 8.0 and by_name["logs"].timeout_s(run) == 6.0


def test_collect_runs_the_registered_probes_in_report_order():
    opts = DiagnoseOptions(window_s=0, discover=False, bandwidth_budget_s=0.01, skip=("gpu",))
    snapshot = collect(opts, discover(None, look_locally=False))
    assert [p.name for p in snapshot.probes] == [e.name for e in probes() if e.name != "gpu"]


def test_skip_names_an_unknown_probe():
    opts = DiagnoseOptions(window_s=0, discover=False, skip=("gpus",))
    with pytest.raises(UsageError, match="no such probe"):
        collect(opts, discover(None, look_locally=False))
