"""The bench client against loopback servers that behave like real ones: llama-server's close-after-stream
under `Keep-Alive`, a server slow to take new connections, request ids joined with the server's log, a failed
calibration, a level where every request gets the same 400, and a reasoning model."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.bench_loopback import LoopbackServer
from triage.bench.level_runner import BenchRunner
from triage.bench.records import RecordSink, read_records
from triage.bench.run_config import BenchConfig, Endpoint, LevelSpec
from triage.cli import app


def run_bench(cfg: BenchConfig, jsonl: Path | None = None):
    with RecordSink(jsonl) as sink:
        runner = BenchRunner(cfg, sink=sink)
        section = asyncio.run(runner.run())
    return section


def cfg_for(url: str, **kw) -> BenchConfig:
    base = dict(url=url, levels=(LevelSpec(concurrency=1), LevelSpec(concurrency=2)), num_requests=8, warmup=1,
                input_len=16, output_len=4, timeout_s=10.0, scrape_interval_s=5.0)
    base.update(kw)
    return BenchConfig(**base)


def test_a_server_that_closes_after_every_stream_has_no_failed_requests():
    """llama-server: `Keep-Alive: timeout=5, max=100`, then a close after the stream. The pool sees the EOF
    before reuse (or, when the FIN races the write, retries once on a fresh connection): nothing fails."""
    with LoopbackServer(close_after_stream=True) as srv:
        section = run_bench(cfg_for(srv.url))
    for lv in section.levels:
        assert lv.requests.failed == 0, lv.requests.errors_by_kind
        assert lv.requests.completed == 8
        assert lv.connections.opened >= 8  # every request needed a new connection
    assert section.config.warnings == ()


def test_a_close_that_races_the_next_request_is_retried_once_and_reported(tmp_path):
    """The server closes 30 ms after each stream: the client has already reused the connection, the request is
    never answered, and the pool sends it again on a fresh connection. 0 failed, every retry counted."""
    with LoopbackServer(close_after_stream=True, close_delay_s=0.03) as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=1),), warm_connections=False),
                            tmp_path / "r.jsonl")
    (lv,) = section.levels
    assert lv.requests.failed == 0, lv.requests.errors_by_kind
    assert lv.connections.retries >= 6
    records = [r for r in read_records(tmp_path / "r.jsonl") if not r.warmup]
    retried = [r for r in records if r.retried]
    assert len(retried) == lv.connections.retries
    # The lost time on the dead connection is connect time, not TTFT: TTFT stays at the server's speed.
    assert all(r.connect_s > 0 for r in retried)
    assert max(r.ttft_s for r in retried) < 0.5


def test_the_close_after_stream_retries_show_in_the_table(tmp_path):
    with LoopbackServer(close_after_stream=True, close_delay_s=0.03) as srv:
        result = CliRunner().invoke(app, ["--no-color", "bench", "--url", srv.url, "--concurrency", "1",
                                          "--num-requests", "6", "--input-len", "16", "--output-len", "4",
                                          "--no-warm-connections", "--json", str(tmp_path / "r.json")],
                                    env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "sent again on a fresh connection" in result.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["bench"]["levels"][0]["requests"]["failed"] == 0
    assert data["bench"]["levels"][0]["connections"]["retries"] > 0


def test_a_failed_calibration_is_a_visible_warning(tmp_path):
    with LoopbackServer(fail_prompt_words=80) as srv:  # the second calibration probe (80 words) gets a 500
        result = CliRunner().invoke(app, ["--no-color", "bench", "--url", srv.url, "--concurrency", "1",
                                          "--num-requests", "2", "--input-len", "32", "--output-len", "4",
                                          "--json", str(tmp_path / "r.json")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "WARNING: prompt calibration failed" in result.output
    config = json.loads((tmp_path / "r.json").read_text())["bench"]["config"]
    assert any("prompt calibration failed" in w for w in config["warnings"])
    assert config["prompt_lengths_calibrated"] is False
    # sized from the first probe alone (19 tokens for 16 words), never 1 token per word blindly
    assert config["tokens_per_word"] == pytest.approx(19 / 16, rel=1e-3)


def test_a_level_where_every_request_gets_the_same_400_stops_early_and_says_why():
    message = "the request exceeds the available context size, try increasing it"
    with LoopbackServer(status=400, error_message=message) as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=2),), num_requests=64, warmup=0))
        num_posts = len(srv.posts())
    (lv,) = section.levels
    assert lv.requests.completed == 0
    assert lv.requests.failed < 10 and num_posts < 10  # not 64
    note = next(n for n in lv.notes if n.startswith("stopped early"))
    assert "HTTP 400" in note and "lower --input-len" in note and "16 tokens asked" in note
    assert any("stopped early" in w for w in section.config.warnings)


def test_a_server_slow_to_accept_connections_shows_in_connect_time_not_ttft():
    """Listen backlog 1 and 150 ms between accepts: connections queue in the kernel or have their SYN dropped
    (retried after ~1 s). The warm-up waits until the server answered on each connection, so TTFT reads the
    server's own first-token time, first wave included; the wait is the warm-up's connect_ms."""
    with LoopbackServer(backlog=1, accept_delay_s=0.15, first_token_delay_s=0.05) as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=6),), num_requests=24, warmup=0))
        truth_ms = [(e["first_perf_s"] - e["recv_perf_s"]) * 1000.0 for e in srv.posts()]
    (lv,) = section.levels
    assert lv.requests.failed == 0
    conns = lv.connections
    assert conns.opened_warm == 5 and conns.opened_in_window == 0  # + the preflight's idle one
    assert conns.warm_connect_ms.max > 300.0  # the slow accept loop is visible as connect time
    assert abs(lv.ttft_ms.p50 - float(np.median(truth_ms))) < 15.0
    assert lv.ttft_ms.max < float(np.max(truth_ms)) + 15.0


def test_without_warm_connections_the_connect_delay_is_connect_ms():
    with LoopbackServer(backlog=1, accept_delay_s=0.15, first_token_delay_s=0.05) as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=6),), num_requests=24, warmup=0,
                                    warm_connections=False))
        truth_ms = [(e["first_perf_s"] - e["recv_perf_s"]) * 1000.0 for e in srv.posts()]
    (lv,) = section.levels
    conns = lv.connections
    assert conns.opened_warm == 0 and conns.opened_in_window == 5  # + the preflight's idle one
    assert conns.in_window_connect_ms.max > 300.0
    assert abs(lv.ttft_ms.p50 - float(np.median(truth_ms))) < 15.0


def test_request_ids_and_epoch_times_match_the_servers_log(tmp_path):
    with LoopbackServer(first_token_delay_s=0.02, token_delay_s=0.005) as srv:
        run_bench(cfg_for(srv.url, request_id_header="X-Request-Id"), tmp_path / "r.jsonl")
        logged = {e["request_id"]: e for e in srv.log}
    records = read_records(tmp_path / "r.jsonl")
    measured = [r for r in records if r.level != "probe"]
    assert len(measured) == 2 * 8 + 1
    # The client's epoch times are its perf_counter mapped onto the wall clock once; the server reads
    # time.time(). At 1.8e9 s a float64 is exact to 0.24 us, so the two agree to a few us, not to the last bit
    # (a fresh-clone run once saw the receive 0.4 us "before" the send).
    skew_s = 1e-5
    for r in measured:
        entry = logged[r.request_id]  # every id the client recorded reached the server
        assert r.send_epoch_s - skew_s <= entry["recv_epoch_s"] < r.send_epoch_s + 0.05
        assert entry["first_epoch_s"] - skew_s <= r.first_token_epoch_s < entry["first_epoch_s"] + 0.05
        assert r.end_epoch_s >= r.first_token_epoch_s
    assert len({r.request_id for r in measured}) == len(measured)


def test_the_request_id_header_name_is_configurable_and_the_run_start_is_recorded(tmp_path):
    with LoopbackServer() as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=1),), num_requests=2,
                                    request_id_header="X-Correlation-Id"), tmp_path / "r.jsonl")
        seen = [e["headers"].get("x-correlation-id") for e in srv.posts()]
    ids = [r.request_id for r in read_records(tmp_path / "r.jsonl") if r.level == "c=1"]
    assert seen[-2:] == ids
    first_send = min(r.send_epoch_s for r in read_records(tmp_path / "r.jsonl"))
    assert section.config.started_epoch_s <= first_send
    assert section.config.started_at.endswith("Z")


def test_reasoning_models_report_first_reasoning_and_first_answer_token():
    with LoopbackServer(reasoning_chunks=5, first_token_delay_s=0.01, token_delay_s=0.02) as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=2),), endpoint=Endpoint.CHAT))
    (lv,) = section.levels
    reasoning = lv.reasoning
    assert reasoning["requests"] == 8
    first_reasoning = reasoning["ttft_reasoning_ms"]["p50"]
    first_answer = reasoning["ttft_answer_ms"]["p50"]
    # TTFT is the first content of either kind: the reasoning token; the answer comes 5 tokens (~100 ms) later
    assert lv.ttft_ms.p50 == pytest.approx(first_reasoning, abs=1e-6)
    assert 80.0 < first_answer - first_reasoning < 160.0


@pytest.mark.skipif(not __import__("triage.bench.stamped", fromlist=["x"]).available(),
                    reason="no SO_TIMESTAMPNS on this platform")
def test_a_token_that_arrives_while_the_loop_is_blocked_keeps_its_arrival_time():
    """Kernel receive stamps: the first token arrives 20 ms after the request while this process's event loop
    is blocked for 250 ms; its timestamp is still ~20 ms, not the ~250 ms at which the loop read it."""
    import time

    from triage.bench.pool import ConnectionPool

    async def main(url: str) -> tuple[float, float]:
        pool = ConnectionPool(url, 1)
        pieces: list[tuple[float, bytes]] = []

        async def block_soon() -> None:
            await asyncio.sleep(0.005)
            time.sleep(0.25)  # the whole loop stalls, as on a host with no CPU to spare

        blocker = asyncio.get_running_loop().create_task(block_soon())
        body = json.dumps({"model": "loop", "prompt": "hi", "max_tokens": 3, "stream": True}).encode()
        response = await pool.post_stream("/v1/completions", body, 10.0,
                                          on_piece=lambda t, d: pieces.append((t, d)))
        await blocker
        pool.close()
        first = next(t for t, d in pieces if b"tok" in d)
        return first - response.t_sent, time.perf_counter() - response.t_sent

    with LoopbackServer(first_token_delay_s=0.02, token_delay_s=0.4) as srv:
        ttft_s, _ = asyncio.run(main(srv.url))
    assert 0.015 < ttft_s < 0.1


def test_a_final_crlf_that_arrives_after_reuse_does_not_block_the_retry(tmp_path):
    """llama-server writes the last chunk and the body's final CRLF apart, then closes. The client finishes the
    response at the last chunk and reuses the connection; the stray CRLF lands on the next request, then the
    FIN. Those two bytes are the old response's, not an answer: the request is still retried, and nothing fails."""
    with LoopbackServer(close_after_stream=True, close_delay_s=0.03, final_crlf_delay_s=0.01) as srv:
        section = run_bench(cfg_for(srv.url, levels=(LevelSpec(concurrency=1),), warm_connections=False,
                                    num_requests=12), tmp_path / "r.jsonl")
    (lv,) = section.levels
    assert lv.requests.failed == 0, lv.requests.errors_by_kind
    assert lv.connections.retries >= 6
    assert all(r.ok for r in read_records(tmp_path / "r.jsonl") if not r.warmup)


