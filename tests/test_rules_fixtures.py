"""Every rule against its own fixtures, with only that rule enabled (tests/fixtures/rules/<CODE>/*.json).

The fixtures are written by tests/rules_fixtures.py; a test below checks they are in sync with it.
"""
from __future__ import annotations

import json

import pytest

from tests.factories import fix_lines, offers
from tests.rules_fixtures import CASES, FIXTURES, load_case
from triage.rules import evaluate

FILES = sorted(FIXTURES.glob("*/*.json"))


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_rule_fixture(path):
    snap, bench, baseline, config, expect = load_case(path)
    code = path.parent.name
    result = evaluate(snap, bench=bench, baseline=baseline, config=config)
    assert all(f.code == code for f in result.findings), "only the rule under test may run"
    skipped = {s.code: s.reason for s in result.skipped}
    assert not any("internal error" in r for r in skipped.values()), skipped
    if expect["fires"]:
        assert code not in skipped, f"{code} was skipped: {skipped.get(code)}"
        assert len(result.findings) == 1, f"{code} did not fire"
        f = result.findings[0]
        if "severity" in expect:
            assert f.severity.value == expect["severity"]
        if "certainty" in expect:
            assert f.certainty.value == expect["certainty"]
        if "kind" in expect:
            assert f.kind.value == expect["kind"]
        for key in expect.get("evidence_keys", []):
            assert key in f.evidence, f"evidence lacks {key}: {sorted(f.evidence)}"
        for cmd in expect.get("commands", []):
            assert offers(f.fix, cmd), f"{cmd!r} not in {fix_lines(f.fix)}"
        for text in expect.get("text_contains", []):
            assert text in f.fix.text + " " + f.message, f"{text!r} not in the fix or message"
        assert f.title and f.message and f.fix.text
    else:
        assert not result.findings, f"{code} fired: {result.findings[0].message}"
        if "skipped_reason" in expect:
            assert code in skipped, f"{code} should have been skipped"
            assert expect["skipped_reason"].lower() in skipped[code].lower(), skipped[code]
        else:
            assert code not in skipped, f"{code} was skipped, not passed: {skipped.get(code)}"


def test_fixture_files_match_the_builder():
    """The checked-in JSON is what tests/rules_fixtures.py writes (run `python -m tests.rules_fixtures`)."""
    on_disk = {(p.parent.name, p.stem): json.loads(p.read_text()) for p in FILES}
    built = {(code, name): json.loads(json.dumps(body)) for code, name, body in CASES}
    assert on_disk.keys() == built.keys()
    stale = [k for k in built if on_disk[k] != built[k]]
    assert not stale, f"stale fixtures, regenerate them: {stale[:5]}"


def test_a_case_that_names_a_field_the_types_do_not_have_fails_when_it_is_built():
    """The cases are typed edits (tests/rule_cases/_build.py): a renamed field cannot leave a dead key behind."""
    import pytest

    from tests.rule_cases._build import replace_path
    from tests.rule_cases._healthy import healthy_probes

    gpu = next(p for p in healthy_probes().values() if type(p).__name__ == "GpuData")
    assert replace_path(gpu, "gpus[0]", utilization_gpu_pct=5.0).gpus[0].utilization_gpu_pct == 5.0
    with pytest.raises(TypeError):
        replace_path(gpu, "gpus[0]", utilization_gpu_pctx=5.0)
    with pytest.raises(AttributeError):
        replace_path(gpu, "gpuz[0]", utilization_gpu_pct=5.0)
