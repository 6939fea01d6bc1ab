"""Logs arrive mangled: the same log, pasted any of the ways people paste it, gives the same findings.

Each transform is what a real channel does to a log (tests/incidents/ for the logs themselves): a terminal's
colours, a Markdown ticket, `docker compose logs`, `kubectl logs --prefix`, a cluster logger's JSON lines, a web
console's newest-first order, Windows line ends, a page that wraps long lines, and a pod that restarted."""
from __future__ import annotations

import json

import pytest

from tests.factories import offers
from tests.incidents import FIXTURES, all_incidents
from triage.core.log_text import plain_lines
from triage.core.probe_data import LogsData
from triage.diagnose.from_files import diagnose_logs


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("# ")]


def ansi(lines: list[str]) -> str:
    return "\n".join(f"\x1b[32m{line[:4]}\x1b[0m{line[4:]}" for line in lines)


def markdown(lines: list[str]) -> str:
    quoted = [f"> {line}" for line in lines]
    return "**Server log:**\n\n```text\n" + "\n".join(quoted) + "\n```\n"


def compose(lines: list[str]) -> str:
    return "\n".join(f"vllm-server-1  | {line}" for line in lines)


def kubectl(lines: list[str]) -> str:
    return "\n".join(f"[pod/inference-7d9f/server] {line}" for line in lines)


def json_lines(lines: list[str]) -> str:
    return "\n".join(json.dumps({"log": line + "\n", "stream": "stderr", "time": "2025-01-01T00:00:00Z"})
                     for line in lines)


def crlf(lines: list[str]) -> str:
    return "\r\n".join(lines) + "\r\n"


def wrapped(lines: list[str]) -> str:
    """A page that wraps at 120 columns, breaking at a space where it can."""
    out = []
    for line in lines:
        while len(line) > 120:
            cut = line.rfind(" ", 60, 120)
            cut = cut if cut > 0 else 120
            out.append(line[:cut])
            line = line[cut:].lstrip()
        out.append(line)
    return "\n".join(out)


TRANSFORMS = {"ansi": ansi, "markdown": markdown, "compose": compose, "kubectl": kubectl, "json": json_lines,
              "crlf": crlf, "wrapped": wrapped}
INCIDENTS = all_incidents()


def _findings(path) -> tuple[set[tuple[str, str]], str | None, str | None]:
    result = diagnose_logs([path], None, None, None)
    logs = result.snapshot.payload(LogsData)
    return ({(f.code, f.severity.value) for f in result.report.findings}, logs.engine if logs else None,
            logs.engine_version if logs else None)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_the_same_log_pasted_any_way_gives_the_same_findings(tmp_path, name):
    differ = []
    for incident in INCIDENTS:
        lines = _body(incident.text())
        want = _findings(FIXTURES / f"{incident.name}.log")
        path = tmp_path / f"{incident.name}.{name}.log"
        path.write_text(TRANSFORMS[name](lines), encoding="utf-8", newline="")
        got = _findings(path)
        if got != want:
            differ.append(f"{incident.name}: {sorted(want[0])} {want[1:]} -> {sorted(got[0])} {got[1:]}")
    assert not differ, "\n".join(differ)


def test_newest_first_is_put_back_in_order(tmp_path):
    """A web console lists the newest line first: the time stamps tell, and the log is read oldest first."""
    checked = 0
    for incident in INCIDENTS:
        lines = _body(incident.text())
        stamped = [line for line in lines if plain_lines(line) and any(c.isdigit() for c in line[:30])]
        if len(stamped) < 4 or len(stamped) != len(lines):
            continue
        want = _findings(FIXTURES / f"{incident.name}.log")
        path = tmp_path / f"{incident.name}.reversed.log"
        path.write_text("\n".join(reversed(lines)), encoding="utf-8")
        assert _findings(path) == want, incident.name
        checked += 1
    assert checked >= 3


def test_a_pod_that_restarted_is_judged_on_its_last_start(tmp_path):
    """Several starts in one file: the last one is judged and the earlier ones are counted as restarts."""
    failed = _body(next(i for i in INCIDENTS if i.name == "vllm-v0-kv-below-max-len-7526").text())
    healthy = _body(next(i for i in INCIDENTS if i.name == "vllm-v0-healthy-11903").text())
    path = tmp_path / "restarted.log"
    path.write_text("\n".join(failed + healthy), encoding="utf-8")
    result = diagnose_logs([path], None, None, None)
    logs = result.snapshot.payload(LogsData)
    assert logs.num_restarts == 1
    assert "KV007" not in {f.code for f in result.report.findings}, "the failed start was before the restart"
    path.write_text("\n".join(healthy + failed), encoding="utf-8")
    result = diagnose_logs([path], None, None, None)
    kv007 = next(f for f in result.report.findings if f.code == "KV007")
    assert "1 earlier start" in kv007.message


def test_a_rotated_log_given_in_parts_is_one_log(tmp_path):
    lines = _body(next(i for i in INCIDENTS if i.name == "vllm-v0-no-cache-memory-13882").text())
    first, second = tmp_path / "server.log.1", tmp_path / "server.log"
    first.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[3:]) + "\n", encoding="utf-8")
    result = diagnose_logs([first, second], None, None, None)
    eng010 = next(f for f in result.report.findings if f.code == "ENG010")
    assert offers(eng010.fix, "--gpu-memory-utilization 0.75")
    assert eng010.evidence["logs.no_cache_memory.at"] == f"{second}:L{len(lines) - 3}"
