"""Golden reports for three end-to-end scenarios. Regenerate: `pytest tests/golden --regen-golden`
(or TRIAGE_REGEN_GOLDEN=1 pytest tests/golden). Review the diff before committing it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.factories import offers
from tests.golden.scenarios import SCENARIOS, build, rendered

HERE = Path(__file__).resolve().parent


def _regen(request) -> bool:
    flag = request.config.getoption("--regen-golden", default=False)
    return bool(flag) or os.environ.get("TRIAGE_REGEN_GOLDEN") == "1"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_report(name, request, report_validator):
    report = build(name)
    report_validator(report)
    texts = rendered(report)
    for ext, text in texts.items():
        path = HERE / f"{name}.{ext}"
        if _regen(request):
            path.write_text(text, encoding="utf-8")
            continue
        assert path.exists(), f"{path.name} is missing: run `pytest tests/golden --regen-golden`"
        assert text == path.read_text(encoding="utf-8"), \
            f"{path.name} differs from the golden copy; if the change is intended, regenerate and review the diff"


def test_kv_saturated_story():
    codes = [f.code for f in build("kv_saturated_vllm").findings]
    by = {f.code: f for f in build("kv_saturated_vllm").findings}
    assert codes[:2] == ["KV002", "KV001"]
    assert {"KV003", "KV004", "KV006", "SCHED003", "BENCH003"} <= set(codes)
    assert set(by["KV001"].explains) >= {"SCHED003", "BENCH003", "KV002"}
    assert offers(by["KV003"].fix, "--max-model-len 5120")
    assert offers(by["KV006"].fix, "--gpu-memory-utilization 0.92")
    assert by["KV003"].explains == ("KV001", "KV002")


def test_degraded_pcie_story():
    by = {f.code: f for f in build("degraded_pcie_under_load").findings}
    assert by["GPU004"].severity.value == "high"
    assert set(by["GPU004"].explains) == {"ENG002", "BENCH003"}
    assert "KV001" not in by


def test_non_batching_story():
    findings = build("non_batching_server").findings
    by = {f.code: f for f in findings}
    assert findings[0].code == "ENG001"
    assert by["ENG001"].certainty.value == "confirmed"
    assert set(by["ENG001"].explains) >= {"SCHED004", "GPU008", "BENCH003"}
    assert by["SCHED004"].evidence["derived.scaling_x"] < 2