def test_a_late_final_crlf_on_a_kept_alive_connection_neither_fails_nor_drops_it():
    """The same split end on a server that keeps the connection: the late CRLF is the old response's, whether
    it lands after the next request was written (no pause), while the connection sat idle (the loop reads it),
    or sits unread in the socket when the connection is reused (the loop was blocked: the reuse check reads
    it); nothing fails, nothing is retried and the one connection is kept."""
    for pause in ("none", "idle", "blocked"):
        with LoopbackServer(final_crlf_delay_s=0.01) as srv:
            responses = asyncio.run(_four_posts(srv.url, pause))
            num_connections = srv.num_connections
        assert all(r.status == 200 and r.complete and not r.retried for r in responses), pause
        assert [r.reused for r in responses] == [False, True, True, True], pause
        assert num_connections == 1, pause


def test_bytes_after_a_response_mean_the_connection_is_not_reused():
    """Bytes after the body's end answer nothing: that connection is never reused (the next request opens a
    fresh one and succeeds), whether the loop read them while it sat idle or they wait in the socket."""
    for pause in ("idle", "blocked"):
        with LoopbackServer(trailing_bytes=b"HTTP/1.1 200 OK\r\n\r\n") as srv:
            responses = asyncio.run(_four_posts(srv.url, pause))
            num_connections = srv.num_connections
        assert all(r.status == 200 and r.complete and not r.retried for r in responses), pause
        assert [r.reused for r in responses] == [False] * 4, pause
        assert num_connections == 4, pause


async def _four_posts(url: str, pause: str) -> list:
    import time

    from triage.bench.pool import ConnectionPool

    pool = ConnectionPool(url, 1)
    body = json.dumps({"model": "loop", "prompt": "hi", "max_tokens": 3, "stream": True}).encode()
    responses = []
    for _ in range(4):
        responses.append(await pool.post_stream("/v1/completions", body, 10.0))
        if pause == "idle":
            await asyncio.sleep(0.05)
        elif pause == "blocked":
            time.sleep(0.05)  # what arrives now stays in the socket until the reuse check
    pool.close()
    return responses
