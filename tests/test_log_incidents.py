"""A log alone names the cause: real incidents from public threads (tests/incidents/), each diagnosed with
`diagnose --from` semantics (no probe of this host), must give the thread's cause with the engine's own fix at
the log's version; healthy starts and harmless warnings must give nothing above LOW."""
from __future__ import annotations

import pytest

from tests.factories import fix_lines
from tests.incidents import FIXTURES, all_incidents
from triage.core.probe_data import LogsData
from triage.core.report import Severity
from triage.diagnose.from_files import diagnose_logs
from triage.engines import normalise

INCIDENTS = all_incidents()
PROBLEMS = [i for i in INCIDENTS if i.code is not None]
QUIET = [i for i in INCIDENTS if i.code is None]


def _diagnose(incident):
    path = FIXTURES / f"{incident.name}.log"
    return diagnose_logs([path], None, None, None)


def test_the_corpus_is_the_size_the_issue_asks_for():
    engines = {normalise(i.engine) for i in PROBLEMS}
    assert len(PROBLEMS) >= 30 and len([i for i in QUIET if i.name.split("-")[1] == "healthy"
                                        or "healthy" in i.name]) >= 6
    assert {"vllm", "sglang", "tgi", "llama.cpp", "ollama"} <= engines | {normalise(i.engine) for i in QUIET}
    assert all(i.url.startswith("https://github.com/") for i in INCIDENTS)


def test_the_fixture_files_are_built_from_the_cases():
    """Regenerate with `python -m tests.incidents` after editing a case."""
    for incident in INCIDENTS:
        path = FIXTURES / f"{incident.name}.log"
        assert path.is_file(), f"{path} is missing: python -m tests.incidents"
        assert path.read_text(encoding="utf-8") == incident.text(), f"{path} is stale: python -m tests.incidents"
    assert len(list(FIXTURES.glob("*.log"))) == len(INCIDENTS)


def _text(finding) -> str:
    parts = [finding.title, finding.message, finding.fix.text, *fix_lines(finding.fix),
             *(f"{k} {v}" for k, v in finding.evidence.items())]
    return " ".join(str(p) for p in parts).lower()


@pytest.mark.parametrize("incident", PROBLEMS, ids=lambda i: i.name)
def test_a_log_alone_names_the_cause(incident):
    result = _diagnose(incident)
    logs = result.snapshot.payload(LogsData)
    assert logs is not None
    assert normalise(logs.engine) == (normalise(incident.engine) if incident.named else None), logs.engine
    found = {f.code: f for f in result.report.findings}
    assert incident.code in found, (f"{incident.name}: {incident.code} did not fire; got {sorted(found)}; skipped: "
                                    f"{[(s.code, s.reason) for s in result.report.skipped_rules if s.code == incident.code]}")
    finding = found[incident.code]
    text = _text(finding)
    for want in incident.fix_contains:
        assert want.lower() in " ".join((finding.fix.text, *fix_lines(finding.fix))).lower(), (want, finding.fix)
    for want in incident.text_contains:
        assert want.lower() in text, (want, text)
    if incident.severity is not None:
        assert finding.severity.value == incident.severity, (finding.severity, finding.title)
    for code in incident.quiet:
        assert code not in found, f"{code} fired: {found[code].title}"


@pytest.mark.parametrize("incident", QUIET, ids=lambda i: i.name)
def test_a_healthy_log_or_a_harmless_warning_stays_quiet(incident):
    result = _diagnose(incident)
    loud = [f"{f.severity.value} {f.code} {f.title}" for f in result.report.findings
            if f.severity.rank < Severity.LOW.rank]
    assert not loud, loud
    for code in incident.quiet:
        assert code not in {f.code for f in result.report.findings}
    logs = result.snapshot.payload(LogsData)
    assert logs is not None and normalise(logs.engine) == normalise(incident.engine)


@pytest.mark.parametrize("incident", [i for i in INCIDENTS if i.version and i.version in "\n".join(i.lines)],
                         ids=lambda i: i.name)
def test_the_version_is_read_where_the_log_prints_it(incident):
    logs = _diagnose(incident).snapshot.payload(LogsData)
    assert logs.engine_version == incident.version


def test_each_finding_says_which_file_and_line_it_came_from():
    incident = next(i for i in PROBLEMS if i.name == "vllm-v0-kv-below-max-len-7526")
    finding = next(f for f in _diagnose(incident).report.findings if f.code == "KV007")
    at = finding.evidence["logs.kv_below_max_len.at"]
    path, line = at.rsplit(":L", 1)
    assert path.endswith(f"{incident.name}.log")
    assert "max seq len (30000)" in (FIXTURES / f"{incident.name}.log").read_text().splitlines()[int(line) - 1]


def test_nothing_about_this_host_is_reported_as_the_deployments():
    result = _diagnose(PROBLEMS[0])
    assert {p.name for p in result.report.probes} == {"server_config", "logs"}
    assert result.report.host.cpu_model is None and result.report.host.gpus == ()
    assert "unknown" in result.report.host.hostname
