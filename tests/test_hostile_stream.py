"""Hostile streams, built from the exact inputs of the hostile-input issue: nested JSON, absurd and
negative usage, and one huge event fed in many pieces (the parser is linear, whatever the split)."""
from __future__ import annotations

import time

from triage.bench.sse import MAX_USAGE_TOKENS, SseParser, parse_stream
from triage.bench.stats import itl_ms


def _event(obj: str) -> bytes:
    return b"data: " + obj.encode() + b"\n\n"


def test_deeply_nested_json_is_malformed_json_not_a_recursion_error():
    nested = "[" * 100_000 + "]" * 100_000
    result = parse_stream([(0.0, _event(nested))], chat=False)
    assert result.error_kind == "malformed_json" and "nested" in result.error


def test_absurd_and_negative_usage_are_not_measured_and_counted():
    chunk = '{"choices":[{"text":"a","index":0,"finish_reason":null}]}'
    for bad in ("100000000000000000000", "-1", "1e20", "true"):
        usage = '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":' + bad + '}}'
        result = parse_stream([(0.0, _event(chunk)), (0.1, _event(usage)), (0.2, b"data: [DONE]\n\n")], chat=False)
        assert result.error_kind is None
        assert result.completion_tokens is None, bad
        assert result.num_bad_usage == 1, bad
    ok = parse_stream([(0.0, _event('{"choices":[],"usage":{"completion_tokens":' + str(MAX_USAGE_TOKENS) + "}}"))],
                      chat=False)
    assert ok.completion_tokens == MAX_USAGE_TOKENS


def test_itl_never_builds_a_list_from_an_absurd_chunk_count():
    """itl_ms reads only the chunk times and per-chunk token counts: a duck-typed record is enough."""
    class R:
        chunk_times_s = [0.0, 0.01, 0.02]
        chunk_tokens = [1, 10**9, -5]
        output_tokens = None
        output_tokens_source = "usage"

    t0 = time.perf_counter()
    out = itl_ms([R()])
    assert time.perf_counter() - t0 < 1.0
    assert len(out.values_ms) == 2          # each unbelievable count is one token


def test_an_8_mib_event_in_4_kib_pieces_parses_in_linear_time():
    payload = '{"choices":[{"text":"' + "x" * (8 * 2**20) + '","index":0,"finish_reason":"stop"}]}'
    raw = _event(payload) + b"data: [DONE]\n\n"
    pieces = [raw[i:i + 4096] for i in range(0, len(raw), 4096)]
    parser = SseParser(chat=False)
    t0 = time.perf_counter()
    for p in pieces:
        parser.feed(0.0, p)
    elapsed = time.perf_counter() - t0
    result = parser.finish()
    assert result.error_kind is None and result.done and len(result.chunk_times) == 1
    assert elapsed < 2.0, f"{elapsed:.2f} s: quadratic"   # the quadratic parser took 0.2-0.8 s per MiB fed


def test_crlf_split_across_reads_still_frames_events():
    raw = b'data: {"choices":[{"text":"a","index":0,"finish_reason":null}]}\r\n\r\ndata: [DONE]\r\n\r\n'
    for cut in range(1, len(raw)):
        result = parse_stream([(0.0, raw[:cut]), (0.1, raw[cut:])], chat=False)
        assert result.error_kind is None and result.done and len(result.chunk_times) == 1, cut


def test_nan_inf_and_400_digit_metrics_are_dropped_and_counted_not_fatal():
    """Issue reproductions 3-5: `vllm:kv_cache_usage_perc{...} NaN`, a 400-digit integer, an infinite peak."""
    from triage.probes.prom import normalise, parse_metrics

    text = ('vllm:kv_cache_usage_perc{model_name="m",engine="0"} NaN\n'
            'vllm:num_requests_running{model_name="m",engine="0"} ' + "9" * 400 + "\n"
            'vllm:num_requests_swapped{model_name="m",engine="0"} +Inf\n'
            'vllm:num_requests_waiting{model_name="m",engine="0"} 3\n')
    sample = parse_metrics(text)
    metrics = normalise(sample)
    assert sample.num_bad_lines == 3
    assert metrics.kv_cache_usage_frac is None and metrics.num_requests_running is None
    assert metrics.num_requests_waiting == 3


def test_a_diagnose_report_with_hostile_metrics_is_standard_json(tmp_path):
    import json as _json

    from triage.core.report_io import dumps
    from triage.diagnose import load_snapshot  # noqa: F401  (the loader path used by --from)
    from triage.probes.http import HttpResponse
    from triage.probes.server_metrics import probe_server_metrics

    bad = 'vllm:kv_cache_usage_perc{model_name="m",engine="0"} NaN\nvllm:num_requests_running{model_name="m",engine="0"} ' + "9" * 400 + "\n"
    result = probe_server_metrics("http://10.0.0.5:8000", window_s=0.0, num_intermediate=0,
                                  get=lambda url, timeout: HttpResponse(200, bad), sleep=lambda s: None)
    import dataclasses

    from tests.factories import bench_report

    report = dataclasses.replace(bench_report([]), probes=(result,))
    text = dumps(report)                       # allow_nan=False: raises if any NaN slipped through
    assert "NaN" not in text and _json.loads(text)["probes"][0]["name"] == "server_metrics"
