"""The real server (tiny preset, one per session) driven over HTTP with httpx and the openai client."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

MODEL = "tiny"


@pytest.fixture(scope="module")
def client(reference_server):
    with httpx.Client(base_url=reference_server.url, timeout=60.0, trust_env=False) as c:
        yield c


@pytest.fixture(scope="module")
def oai(reference_server):
    return openai.OpenAI(base_url=f"{reference_server.url}/v1", api_key="unused", max_retries=0,
                         timeout=60.0)


def metrics(client: httpx.Client) -> dict[tuple[str, frozenset], float]:
    text = client.get("/metrics").text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = {k: v for k, v in s.labels.items() if k not in ("model_name", "engine")}
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def value(snapshot: dict, name: str, **labels: str) -> float:
    return snapshot.get((name, frozenset(labels.items())), 0.0)


def wait_idle(client: httpx.Client, timeout_s: float = 15.0) -> dict:
    """Metrics once nothing runs and no KV block is held (the engine thread refreshes them each loop)."""
    deadline = time.monotonic() + timeout_s
    while True:
        snap = metrics(client)
        if (value(snap, "vllm:num_requests_running") == 0 and value(snap, "vllm:num_requests_waiting") == 0
                and value(snap, "vllm:kv_cache_usage_perc") == 0):
            return snap
        if time.monotonic() > deadline:
            return snap
        time.sleep(0.05)


def sse_events(lines) -> list:
    events = []
    for line in lines:
        if not line:
            continue
        assert line.startswith("data: "), line
        payload = line[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def completion(client, **body):
    body = {"model": MODEL, "temperature": 0, **body}
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


# Discovery ------------------------------------------------------------------------------------------


def test_health_version_models(client):
    assert client.get("/health").status_code == 200
    version = client.get("/version").json()
    assert version["engine"] == "triage-reference" and version["version"]
    models = client.get("/v1/models").json()
    (card,) = models["data"]
    assert card["id"] == MODEL and card["owned_by"] == "triage-reference"
    assert isinstance(card["max_model_len"], int) and card["max_model_len"] > 16


def test_startup_log_and_command_line_are_discoverable(reference_server):
    log = Path(reference_server.log_path).read_text()
    assert "triage-reference" in log
    kv_line = next(line for line in log.splitlines() if "KV cache size:" in line)
    assert int(kv_line.split("KV cache size:")[1].split("tokens")[0].replace(",", "")) > 0
    assert "Maximum concurrency for" in log and "tokens per request:" in log
    assert "compute dtype float32: " in log                 # the dtype and why, at start-up
    cmdline = Path(f"/proc/{reference_server.pid}/cmdline").read_bytes().split(b"\0")
    assert b"serve" in cmdline and b"--max-num-seqs" in cmdline and b"--model" in cmdline


# Completions -----------------------------------------------------------------------------------------


def test_non_stream_completion_and_chat(client):
    body = completion(client, prompt="Hello", max_tokens=6, ignore_eos=True)
    (choice,) = body["choices"]
    assert body["object"] == "text_completion" and choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 6
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 6
    r = client.post("/v1/chat/completions", json={"model": MODEL, "max_tokens": 5, "ignore_eos": True,
                                                  "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 200, r.text
    chat = r.json()
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["completion_tokens"] == 5


def test_streaming_completion_matches_non_stream_and_ends_with_usage(client):
    prompt, n = "The quick brown fox", 8
    whole = completion(client, prompt=prompt, max_tokens=n, ignore_eos=True)
    with client.stream("POST", "/v1/completions", json={
            "model": MODEL, "prompt": prompt, "max_tokens": n, "ignore_eos": True, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == n
    assert usage_chunk["usage"]["prompt_tokens"] == whole["usage"]["prompt_tokens"]
    content = events[:-2]
    assert all(e["object"] == "text_completion" and e["usage"] is None for e in content)
    assert [e["choices"][0]["finish_reason"] for e in content][-1] == "length"
    assert "".join(e["choices"][0]["text"] for e in content) == whole["choices"][0]["text"]


def test_streaming_chat_role_first_then_content_then_usage(client):
    with client.stream("POST", "/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}) as r:
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-2]["usage"]["completion_tokens"] == 4 and events[-2]["choices"] == []
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])


def test_stream_without_usage_option_has_no_usage_chunk(client):
    with client.stream("POST", "/v1/completions", json={"model": MODEL, "prompt": "a", "max_tokens": 3,
                                                        "ignore_eos": True, "stream": True}) as r:
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    assert all("usage" not in e for e in events[:-1])
    assert all(e["choices"] for e in events[:-1])


def test_continuous_usage_stats_puts_running_usage_on_every_chunk(client):
    with client.stream("POST", "/v1/completions", json={
            "model": MODEL, "prompt": "count", "max_tokens": 4, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}) as r:
        events = sse_events(r.iter_lines())
    content = events[:-2]
    counts = [e["usage"]["completion_tokens"] for e in content]
    assert counts == sorted(counts) and counts[-1] == 4
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 4


def test_openai_client_stream_and_non_stream(oai):
    stream = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello"}],
                                         max_tokens=5, stream=True, stream_options={"include_usage": True},
                                         extra_body={"ignore_eos": True})
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert chunks[0].choices[0].delta.role == "assistant"
    done = oai.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert done.usage.completion_tokens == 3 and done.choices[0].finish_reason == "length"
    assert [m.id for m in oai.models.list()] == [MODEL]


def test_seed_makes_sampling_reproducible(client):
    a = completion(client, prompt="seeded", max_tokens=8, temperature=1.0, seed=1234, ignore_eos=True)
    b = completion(client, prompt="seeded", max_tokens=8, temperature=1.0, seed=1234, ignore_eos=True)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]


def test_stop_string_ends_the_request(client):
    base = completion(client, prompt="stop test", max_tokens=12, ignore_eos=True)["choices"][0]["text"]
    stop = next((base[i:i + 2] for i in range(2, len(base) - 1)
                 if "\ufffd" not in base[i:i + 2] and base[i:i + 2] not in base[:i]), None)
    if stop is None:
        pytest.skip(f"the tiny model's greedy text {base!r} has no usable stop string")
    body = completion(client, prompt="stop test", max_tokens=12, stop=[stop], ignore_eos=True)
    assert body["choices"][0]["finish_reason"] == "stop"
    assert stop not in body["choices"][0]["text"]
    assert base.startswith(body["choices"][0]["text"])


def test_min_tokens_reach_max_tokens_without_ignore_eos(client):
    body = completion(client, prompt="m", max_tokens=6, min_tokens=6)
    assert body["usage"]["completion_tokens"] == 6


# Metrics --------------------------------------------------------------------------------------------


def test_metrics_move_with_requests(client):
    before = wait_idle(client)
    num_requests = 4
    usages = [completion(client, prompt=f"metrics {i}", max_tokens=3 + i, ignore_eos=True)["usage"]
              for i in range(num_requests)]
    expected_generated = sum(u["completion_tokens"] for u in usages)
    deadline = time.monotonic() + 10
    while True:   # counters follow the engine's totals on its next loop
        after = wait_idle(client)
        generated = value(after, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total")
        if generated >= expected_generated or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("vllm:request_success_total", finished_reason="length") == num_requests
    assert generated == expected_generated
    assert delta("vllm:time_to_first_token_seconds_count") == num_requests
    assert delta("vllm:e2e_request_latency_seconds_count") == num_requests
    assert delta("vllm:request_generation_tokens_sum") == expected_generated
    assert delta("vllm:request_prompt_tokens_sum") == sum(u["prompt_tokens"] for u in usages)
    assert delta("vllm:prompt_tokens_total") > 0
    assert delta("vllm:iteration_tokens_total_count") >= expected_generated
    assert delta("vllm:inter_token_latency_seconds_count") == expected_generated - num_requests
    assert value(after, "vllm:kv_cache_usage_perc") == 0
    info = [k for k in after if k[0] == "vllm:cache_config_info"]
    assert len(info) == 1 and {"block_size", "num_gpu_blocks", "cache_dtype"} <= {n for n, _ in info[0][1]}


def test_prefix_cache_hits_show_in_usage_and_metrics(client):
    before = wait_idle(client)
    prompt = "A shared system prompt that is long enough to fill several KV blocks. " * 3
    first = completion(client, prompt=prompt, max_tokens=2, ignore_eos=True)
    second = completion(client, prompt=prompt, max_tokens=2, ignore_eos=True)
    assert first["usage"]["prompt_tokens"] == second["usage"]["prompt_tokens"] > 64
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 48
    after = wait_idle(client)
    hits = value(after, "vllm:prefix_cache_hits_total") - value(before, "vllm:prefix_cache_hits_total")
    queries = value(after, "vllm:prefix_cache_queries_total") - value(before, "vllm:prefix_cache_queries_total")
    assert hits >= second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert queries >= 2 * first["usage"]["prompt_tokens"] - 2


def test_client_disconnect_aborts_and_frees_blocks(client, reference_server):
    before = wait_idle(client)
    with httpx.Client(base_url=reference_server.url, timeout=60.0, trust_env=False) as own:
        with own.stream("POST", "/v1/completions", json={
                "model": MODEL, "prompt": "a long one " * 20, "max_tokens": 3000, "ignore_eos": True,
                "stream": True}) as r:
            lines = r.iter_lines()
            received = [line for line, _ in zip(lines, range(6), strict=False)]
            assert any(line.startswith("data: ") for line in received)
            deadline = time.monotonic() + 10      # gauges follow the engine every 25 ms, not every token
            during = metrics(client)
            while value(during, "vllm:num_requests_running") != 1 and time.monotonic() < deadline:
                time.sleep(0.02)
                during = metrics(client)
            assert value(during, "vllm:num_requests_running") == 1
            assert value(during, "vllm:kv_cache_usage_perc") > 0
        # leaving both blocks closes the connection mid-stream
    after = wait_idle(client)
    assert value(after, "vllm:kv_cache_usage_perc") == 0
    assert value(after, "vllm:num_requests_running") == 0
    assert value(after, "vllm:request_success_total", finished_reason="length") == \
        value(before, "vllm:request_success_total", finished_reason="length")
    generated = value(after, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total")
    assert 0 < generated < 3000, "the aborted request must stop generating"
    assert completion(client, prompt="still serving", max_tokens=2)["usage"]["completion_tokens"] >= 1


def test_non_stream_client_that_gives_up_aborts_its_request(client, reference_server):
    before = wait_idle(client)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{reference_server.url}/v1/completions", timeout=httpx.Timeout(60.0, read=0.3),
                   json={"model": MODEL, "prompt": "slow", "max_tokens": 3000, "ignore_eos": True},
                   trust_env=False)
    after = wait_idle(client)
    assert value(after, "vllm:kv_cache_usage_perc") == 0
    generated = value(after, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total")
    assert 0 < generated < 3000


# Bad input --------------------------------------------------------------------------------------------


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == status and err["message"] and err["type"]
    return err


def test_400_paths(client, reference_server):
    max_model_len = client.get("/v1/models").json()["data"][0]["max_model_len"]
    post = client.post
    _error(post("/v1/completions", content=b"{nope", headers={"content-type": "application/json"}), 400)
    assert _error(post("/v1/chat/completions", json={"model": MODEL}), 400)["param"] == "messages"
    assert _error(post("/v1/completions", json={"model": MODEL, "prompt": "x",
                                                "max_tokens": max_model_len + 1}), 400)["param"] == "max_tokens"
    too_long = "x" * (max_model_len + 10)
    assert "maximum context length" in _error(post("/v1/completions", json={
        "model": MODEL, "prompt": too_long, "max_tokens": 1}), 400)["message"]
    _error(post("/v1/completions", json={"model": MODEL, "prompt": "x", "temperature": -1}), 400)
    _error(post("/v1/completions", json={"model": MODEL, "prompt": [99999]}), 400)
    assert _error(post("/v1/completions", json={"model": "gpt-4", "prompt": "x"}), 404)["param"] == "model"
    _error(client.get("/v1/nothing-here"), 404)
    assert completion(client, prompt="after errors", max_tokens=2)["choices"]


def test_413_for_oversized_body(client):
    body = json.dumps({"model": MODEL, "prompt": "y" * 1_100_000}).encode()   # the fixture allows 1 MiB
    err = _error(client.post("/v1/completions", content=body, headers={"content-type": "application/json"}),
                 413)
    assert "1048576" in err["message"]

    def chunked():   # no Content-Length: the limit is enforced while reading
        for _ in range(20):
            yield b"z" * 65536

    err = _error(client.post("/v1/completions", content=chunked(), headers={"content-type": "application/json"}),
                 413)
    assert "exceeds 1048576" in err["message"]
    assert completion(client, prompt="after 413", max_tokens=2)["choices"]


# Load ------------------------------------------------------------------------------------------------


def test_concurrency_32_without_errors(reference_server):
    num_requests, max_tokens = 32, 4

    async def one(http: httpx.AsyncClient, i: int) -> int:
        async with http.stream("POST", "/v1/chat/completions", json={
                "model": MODEL, "messages": [{"role": "user", "content": f"request {i}"}],
                "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}) as r:
            assert r.status_code == 200
            events = sse_events([line async for line in r.aiter_lines()])
        assert events[-1] == "[DONE]"
        return events[-2]["usage"]["completion_tokens"]

    async def main() -> list[int]:
        limits = httpx.Limits(max_connections=num_requests)
        async with httpx.AsyncClient(base_url=reference_server.url, timeout=120.0, limits=limits,
                                     trust_env=False) as http:
            return await asyncio.gather(*(one(http, i) for i in range(num_requests)))

    assert asyncio.run(main()) == [max_tokens] * num_requests
