"""A default never rejects a valid value of another option (issue 30): each command runs with each of its
numeric options at its smallest documented value, everything else left at its default, against a loopback
server."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.fake_servers import FakeOpenAIServer
from triage.cli import app

BENCH_BASE = ["--concurrency", "1", "--num-requests", "2", "--input-len", "8", "--output-len", "2"]
BENCH_MINIMUMS = [["--num-requests", "1"], ["--duration", "1"], ["--input-len", "1"], ["--output-len", "1"],
                  ["--warmup", "0"], ["--repeat", "1"], ["--timeout", "1"], ["--rate", "1"], ["--turns", "1"],
                  ["--shared-prefix-len", "0"], ["--seed", "0"]]


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.mark.parametrize("option", BENCH_MINIMUMS, ids=lambda o: o[0])
def test_bench_takes_each_option_at_its_smallest_value(server, option):
    args = [a for i, a in enumerate(BENCH_BASE) if a != option[0] and (i == 0 or BENCH_BASE[i - 1] != option[0])]
    if option[0] == "--rate":
        args = [a for a in args if a not in ("--concurrency", "1")] + ["--num-requests", "1"]
    result = CliRunner().invoke(app, ["bench", "--url", server.url, *args, *option, "--format", "json"])
    assert result.exit_code == 0, result.output
    levels = json.loads(result.stdout)["bench"]["levels"]
    assert levels and all(lv["requests"]["failed"] == 0 for lv in levels)


def test_diagnose_takes_the_smallest_window(server):
    result = CliRunner().invoke(app, ["diagnose", "--url", server.url, "--window-s", "0", "--skip", "storage",
                                      "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["kind"] == "diagnose"
