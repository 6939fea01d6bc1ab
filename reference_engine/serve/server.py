"""`triage serve`: the reference engine behind an OpenAI-compatible HTTP API, with vLLM's /metrics.

To a client it looks like a vLLM server: the same endpoints, SSE framing, error bodies, metric
names and startup log lines, so whatever works against it works against vLLM. The engine runs on
one background thread (server_worker.py); the event loop only parses, routes and frames.
"""
from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from triage import __version__
from triage.core.errors import EngineError, UsageError
from triage.reference_engine.serve import server_protocol as proto
from triage.reference_engine.serve.metrics_export import ServerMetrics
from triage.reference_engine.serve.server_protocol import ApiError, Usage
from triage.reference_engine.serve.server_startup import (
    bind_socket,
    cache_config_info,
    configure_logging,
    log_startup,
    safe_argv,
)
from triage.reference_engine.serve.server_worker import EngineFailure, EngineWorker, SamplingRequest

log = logging.getLogger("triage.serve")

ENGINE_NAME = "triage-reference"
DEFAULT_MAX_REQUEST_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    api_key: str | None = None
    max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES
    access_log: bool = False
    log_level: str = "info"
    graceful_shutdown_s: float = 5.0
    inject_delay_ms: float = 0.0  # a known slowdown for compare's A/A benchmark: sleep before each generation


@dataclass(frozen=True, slots=True)
class ServedModel:
    name: str
    root: str
    max_model_len: int
    created: int


# The app --------------------------------------------------------------------------------------------


