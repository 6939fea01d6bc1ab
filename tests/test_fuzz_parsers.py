"""Property-based tests (hypothesis) for every parser of outside input: the SSE parser, the Prometheus
parser and normaliser, and the report loader. Properties: never raises outside the documented error
types, and never accepts a value out of bounds. Bounded example counts keep `make test` fast."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.bench.sse import MAX_USAGE_TOKENS, SseParser
from triage.core.errors import ReportError
from triage.core.report_io import loads
from triage.probes.prom import MAX_ABS_VALUE, normalise, parse_metrics

# make test runs a bounded number of cases; benchmarks/fuzz_parsers.py sets TRIAGE_FUZZ_EXAMPLES=10000.
EXAMPLES_PER_SUITE = int(os.environ.get("TRIAGE_FUZZ_EXAMPLES", "150"))
FAST = settings(max_examples=EXAMPLES_PER_SUITE, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | st.floats()
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)


def _chunk(obj) -> bytes:
    return b"data: " + json.dumps(obj, allow_nan=True).encode() + b"\n\n"


@FAST
@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0, max_value=2000), max_size=8))
def test_sse_parser_is_total_on_any_bytes_and_splits(raw, cuts):
    parser = SseParser(chat=bool(len(raw) % 2))
    points = sorted({min(c, len(raw)) for c in cuts})
    start = 0
    for point in points + [len(raw)]:
        parser.feed(0.0, raw[start:point])
        start = point
    out = parser.finish()
    assert out.error_kind in (None, "malformed_json", "malformed_sse", "truncated", "server_error_event")
    for value in (out.completion_tokens, out.prompt_tokens):
        assert value is None or 0 <= value <= MAX_USAGE_TOKENS


@FAST
@given(st.dictionaries(st.sampled_from(["choices", "usage", "error", "x"]), _json_values, max_size=3),
       st.integers(min_value=1, max_value=64))
def test_sse_parser_is_total_on_hostile_json_and_the_split_does_not_matter(obj, cut):
    raw = _chunk(obj) + b"data: [DONE]\n\n"
    whole = SseParser(chat=True)
    whole.feed(0.0, raw)
    split = SseParser(chat=True)
    for i in range(0, len(raw), cut):
        split.feed(0.0, raw[i:i + cut])
    a, b = whole.finish(), split.finish()
    assert (a.error_kind, a.completion_tokens, len(a.chunk_times)) == (b.error_kind, b.completion_tokens,
                                                                       len(b.chunk_times))
    assert a.completion_tokens is None or 0 <= a.completion_tokens <= MAX_USAGE_TOKENS


_metric_names = st.sampled_from(["vllm:num_requests_running", "vllm:kv_cache_usage_perc", "sglang:token_usage",
                                 "llamacpp:requests_deferred", "tgi_queue_size", "lmdeploy:num_requests_waiting"])
_values = st.one_of(st.sampled_from(["NaN", "+Inf", "-Inf", "9" * 400, "-1", "1e308", "0", "0.5", "x"]),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr))


@FAST
@given(st.lists(st.tuples(_metric_names, _values), max_size=12), st.text(max_size=200))
def test_prometheus_parser_never_raises_and_never_keeps_an_unbounded_value(lines, junk):
    text = "\n".join(f'{name}{{model_name="m",engine="0"}} {value}' for name, value in lines) + "\n" + junk
    sample = parse_metrics(text)
    for s in sample.samples:
        assert math.isfinite(s.value) and abs(s.value) <= MAX_ABS_VALUE
    metrics = normalise(sample)
    for value in (metrics.num_requests_running, metrics.num_requests_waiting, metrics.kv_cache_usage_frac):
        assert value is None or (math.isfinite(value) and abs(value) <= MAX_ABS_VALUE)


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


_REPORTS = {p.name: json.loads(p.read_text()) for p in sorted(EXAMPLES.glob("*.json"))}


@settings(max_examples=EXAMPLES_PER_SUITE, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(sorted(_REPORTS)), st.data(), _json_values)
def test_report_loader_gives_a_report_or_one_report_error(name, data, replacement):
    doc = json.loads(json.dumps(_REPORTS[name]))
    path = data.draw(st.sampled_from(list(_paths(doc))[:400]))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = replacement
    text = json.dumps(doc, allow_nan=True)
    try:
        loads(text, "mutated")
    except ReportError as e:
        assert "\n" not in str(e)
