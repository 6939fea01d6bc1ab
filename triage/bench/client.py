"""The streaming HTTP client: one request in, one RequestRecord out. It never raises for what the server
does; every failure becomes an error kind (http_500, timeout, disconnected, malformed_sse, ...).

Timestamps: `t0` is taken after the body is encoded, just before the request is handed to httpx. Each network
read is stamped with perf_counter() the moment httpx yields it, before any parsing (see sse.py).
"""
from __future__ import annotations

import errno
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from triage.bench.config import Endpoint
from triage.bench.records import RequestRecord
from triage.bench.sse import parse_stream
from triage.bench.workload import PromptItem


@dataclass(frozen=True, slots=True)
class RequestOptions:
    endpoint: Endpoint
    model: str
    send_ignore_eos: bool = True  # ignore_eos + min_tokens, so outputs are as long as asked
    include_usage: bool = True


def build_payload(item: PromptItem, opts: RequestOptions, max_tokens: int | None = None) -> dict[str, Any]:
    out_tokens = item.output_tokens if max_tokens is None else max_tokens
    payload: dict[str, Any] = {"model": opts.model, "max_tokens": out_tokens, "stream": True, "temperature": 0.0}
    if opts.endpoint is Endpoint.CHAT:
        payload["messages"] = [{"role": "user", "content": item.prompt}]
    else:
        payload["prompt"] = item.prompt
    if opts.include_usage:
        payload["stream_options"] = {"include_usage": True}
    if opts.send_ignore_eos:
        payload["ignore_eos"] = True
        payload["min_tokens"] = out_tokens
    return payload


def _causes(exc: BaseException, depth: int = 8) -> list[BaseException]:
    """The exception and what it wraps (httpx -> httpcore -> anyio -> OSError)."""
    chain = [exc]
    while len(chain) < depth:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def classify_exception(exc: BaseException) -> str:
    """An error kind for a transport failure."""
    chain = _causes(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect_timeout"
    if isinstance(exc, httpx.PoolTimeout):
        return "pool_timeout"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if any(isinstance(c, ConnectionRefusedError) for c in chain) or "refused" in text \
                or "all connection attempts" in text:
            return "connection_refused"
        return "connect_error"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "disconnected"
    if isinstance(exc, httpx.ReadError):
        if any(isinstance(c, ConnectionResetError) or (isinstance(c, OSError) and c.errno == errno.ECONNRESET)
               for c in chain):
            return "connection_reset"
        return "read_error"
    if isinstance(exc, httpx.WriteError):
        return "write_error"
    if isinstance(exc, httpx.HTTPError):
        return "http_error"
    return f"client_{type(exc).__name__}"


def _error_message(status: int, body: bytes) -> str:
    try:
        obj = json.loads(body)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        message = err.get("message") if isinstance(err, dict) else None
        if message:
            return f"HTTP {status}: {message}"[:300]
    except ValueError:
        pass
    return f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}"


async def send(client: httpx.AsyncClient, item: PromptItem, opts: RequestOptions, *, level: str, repeat: int,
               warmup: bool, epoch: float, slot_wait_s: float = 0.0) -> RequestRecord:
    """Send one streaming request and time it. `epoch` is the run's perf_counter() origin."""
    body = json.dumps(build_payload(item, opts)).encode()
    pieces: list[tuple[float, bytes]] = []
    status: int | None = None
    exc_kind: str | None = None
    exc_text: str | None = None
    perf = time.perf_counter
    t0 = perf()
    try:
        async with client.stream("POST", opts.endpoint.path, content=body,
                                 headers={"content-type": "application/json"}) as resp:
            status = resp.status_code
            if status != 200:
                err_body = await resp.aread()
                return RequestRecord(end_s=perf() - t0,
                    level=level, repeat=repeat, index=item.index, warmup=warmup, t0_s=t0 - epoch,
                    slot_wait_s=slot_wait_s, requested_output_tokens=item.output_tokens, http_status=status,
                    error_kind=f"http_{status}", error=_error_message(status, err_body))
            append = pieces.append
            async for raw in resp.aiter_raw():
                append((perf(), raw))
    except Exception as e:  # every transport failure becomes a kind; the run goes on
        exc_kind, exc_text = classify_exception(e), f"{type(e).__name__}: {e}"[:300]

    result = parse_stream(pieces, chat=opts.endpoint is Endpoint.CHAT)
    error_kind, error = result.error_kind, result.error
    if error_kind is None and exc_kind is not None:
        error_kind, error = exc_kind, exc_text
    if error_kind is None and not result.chunk_times:
        error_kind, error = "no_content", "the stream finished without a content chunk"
    if error_kind is None and not result.done and result.finish_reason is None:
        error_kind, error = "truncated", "the stream ended without [DONE] or a finish_reason"

    times = [t - t0 for t in result.chunk_times]
    if result.completion_tokens is not None:
        output_tokens, source = result.completion_tokens, "usage"
    else:
        output_tokens, source = len(times), "chunks"
    chunk_tokens = result.chunk_tokens if times and all(k is not None for k in result.chunk_tokens) else None
    return RequestRecord(
        level=level, repeat=repeat, index=item.index, warmup=warmup, t0_s=t0 - epoch, slot_wait_s=slot_wait_s,
        ttft_s=times[0] if times else None, e2e_s=times[-1] if times else None, end_s=perf() - t0,
        input_tokens=result.prompt_tokens, output_tokens=output_tokens if times else None,
        output_tokens_source=source if times else None, requested_output_tokens=item.output_tokens,
        chunk_times_s=times, chunk_tokens=chunk_tokens,  # type: ignore[arg-type]
        num_reasoning_chunks=result.num_reasoning_chunks, http_status=status,
        error_kind=error_kind, error=error)


def make_client(url: str, pool_size: int, timeout_s: float, headers: dict[str, str],
                api_key: str | None) -> httpx.AsyncClient:
    """One connection pool for the whole run, sized to the most requests ever in flight."""
    all_headers = {"accept-encoding": "identity", **headers}
    if api_key:
        all_headers["authorization"] = f"Bearer {api_key}"
    return httpx.AsyncClient(
        base_url=url.rstrip("/"),
        headers=all_headers,
        limits=httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size),
        timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s), pool=None),
    )
