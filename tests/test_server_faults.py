"""Faults inside the server process: an engine that dies mid-request, and the engine-thread contract.

These run the app in this process (httpx's ASGI transport) over a real tiny engine, so a fault can
be injected into its step."""
from __future__ import annotations

import asyncio
import inspect

import httpx
import pytest

from triage.reference_engine.engine.engine_config import EngineConfig
from triage.reference_engine.engine.llm_engine import LLMEngine
from triage.reference_engine.serve.metrics_export import ServerMetrics
from triage.reference_engine.serve.server import ServedModel, ServerOptions, create_app
from triage.reference_engine.serve.server_worker import EngineWorker


@pytest.fixture()
def app_and_worker():
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=256, num_kv_blocks=64))
    metrics = ServerMetrics("tiny", engine.max_model_len)
    worker = EngineWorker(engine, metrics)
    worker.start()
    app = create_app(worker, ServedModel("tiny", "tiny", engine.max_model_len, 0), metrics,
                     ServerOptions(api_key=None))
    try:
        yield app, worker, engine
    finally:
        worker.stop()


async def _post(app, path: str, body: dict) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as http:
        return await http.post(path, json=body)


async def _get(app, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as http:
        return await http.get(path)


def test_in_process_app_serves_a_request(app_and_worker):
    app, _worker, _engine = app_and_worker
    r = asyncio.run(_post(app, "/v1/completions", {"prompt": "ok", "max_tokens": 3, "ignore_eos": True}))
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 3


def test_fp8_kv_cache_engine_serves_and_frees_its_blocks():
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=256, num_kv_blocks=64, kv_cache_dtype="fp8"))
    worker = EngineWorker(engine, None)
    worker.start()
    app = create_app(worker, ServedModel("tiny", "tiny", engine.max_model_len, 0), None, ServerOptions(api_key=None))
    try:
        r = asyncio.run(_post(app, "/v1/completions", {"prompt": "fp8 " * 10, "max_tokens": 5, "ignore_eos": True}))
    finally:
        worker.stop()
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 5
    stats = engine.stats()
    assert stats.kv_cache_dtype == "fp8_e4m3" and stats.num_kv_blocks_free == stats.num_kv_blocks_total


def test_engine_that_dies_mid_request_gives_500_then_503(app_and_worker, monkeypatch):
    app, worker, engine = app_and_worker

    def broken_step():
        raise RuntimeError("simulated kernel failure")

    monkeypatch.setattr(engine, "step", broken_step)
    r = asyncio.run(_post(app, "/v1/completions", {"prompt": "boom", "max_tokens": 5}))
    assert r.status_code == 500
    assert "simulated kernel failure" in r.json()["error"]["message"]
    assert not worker.alive and "simulated kernel failure" in worker.failure
    health = asyncio.run(_get(app, "/health"))
    assert health.status_code == 503
    again = asyncio.run(_post(app, "/v1/completions", {"prompt": "again", "max_tokens": 2}))
    assert again.status_code == 503
    assert again.json()["error"]["type"] == "service_unavailable"


def test_prompt_past_max_model_len_is_a_400(app_and_worker):
    app, _worker, _engine = app_and_worker   # max_model_len 256
    r = asyncio.run(_post(app, "/v1/completions", {"prompt": "x" * 300, "max_tokens": 1}))
    assert r.status_code == 400
    assert "256" in r.json()["error"]["message"]


def test_served_model_name_is_the_only_name_accepted():
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=128, num_kv_blocks=16))
    worker = EngineWorker(engine, None)
    worker.start()
    try:
        app = create_app(worker, ServedModel("my-alias", "tiny", engine.max_model_len, 0), None,
                         ServerOptions())
        models = asyncio.run(_get(app, "/v1/models")).json()
        assert [m["id"] for m in models["data"]] == ["my-alias"]
        assert asyncio.run(_post(app, "/v1/completions", {"model": "tiny", "prompt": "x"})).status_code == 404
        ok = asyncio.run(_post(app, "/v1/completions", {"model": "my-alias", "prompt": "x", "max_tokens": 2}))
        assert ok.status_code == 200 and ok.json()["model"] == "my-alias"
    finally:
        worker.stop()


def test_serve_binds_loopback_by_default():
    from triage.commands import serve as serve_cmd

    params = inspect.signature(serve_cmd.serve.__wrapped__).parameters
    assert params["host"].default.default == "127.0.0.1"
    assert ServerOptions().host == "127.0.0.1"
