"""triage bench against the real reference server (tiny model): valid levels, token counts that match the
server's own counters, goodput 0 under an impossible SLO, and the embedded default."""
from __future__ import annotations

import asyncio
import json

import psutil
import pytest
from typer.testing import CliRunner

from triage.bench.level_runner import BenchRunner
from triage.bench.records import RecordSink, read_records
from triage.bench.run_config import BenchConfig, Endpoint, LevelSpec
from triage.cli import app


@pytest.fixture(scope="module")
def sweep(reference_server, tmp_path_factory):
    """One 1,4 sweep, shared by the checks below (the box is small: run it once)."""
    path = tmp_path_factory.mktemp("bench") / "requests.jsonl"
    cfg = BenchConfig(url=reference_server.url, levels=(LevelSpec(concurrency=1), LevelSpec(concurrency=4)),
                      num_requests=16, warmup=2, input_len=32, output_len=12, slo={"ttft_ms": 0.001})
    with RecordSink(path) as sink:
        section = asyncio.run(BenchRunner(cfg, sink=sink).run())
    return section, read_records(path)


def test_a_1_4_sweep_gives_valid_levels(sweep):
    section, _ = sweep
    assert [lv.concurrency for lv in section.levels] == [1, 4]
    for lv in section.levels:
        # The client is never the bottleneck here. On a shared 2-core box the OS may still deschedule this
        # process for >10 ms during a sub-second level; the verdict then says so, and only that is tolerated.
        if not lv.client.valid:
            # A descheduled client also reads a first token together with the next one (TCP merges the unread
            # segments): that reason has the same cause and is tolerated with it.
            reasons = lv.client.invalid_reason.split("; ")
            assert all("other work on the host" in r or "read in one piece with the next token" in r
                       for r in reasons), lv.client.invalid_reason
            assert any("other work on the host" in r for r in reasons), lv.client.invalid_reason
        assert lv.requests.completed == 16 and lv.requests.failed == 0
        assert lv.ttft_ms.p50 is not None and lv.ttft_ms.p50 > 0
        assert lv.output_tokens_per_s > 0
        assert lv.server is not None and lv.server.engine == "vllm"
        assert lv.server.server_ttft_ms_mean is not None
        assert lv.server.client_minus_server_ttft_ms is not None
    assert section.levels[1].client.achieved_concurrency > 3.0
    # continuous_usage_stats is accepted, so ITL is split by each chunk's real token count, never by a mean
    assert section.config.continuous_usage_sent is True
    assert not any("without per-chunk usage" in n for lv in section.levels for n in lv.notes), \
        [lv.notes for lv in section.levels]
    assert section.config.usage_reported is True and section.config.prompt_lengths_calibrated is True


def test_token_counts_equal_the_servers_usage(sweep):
    section, records = sweep
    for lv in section.levels:
        name = f"c={lv.concurrency}"
        mine = [r for r in records if r.level == name and r.ok]
        assert all(r.output_tokens_source == "usage" for r in mine)
        assert all(r.output_tokens == 12 for r in mine)  # ignore_eos + min_tokens: as long as asked
        # The server's own counters over the level's window agree with the per-request usage.
        assert lv.server.generation_tokens_delta == sum(r.output_tokens for r in mine)
        assert lv.server.prompt_tokens_delta == sum(r.input_tokens for r in mine)
        assert lv.input_tokens_mean == pytest.approx(32, abs=8)  # calibrated word -> token sizing


def test_goodput_under_an_impossible_slo_is_zero(sweep):
    section, _ = sweep
    for lv in section.levels:
        assert lv.goodput_requests_per_s == 0.0
        assert lv.slo_attainment_pct == 0.0
    assert section.summary["best_goodput_level"] is not None  # every level ties at 0


def test_chat_endpoint_against_the_reference_server(reference_server, tmp_path, report_validator):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, [
        "--no-color", "bench", "--url", reference_server.url, "--endpoint", "chat", "--concurrency", "2",
        "--num-requests", "4", "--warmup", "0", "--input-len", "24", "--output-len", "8", "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = report_validator(json.loads(out.read_text()))
    (lv,) = data["bench"]["levels"]
    assert lv["requests"]["completed"] == 4 and lv["output_tokens_mean"] == 8.0
    assert data["target"]["model"] == data["bench"]["config"]["model"]
    assert data["bench"]["config"]["endpoint"] == Endpoint.CHAT.value


@pytest.mark.slow
def test_embedded_default_starts_benchmarks_and_stops_the_reference_server(tmp_path, report_validator):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    result = CliRunner().invoke(app, ["--no-color", "bench", "--num-requests", "4", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = report_validator(json.loads((tmp_path / "bench.json").read_text()))
    assert data["target"]["engine"] == "reference"
    assert [lv["concurrency"] for lv in data["bench"]["levels"]] == [1, 4]
    assert all(lv["requests"]["completed"] == 4 for lv in data["bench"]["levels"])
    assert (tmp_path / "requests.jsonl").stat().st_size > 0
    assert "data:image/png;base64," in (tmp_path / "report.html").read_text()
    leftover = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert leftover == [], "the embedded server was not stopped"
