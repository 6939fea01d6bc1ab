"""The wire format, without a server: request validation, error bodies, chat rendering, SSE framing."""
from __future__ import annotations

import json

import pytest

from triage.reference_engine.serve import server_protocol as proto
from triage.reference_engine.serve.server_protocol import ApiError, ChatCompletionRequest, CompletionRequest


def _parse(body: object, cls=CompletionRequest):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return proto.parse_request(raw, cls)


def test_valid_completion_request_keeps_sampling_fields():
    req = _parse({"model": "tiny", "prompt": "hi", "max_tokens": 5, "temperature": 0, "top_p": 0.5,
                  "seed": 3, "stop": ["\n", "END"], "ignore_eos": True, "min_tokens": 2, "stream": True,
                  "stream_options": {"include_usage": True}, "some_future_field": 1})
    req.check_supported()
    assert req.single_prompt() == "hi"
    assert (req.max_tokens, req.temperature, req.top_p, req.seed) == (5, 0, 0.5, 3)
    assert req.stop_sequences() == ("\n", "END")
    assert req.ignore_eos and req.min_tokens == 2
    assert req.include_usage and not req.continuous_usage


@pytest.mark.parametrize("raw, fragment", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_malformed_bodies_are_400(raw, fragment):
    with pytest.raises(ApiError) as info:
        _parse(raw)
    assert info.value.status_code == 400
    assert fragment in info.value.message


@pytest.mark.parametrize("body, param", [
    ({"max_tokens": 3}, "prompt"),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "temperature": 3.5}, "temperature"),
    ({"prompt": "x", "top_p": 0}, "top_p"),
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "stop": [""]}, "stop"),
    ({"prompt": "x", "min_tokens": -1}, "min_tokens"),
])
def test_invalid_fields_name_the_field(body, param):
    with pytest.raises(ApiError) as info:
        _parse(body)
    assert info.value.status_code == 400
    assert info.value.param == param
    assert param in info.value.message


@pytest.mark.parametrize("body, param", [
    ({"prompt": "x", "n": 2}, "n"),
    ({"prompt": "x", "presence_penalty": 0.5}, "presence_penalty"),
    ({"prompt": "x", "logprobs": 3}, "logprobs"),
    ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
    ({"prompt": "x", "max_tokens": 2, "min_tokens": 5}, "min_tokens"),
])
def test_unsupported_features_are_refused_not_ignored(body, param):
    with pytest.raises(ApiError) as info:
        _parse(body).check_supported()
    assert (info.value.status_code, info.value.param) == (400, param)


def test_prompt_forms():
    assert _parse({"prompt": [5, 6, 7]}).single_prompt() == [5, 6, 7]
    assert _parse({"prompt": ["only one"]}).single_prompt() == "only one"
    for bad in (["a", "b"], "", []):
        with pytest.raises(ApiError):
            _parse({"prompt": bad}).single_prompt()


def test_chat_request_and_template():
    req = _parse({"messages": [{"role": "system", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "hel"},
                                                            {"type": "text", "text": "lo"}]}],
                  "max_completion_tokens": 7, "max_tokens": 99}, ChatCompletionRequest)
    assert req.effective_max_tokens() == 7
    assert proto.render_chat(req.messages) == "<|system|>\nbe brief\n<|user|>\nhello\n<|assistant|>\n"
    with pytest.raises(ApiError):
        _parse({"messages": []}, ChatCompletionRequest)
    with pytest.raises(ApiError) as info:
        _parse({"messages": [{"role": "wizard", "content": "x"}]}, ChatCompletionRequest)
    assert info.value.param == "messages"


def test_error_body_is_openai_shaped():
    err = ApiError(401, "bad key", err_type="authentication_error")
    assert err.body() == {"error": {"message": "bad key", "type": "authentication_error", "param": None,
                                    "code": 401}}


def test_sse_framing_and_usage():
    usage = proto.Usage(prompt_tokens=4, completion_tokens=3, cached_tokens=2)
    chunk = proto.usage_chunk("cmpl-1", "tiny", 10, "text_completion", usage)
    frame = proto.sse(chunk)
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n") and frame.count(b"\n") == 2
    decoded = json.loads(frame[len(b"data: "):])
    assert decoded["choices"] == []
    assert decoded["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7,
                                "prompt_tokens_details": {"cached_tokens": 2}}
    assert proto.SSE_DONE == b"data: [DONE]\n\n"


def test_response_bodies():
    usage = proto.Usage(prompt_tokens=2, completion_tokens=1)
    body = proto.chat_body("chatcmpl-1", "tiny", 1, "ok", "stop", usage)
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "ok"}
    chunk = proto.completion_chunk("cmpl-1", "tiny", 1, "a", None)
    assert chunk["object"] == "text_completion" and "usage" not in chunk
    assert proto.new_request_id("cmpl").startswith("cmpl-")
