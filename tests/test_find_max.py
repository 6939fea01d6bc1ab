"""`triage bench --find-max`: the search on deterministic measurements (a pure function of load, no client
involved), its flags' errors, and against a real reference server whose small KV budget caps concurrency:
the answer falls inside the bracket that a plain sweep shows."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.fake_servers import FakeOpenAIServer
from triage.bench.find_max import FindMaxSpec, Measured, search, wilson_ci95
from triage.cli import app


def capacity(limit: float, n: int = 200, bottleneck_from: float | None = None):
    """Every request meets the SLO up to `limit`; above it only half do."""
    calls = []

    def measure(load: float) -> Measured:
        calls.append(load)
        met = n if load <= limit else n // 2
        return Measured(load, n, met, 0, client_bottleneck=bottleneck_from is not None and load >= bottleneck_from,
                        client_reason="event loop lag", requests_sent=n, duration_s=1.0)

    return measure, calls


def test_concurrency_search_brackets_then_bisects_to_the_exact_cap():
    measure, calls = capacity(11)
    result = search(measure, FindMaxSpec("concurrency", target_attainment=0.99))
    assert result.answer == 11 and result.bracket == (11, 12)
    assert calls[:5] == [1, 2, 4, 8, 16]            # doubling until 16 fails
    assert set(calls[5:]) <= set(range(9, 16))     # then only inside (8, 16)
    assert [p.passed for p in result.probes if p.load == 16] == [False]
    assert len(calls) == len(set(calls))           # no load measured twice


def test_rate_search_stops_at_its_relative_precision():
    measure, _ = capacity(7.3)
    result = search(measure, FindMaxSpec("rate", target_attainment=0.95, rel_precision=0.05))
    lo, hi = result.bracket
    assert lo <= 7.3 < hi and hi / lo <= 1.05 and result.answer == lo


def test_budget_client_bottleneck_and_a_first_failure_end_the_search():
    measure, calls = capacity(1000)
    spent = search(measure, FindMaxSpec("concurrency", max_requests=500), requests_at=lambda load: 200)
    assert spent.requests_sent <= 500 and "request budget" in spent.stop_reason and len(calls) == 2
    measure, _ = capacity(1000, bottleneck_from=8)
    stuck = search(measure, FindMaxSpec("concurrency"))
    assert stuck.answer == 4 and "client was the bottleneck" in stuck.stop_reason
    measure, _ = capacity(0.5)
    none = search(measure, FindMaxSpec("concurrency"))
    assert none.answer is None and "even the first load" in none.stop_reason


def test_each_level_carries_a_wilson_interval():
    low, high = wilson_ci95(99, 100)
    assert 0.94 < low < 0.99 < high <= 1.0
    measure, _ = capacity(3, n=20)
    result = search(measure, FindMaxSpec("concurrency"))
    assert all(p.attainment_ci95 and p.attainment_ci95[0] <= p.attainment <= p.attainment_ci95[1]
               for p in result.probes)


@pytest.mark.parametrize("args, message", [
    (["--find-max", "concurrency"], "needs --slo"),
    (["--find-max", "concurrency", "--slo", "ttft_ms=100", "--concurrency", "4"], "chooses the loads itself"),
    (["--find-max", "latency", "--slo", "ttft_ms=100"], "use concurrency or rate"),
    (["--find-max", "rate", "--slo", "ttft_ms=100", "--attainment", "1.5"], "must be in (0, 1]"),
])
def test_find_max_flag_errors_are_clear(args, message):
    result = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:9", *args])
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.slow
def test_find_max_answer_lies_in_the_bracket_a_sweep_shows_on_a_capacity_capped_server(tmp_path):
    # A real HTTP server that streams two requests at a time and queues the rest (as an engine at its KV or batch
    # cap does): each stream lasts 64 tokens x 5 ms, so a queued request waits >= 320 ms for its first byte,
    # far past the 150 ms SLO, while an admitted one answers in a few ms. The boundary (c=2 meets it, c=4 does
    # not) is the server's capacity in sleeps, not a latency that this host's speed or load could move.
    common = ["--input-len", "24", "--output-len", "64", "--slo", "ttft_ms=150", "--warmup", "2", "--endpoint",
              "completions"]
    with FakeOpenAIServer(max_running=2, token_delay_s=0.005) as server:
        sweep_json, found_json = tmp_path / "sweep.json", tmp_path / "found.json"
        sweep = CliRunner().invoke(app, ["bench", "--url", server.url, "--concurrency", "1,2,4,8",
                                         "--num-requests", "16", *common, "--json", str(sweep_json)])
        assert sweep.exit_code == 0, sweep.output
        found = CliRunner().invoke(app, ["bench", "--url", server.url, "--find-max", "concurrency",
                                         "--attainment", "0.9", "--max-requests", "600", *common,
                                         "--json", str(found_json)])
        assert found.exit_code == 0, found.output
    levels = json.loads(sweep_json.read_text())["bench"]["levels"]
    attained = {lv["concurrency"]: lv["slo_attainment_pct"] / 100 for lv in levels}
    # The sweep brackets the cap where it is clear: levels that pass or fail by a margin (a level right at the
    # 90% target can land either side from one run to the next).
    passing = [c for c, a in attained.items() if a >= 0.95]
    failing = [c for c, a in attained.items() if a <= 0.6]
    assert passing and failing, attained              # the KV cap shows in the sweep
    report = json.loads(found_json.read_text())
    result = report["bench"]["summary"]["find_max"]
    assert result["answer"] is not None, (attained, result)
    assert max(passing) <= result["answer"] < min(c for c in failing if c > max(passing)), (attained, result)
    assert len(report["bench"]["levels"]) == len(result["probes"])   # every probe is a normal level
    assert "find-max: highest concurrency" in found.output