def create_app(worker: EngineWorker, model: ServedModel, metrics: ServerMetrics | None,
               options: ServerOptions) -> FastAPI:
    """The FastAPI app over a started EngineWorker. Pure wiring: no engine calls on the loop."""
    app = FastAPI(title=f"{ENGINE_NAME} OpenAI-compatible server", version=__version__,
                  docs_url=None, redoc_url=None, openapi_url=None)
    _add_error_handlers(app)
    _add_info_routes(app, worker, model, metrics, options)
    _add_generation_routes(app, worker, model, options)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as an OpenAI-shaped error body."""

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status_code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        err_type = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(proto.error_body(exc.status_code, str(exc.detail), err_type),
                            status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s while serving a request: %s", type(exc).__name__, exc, exc_info=exc)
        return JSONResponse(proto.error_body(500, f"internal error: {type(exc).__name__}",
                                             "internal_server_error"), status_code=500)


def _check_auth(request: Request, api_key: str | None) -> None:
    if api_key is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
        raise ApiError(401, "Incorrect or missing API key: send `Authorization: Bearer <key>`.",
                       err_type="authentication_error")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body is {int(declared)} bytes; this server accepts at most "
                            f"{limit} (--max-request-body-bytes)", err_type="request_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body exceeds {limit} bytes (--max-request-body-bytes)",
                           err_type="request_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _check_model(name: str | None, model: ServedModel) -> None:
    if name is not None and name != model.name:
        raise ApiError(404, f"The model `{name}` does not exist. This server serves `{model.name}`.",
                       err_type="not_found_error", param="model")


def _add_info_routes(app: FastAPI, worker: EngineWorker, model: ServedModel, metrics: ServerMetrics | None,
                     options: ServerOptions) -> None:
    """/health, /version, /metrics and /v1/models."""

    @app.get("/health")
    async def health() -> Response:
        if not worker.alive:
            return JSONResponse(proto.error_body(503, f"engine is not running: {worker.failure}",
                                                 "service_unavailable"), status_code=503)
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> dict[str, str]:
        return {"version": __version__, "engine": ENGINE_NAME}

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        body = metrics.render() if metrics is not None else b""
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        _check_auth(request, options.api_key)
        return {"object": "list", "data": [{
            "id": model.name, "object": "model", "created": model.created, "owned_by": ENGINE_NAME,
            "root": model.root, "parent": None, "max_model_len": model.max_model_len, "permission": [],
        }]}


def _add_generation_routes(app: FastAPI, worker: EngineWorker, model: ServedModel, options: ServerOptions) -> None:
    """/v1/completions and /v1/chat/completions."""

    async def parse(request: Request, kind: type) -> Any:
        """Authorize, read and validate one generation request (ApiError -> its status)."""
        _check_auth(request, options.api_key)
        req = proto.parse_request(await _read_body(request, options.max_request_body_bytes), kind)
        _check_model(req.model, model)
        req.check_supported()
        if options.inject_delay_ms > 0:
            await asyncio.sleep(options.inject_delay_ms / 1000.0)
        return req

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        arrival_s = time.monotonic()
        req: proto.CompletionRequest = await parse(request, proto.CompletionRequest)
        prompt = req.single_prompt()
        max_tokens = req.max_tokens if req.max_tokens is not None else proto.COMPLETION_DEFAULT_MAX_TOKENS
        return await _generate(request, worker, model, req, prompt, max_tokens, arrival_s, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        arrival_s = time.monotonic()
        req: proto.ChatCompletionRequest = await parse(request, proto.ChatCompletionRequest)
        prompt = proto.render_chat(req.messages)
        return await _generate(request, worker, model, req, prompt, req.effective_max_tokens(),
                               arrival_s, chat=True)


async def _generate(request: Request, worker: EngineWorker, model: ServedModel, req: Any,
                    prompt: str | list[int], max_tokens: int | None, arrival_s: float,
                    chat: bool) -> Response:
    sampling = SamplingRequest(max_tokens=max_tokens, temperature=req.temperature, top_p=req.top_p,
                               seed=req.seed, stop=req.stop_sequences(), ignore_eos=req.ignore_eos,
                               min_tokens=req.min_tokens)
    rid = proto.new_request_id("chatcmpl" if chat else "cmpl")
    outputs, num_prompt_tokens = await worker.submit(rid, prompt, sampling, arrival_s)
    created = proto.now_unix_s()
    if req.stream:
        if chat:
            build, usage_object, opening = proto.chat_chunk, "chat.completion.chunk", {"role": "assistant", "content": ""}
        else:
            build, usage_object, opening = _completion_chunk, "text_completion", None
        gen = _stream(rid, model.name, created, outputs, num_prompt_tokens, req.include_usage,
                      req.continuous_usage, build, usage_object, opening)
        return _AbortOnCloseStream(gen, on_close=lambda: worker.abort(rid), media_type="text/event-stream",
                                   headers={"Cache-Control": "no-cache", "X-Request-Id": rid})
    text, finish_reason, usage = await _collect_unless_disconnected(request, worker, rid, outputs,
                                                                    num_prompt_tokens)
    make = proto.chat_body if chat else proto.completion_body
    return JSONResponse(make(rid, model.name, created, text, finish_reason, usage),
                        headers={"X-Request-Id": rid})


class _AbortOnCloseStream(StreamingResponse):
    """A StreamingResponse that aborts its engine request however the response ends (a client that
    disconnects mid-stream included), so the request's KV blocks are freed at once."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def _outputs(outputs: asyncio.Queue) -> AsyncIterator[Any]:
    """The request's outputs in order. When the handler has fallen behind the engine, the outputs
    waiting in its queue are merged into one (as vLLM's output collector does), so a slow client costs
    one chunk per catch-up instead of one per token."""
    while True:
        item = await outputs.get()
        while not isinstance(item, EngineFailure) and not item.finished and not outputs.empty():
            nxt = outputs.get_nowait()
            item = nxt if isinstance(nxt, EngineFailure) else _merge(item, nxt)
        if isinstance(item, EngineFailure):
            raise ApiError(500, f"the engine failed while generating: {item.message}",
                           err_type="internal_server_error")
        yield item
        if item.finished:
            return


def _merge(first: Any, second: Any) -> Any:
    """Two consecutive outputs of one request as one: tokens and text joined, the rest from the later."""
    return dataclasses.replace(second, new_token_ids=[*first.new_token_ids, *second.new_token_ids],
                               text_delta=first.text_delta + second.text_delta)


def _usage(out: Any, num_prompt_tokens: int) -> Usage:
    return Usage(prompt_tokens=int(out.num_prompt_tokens or num_prompt_tokens),
                 completion_tokens=int(out.num_output_tokens),
                 cached_tokens=int(out.num_cached_tokens or 0))


