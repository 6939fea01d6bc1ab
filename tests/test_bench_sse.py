"""SSE parsing: content vs role-only chunks, reasoning, timestamps of the read that completes an event, and
every protocol error kind."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from triage.bench.sse import parse_stream


def ev(obj) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def chat(content=None, role=None, reasoning=None, finish=None, usage=None) -> bytes:
    delta = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    obj = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        obj["usage"] = usage
    return ev(obj)


def test_role_only_chunks_do_not_count_and_reasoning_does():
    pieces = [(1.0, chat(role="assistant", content="")), (2.0, chat(reasoning="hmm")), (3.0, chat(content="hi")),
              (4.0, ev({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}})), (4.1, ev("[DONE]"))]
    out = parse_stream(pieces, chat=True)
    assert out.error_kind is None
    assert out.chunk_times == [2.0, 3.0]  # TTFT starts at the reasoning chunk, not the role chunk
    assert out.num_reasoning_chunks == 1
    assert (out.prompt_tokens, out.completion_tokens, out.done) == (7, 2, True)


def test_an_event_is_timed_by_the_read_that_completes_it_and_crlf_is_accepted():
    event = ev({"choices": [{"index": 0, "text": "a"}]}).replace(b"\n", b"\r\n")
    pieces = [(1.0, event[:10]), (2.0, event[10:]), (3.0, b": keep-alive\r\n\r\n"),
              (3.5, ev({"choices": [{"index": 0, "text": "b", "finish_reason": "length"}]}))]
    out = parse_stream(pieces, chat=False)
    assert out.error_kind is None
    assert out.chunk_times == [2.0, 3.5]
    assert out.finish_reason == "length"


def test_two_events_in_one_read_share_its_timestamp_and_per_chunk_usage_gives_tokens():
    body = (ev({"choices": [{"index": 0, "text": "a"}], "usage": {"completion_tokens": 1}})
            + ev({"choices": [{"index": 0, "text": "bcd"}], "usage": {"completion_tokens": 4}}))
    out = parse_stream([(5.0, body)], chat=False)
    assert out.chunk_times == [5.0, 5.0]
    assert out.chunk_tokens == [1, 3]


def test_protocol_errors_have_kinds():
    assert parse_stream([(1.0, b"hello there\n\n")], chat=False).error_kind == "malformed_sse"
    assert parse_stream([(1.0, b'data: {"choices": [\n\n')], chat=False).error_kind == "malformed_json"
    assert parse_stream([(1.0, ev({"error": {"message": "oom"}}))], chat=False).error_kind == "server_error_event"
    assert parse_stream([(1.0, b'data: {"choi')], chat=False).error_kind == "truncated"
    assert parse_stream([(1.0, ev([1, 2]))], chat=False).error_kind == "malformed_json"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.booleans())
def test_no_byte_stream_makes_the_parser_raise(pieces, chat):
    out = parse_stream([(float(i), p) for i, p in enumerate(pieces)], chat=chat)
    assert out.error_kind is None or out.error_kind in {"malformed_sse", "malformed_json", "server_error_event",
                                                        "truncated"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    b'data: {"choices": [{"delta": "x"}]}\n\n', b'data: {"choices": [1]}\n\n', b'data: {"usage": 5}\n\n',
    b'data: {"choices": [{"text": 3, "delta": null}]}\n\n', b"data: [DONE]\n\n", b"event: x\n\n",
    b'data: {"choices": [{"index": 0, "text": "a"}], "usage": {"completion_tokens": "2"}}\n\n']), max_size=6),
    st.booleans())
def test_odd_but_valid_json_never_crashes_the_parser(events, chat):
    parse_stream([(1.0, b"".join(events))], chat=chat)
