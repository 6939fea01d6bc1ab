"""`triage diagnose --prometheus` against the real Prometheus, its history backfilled with
`promtool tsdb create-blocks-from openmetrics`: 8 days of vLLM and DCGM series with a TTFT jump planted in
the last hour. The traffic-caused variant is told apart from the server-side one."""
from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from typer.testing import CliRunner

from tests.history_series import openmetrics
from tests.live_prometheus import PROMTOOL, needs_prometheus, prometheus
from triage.cli import app

pytestmark = [pytest.mark.slow, needs_prometheus]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("history")
    end = int(time.time()) // 120 * 120 - 600
    (tmp / "series.om").write_text(openmetrics(end))
    blocks = tmp / "data"
    out = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(tmp / "series.om"), str(blocks)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    with prometheus(tmp, storage=blocks, retention="30d") as url:
        yield url, end


def _diagnose(url: str, at: int, instance: str, tmp_path) -> tuple[dict, str]:
    path = tmp_path / f"{instance}.json"
    result = CliRunner().invoke(app, ["diagnose", "--prometheus", url, "--window", "1h", "--against", "7d",
                                      "--at", str(at), "--selector", f'instance="{instance}"',
                                      "--gpu-selector", f'Hostname="{instance}"', "--json", str(path)])
    assert result.exit_code in (0, 1), result.output
    return json.loads(path.read_text()), result.output


def test_a_server_side_jump_is_named_and_pointed_at_the_server_or_hardware(history, tmp_path):
    url, end = history
    report, output = _diagnose(url, end, "server", tmp_path)
    hist = next(f for f in report["findings"] if f["code"] == "HIST001")
    assert hist["severity"] == "high" and hist["evidence"]["derived.explained_by"] == "server or hardware"
    assert re.search(r"What moved: .*GPU SM clock -(2[6-9]|30)%", hist["message"]), hist["message"]
    assert hist["evidence"]["derived.latency_rise_x"] >= 1.25
    assert "What changed (now vs then):" in output and "TTFT p99" in output
    assert report["target"]["engine"] == "vllm"


def test_a_traffic_jump_is_said_to_be_explained_by_traffic(history, tmp_path):
    url, end = history
    report, _ = _diagnose(url, end, "traffic", tmp_path)
    hist = next(f for f in report["findings"] if f["code"] == "HIST001")
    assert hist["severity"] == "medium" and hist["evidence"]["derived.explained_by"] == "traffic"
    assert "requests/s +50%" in hist["message"] and "prompt tokens per request +100%" in hist["message"]


def test_a_quiet_week_raises_nothing_and_an_empty_selector_is_a_clear_error(history, tmp_path):
    url, end = history
    report, _ = _diagnose(url, end - 3 * 3600, "server", tmp_path)     # before the jump: same as last week
    assert not [f for f in report["findings"] if f["code"] == "HIST001"]
    result = CliRunner().invoke(app, ["diagnose", "--prometheus", url, "--at", str(end),
                                      "--selector", 'instance="nope"'])
    assert result.exit_code == 2 and "has no vLLM, SGLang, TGI or llama.cpp series" in " ".join(result.output.split())