async def _collect_unless_disconnected(request: Request, worker: EngineWorker, rid: str,
                                       outputs: asyncio.Queue,
                                       num_prompt_tokens: int) -> tuple[str, str | None, Usage]:
    async def collect() -> tuple[str, str | None, Usage]:
        parts: list[str] = []
        usage, finish_reason = Usage(prompt_tokens=num_prompt_tokens), None
        async for out in _outputs(outputs):
            parts.append(out.text_delta)
            usage = _usage(out, num_prompt_tokens)
            finish_reason = out.finish_reason if out.finished else None
        return "".join(parts), finish_reason, usage

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    collecting = asyncio.ensure_future(collect())
    watching = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({collecting, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not collecting.done():
            collecting.cancel()
            worker.abort(rid)
    if not collecting.done() or collecting.cancelled():
        # The client is gone and its request aborted; nobody will read this response.
        return "", "abort", Usage(prompt_tokens=num_prompt_tokens)
    return collecting.result()


ChunkBuilder = Callable[[str, str, int, dict[str, Any], str | None, Usage | None], dict[str, Any]]


def _completion_chunk(rid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None,
                      usage: Usage | None) -> dict[str, Any]:
    return proto.completion_chunk(rid, model, created, delta.get("content", ""), finish_reason, usage)


async def _stream(rid: str, model: str, created: int, outputs: asyncio.Queue, num_prompt_tokens: int,
                  include_usage: bool, continuous_usage: bool, build: ChunkBuilder, usage_object: str,
                  opening_delta: dict[str, Any] | None = None) -> AsyncIterator[bytes]:
    """SSE bytes of one streamed request: ``build`` shapes each chunk from a delta ``{"content": ...}``
    (empty on a finish without text); ``opening_delta``, if given, is sent first (chat's role chunk).
    Aborting the request when the stream ends early is _AbortOnCloseStream's job."""
    usage = Usage(prompt_tokens=num_prompt_tokens)

    def chunk(delta: dict[str, Any], finish_reason: str | None) -> bytes:
        body = build(rid, model, created, delta, finish_reason, usage if continuous_usage else None)
        if include_usage and not continuous_usage:
            body["usage"] = None
        return proto.sse(body)

    try:
        if opening_delta is not None:
            yield chunk(opening_delta, None)
        async for out in _outputs(outputs):
            usage = _usage(out, num_prompt_tokens)
            if out.text_delta or out.finished:
                yield chunk({"content": out.text_delta} if out.text_delta else {},
                            out.finish_reason if out.finished else None)
        if include_usage:
            yield proto.sse(proto.usage_chunk(rid, model, created, usage_object, usage))
    except ApiError as e:
        yield proto.sse(e.body())
    yield proto.SSE_DONE


# Running it ----------------------------------------------------------------------------------------


def run_server(engine_config: Any, options: ServerOptions) -> int:
    """Load the engine, serve until SIGINT/SIGTERM, shut down cleanly. Returns the exit code."""
    if options.max_request_body_bytes <= 0:
        raise UsageError("--max-request-body-bytes must be positive")
    sock = bind_socket(options.host, options.port)
    configure_logging(options.log_level)   # only once the server will really run: it owns the process
    host, port = sock.getsockname()[:2]
    try:
        log.info("%s %s: %s", ENGINE_NAME, __version__, " ".join(safe_argv()))
        from triage.reference_engine.engine.llm_engine import LLMEngine
        started_s = time.monotonic()
        try:
            engine = LLMEngine(engine_config)
        except (ValueError, TypeError, OSError) as e:
            raise EngineError(f"could not start the reference engine: {e}") from None
        model = ServedModel(name=options.served_model_name or str(engine_config.model),
                            root=str(engine_config.model), max_model_len=int(engine.max_model_len),
                            created=proto.now_unix_s())
        log_startup(engine, model, replace(options, host=host, port=port))
        log.info("engine ready in %.1f s", time.monotonic() - started_s)

        metrics = ServerMetrics(model.name, model.max_model_len)
        metrics.set_cache_config(cache_config_info(engine, engine_config))
        worker = EngineWorker(engine, metrics)
        worker.start()
        app = create_app(worker, model, metrics, options)
        config = uvicorn.Config(app, log_level=options.log_level.lower(), access_log=options.access_log,
                                timeout_graceful_shutdown=options.graceful_shutdown_s,
                                lifespan="off", server_header=False)
        server = _QuietExitServer(config)
        log.info("Starting %s API server on http://%s:%d", ENGINE_NAME, _url_host(host), port)
        try:
            server.run(sockets=[sock])
        finally:
            worker.stop()
        log.info("server stopped")
        return 0
    finally:
        sock.close()


class _QuietExitServer(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown, so the process would die by the
    signal; a server stopped on purpose exits 0 instead, after stopping the engine thread."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
