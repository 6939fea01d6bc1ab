"""A served response whose tokens decode to no text is a success, not a failure (issue 30, part 1).

llama.cpp's llama-server answers a request whose tokens decode to nothing printable with one final chunk:
`"text": ""`, `finish_reason: "length"` and `usage.completion_tokens: 16`. The loopback server in
tests/fake_servers.py writes exactly those bytes (`no_text`), and the same chunk with 0 tokens (`no_text_zero`),
which is a real failure: the server says it generated nothing.
"""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.fake_servers import FakeOpenAIServer
from triage.bench.client import completed_without_text
from triage.bench.records import RequestRecord, read_records
from triage.bench.run_config import LevelSpec
from triage.bench.sse import parse_stream
from triage.bench.stats import meets_slo, summarize
from triage.cli import app
from triage.core.report import BenchSection, ClientStats
from triage.core.report_io import from_dict
from triage.core.snapshot import Snapshot
from triage.rules import evaluate

LLAMACPP_FINAL = (b'data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],'
                  b'"object":"text_completion","usage":{"completion_tokens":16,"prompt_tokens":7,'
                  b'"total_tokens":23}}\n\ndata: [DONE]\n\n')


def test_the_llamacpp_final_chunk_is_a_completion_without_text():
    result = parse_stream([(1.0, LLAMACPP_FINAL)], chat=False)
    assert result.chunk_times == [] and result.error_kind is None
    assert completed_without_text(result)
    zero = parse_stream([(1.0, LLAMACPP_FINAL.replace(b'"completion_tokens":16', b'"completion_tokens":0'))],
                        chat=False)
    assert not completed_without_text(zero)
    cut = parse_stream([(1.0, LLAMACPP_FINAL.replace(b'"finish_reason":"length"', b'"finish_reason":null')
                         .replace(b"data: [DONE]\n\n", b""))], chat=False)
    assert not completed_without_text(cut)  # no [DONE], no finish_reason: the stream did not end normally


def _record(**kw) -> RequestRecord:
    base = dict(level="c1", repeat=0, index=0, warmup=False, t0_s=0.0, slot_wait_s=0.0, requested_output_tokens=16)
    return RequestRecord(**{**base, **kw})


def test_a_no_text_request_counts_as_served_with_no_ttft_and_is_noted():
    texted = [_record(index=i, t0_s=0.1 * i, ttft_s=0.05, e2e_s=0.2, end_s=0.2, output_tokens=16,
                      output_tokens_source="usage", chunk_times_s=[0.05 + 0.01 * k for k in range(16)])
              for i in range(3)]
    silent = _record(index=3, t0_s=0.3, e2e_s=0.5, end_s=0.5, output_tokens=16, output_tokens_source="usage",
                     no_text=True)
    client = ClientStats(cpu_pct=None, event_loop_lag_ms_p99=None, achieved_concurrency=None, valid=True)
    level = summarize(LevelSpec(concurrency=1), [*texted, silent], {"e2e_ms": 1000.0}, client)
    assert (level.requests.completed, level.requests.failed, level.requests.completed_no_text) == (4, 0, 1)
    assert level.ttft_ms.p50 == pytest.approx(50.0) and level.ttft_ms.max == pytest.approx(50.0)
    assert len(level.samples["ttft_ms"]) == 3  # the silent one has no TTFT
    assert level.e2e_ms.max == pytest.approx(500.0)  # but it has an end-to-end time
    assert level.output_tokens_mean == pytest.approx(16.0)
    assert level.slo_attainment_pct == pytest.approx(100.0)
    assert any("1/4 requests completed with no text" in n for n in level.notes)


def test_a_no_text_request_meets_a_ttft_objective_only_when_its_whole_response_did():
    silent = _record(e2e_s=0.5, output_tokens=16, no_text=True)
    assert meets_slo(silent, {"ttft_ms": 600.0})
    assert not meets_slo(silent, {"ttft_ms": 400.0})  # unknown TTFT, not proven within the objective
    assert meets_slo(silent, {"tpot_ms": 1.0})         # no TPOT to judge
    assert not meets_slo(_record(e2e_s=0.5), {"ttft_ms": 600.0})  # no TTFT and not a no-text success


def _bench(out, url: str):
    result = CliRunner().invoke(app, ["--no-color", "bench", "--url", url, "--concurrency", "1,4",
                                      "--num-requests", "16", "--warmup", "0", "--input-len", "8",
                                      "--output-len", "16", "--output-dir", str(out)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return json.loads((out / "bench.json").read_text())


def test_bench_against_llamacpp_bytes_reports_no_failure_and_bench002_stays_quiet(tmp_path):
    # One no-text response per level, as llama-server gave for prompt 20 of the seed-0 workload.
    with FakeOpenAIServer(schedule=["ok"] * 5 + ["no_text"] + ["ok"] * 15 + ["no_text"]) as srv:
        data = _bench(tmp_path, srv.url)
    for lv in data["bench"]["levels"]:
        assert lv["requests"]["failed"] == 0
        assert lv["requests"]["completed"] == 16 and lv["requests"]["completed_no_text"] == 1
        assert lv["output_tokens_mean"] == pytest.approx(16.0)
        assert any("completed with no text" in n for n in lv["notes"])
    silent = [r for r in read_records(tmp_path / "requests.jsonl") if r.no_text]
    assert len(silent) == 2 and all(r.ok and r.ttft_s is None and r.output_tokens == 16 for r in silent)
    findings = evaluate(Snapshot(probes=()), bench=from_dict(BenchSection, data["bench"])).findings
    assert "BENCH002" not in {f.code for f in findings}


def test_a_stream_whose_usage_says_nothing_was_generated_is_still_a_failure(tmp_path):
    with FakeOpenAIServer(schedule=["no_text_zero"] * 4) as srv:
        data = _bench(tmp_path, srv.url)
    first = data["bench"]["levels"][0]
    assert first["requests"]["failed"] == 4
    assert first["requests"]["errors_by_kind"] == {"no_content": 4}
    findings = evaluate(Snapshot(probes=()), bench=from_dict(BenchSection, data["bench"])).findings
    assert "BENCH002" in {f.code for f in findings}
