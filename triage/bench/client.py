"""One streaming request in, one RequestRecord out. It never raises for what the server does; every failure
becomes an error kind (http_500, timeout, disconnected, connection_reset, malformed_sse, ended_early, ...).

Timestamps: `t0` is taken after the body is encoded, just before the request is written. Each network read is
stamped with perf_counter() in the protocol's data_received (http.py) and only then handed to the incremental
SSE parser (sse.py), so parsing never delays its own timestamp and costs the loop microseconds at a time.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from triage.bench.http import HttpError
from triage.bench.pool import ConnectionPool
from triage.bench.prompts import PromptItem
from triage.bench.records import RequestRecord
from triage.bench.run_config import Endpoint
from triage.bench.sse import SseParser, StreamResult


@dataclass(frozen=True, slots=True)
class RequestOptions:
    endpoint: Endpoint
    model: str
    send_ignore_eos: bool = True  # ignore_eos + min_tokens, so outputs are as long as asked
    # vLLM's continuous_usage_stats: usage on every chunk, so a multi-token chunk's ITL is split by its real
    # token count (the preflight turns it off for a server that rejects it)
    continuous_usage: bool = True
    request_id_header: str | None = "X-Request-Id"  # None: send no request id


def build_payload(item: PromptItem, opts: RequestOptions) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": opts.model, "max_tokens": item.output_tokens, "stream": True,
                               "temperature": 0.0}
    if item.messages is not None:
        payload["messages"] = list(item.messages)
    elif opts.endpoint is Endpoint.CHAT:
        payload["messages"] = [{"role": "user", "content": item.prompt}]
    else:
        payload["prompt"] = item.prompt
    payload["stream_options"] = {"include_usage": True}
    if opts.continuous_usage:
        payload["stream_options"]["continuous_usage_stats"] = True
    if opts.send_ignore_eos:
        payload["ignore_eos"] = True
        payload["min_tokens"] = item.output_tokens
    return payload


def completed_without_text(result: StreamResult) -> bool:
    """A stream that ended normally ([DONE] or a finish_reason) whose usage says the server generated tokens,
    though no chunk carried text: the tokens decoded to nothing printable (llama.cpp streams one final chunk
    with "text": ""), or a reasoning model spent max_tokens where we do not see it. Served, not failed."""
    normal_end = result.done or result.finish_reason is not None
    return normal_end and result.completion_tokens is not None and result.completion_tokens > 0


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


def reply_text(body: bytes, chat: bool) -> str:
    """The generated text of a whole SSE body (multi-turn keeps it as the next turn's history). Read after the
    stream ended, so it never delays a timestamp."""
    parts = []
    for line in body.split(b"\n"):
        line = line.strip()
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue
        try:
            obj = json.loads(line[5:])
        except ValueError:
            continue
        choices = obj.get("choices") if isinstance(obj, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") if chat else choice
            text = delta.get("content" if chat else "text") if isinstance(delta, dict) else None
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)


def _stream_error(result: StreamResult, exc_kind: str | None,
                  exc_text: str | None) -> tuple[str | None, str | None, bool]:
    """(error kind, error, whether the server finished with no text at all) of a 200 response's stream."""
    error_kind, error = result.error_kind, result.error
    if exc_kind is not None and result.done and error_kind is None:
        # The server itself ended the stream ([DONE]) and then closed the connection: not a dropped connection.
        if result.finish_reason is None:
            error_kind, error = "ended_early", (f"the server ended the stream ([DONE]) after {len(result.chunk_times)} "
                                                "content chunk(s) with no finish_reason, then closed the connection")
    elif exc_kind is not None and error_kind in (None, "truncated"):
        error_kind, error = exc_kind, exc_text  # the transport's reason beats "the stream ended early"
    no_text = error_kind is None and not result.chunk_times and completed_without_text(result)
    if error_kind is None and not result.chunk_times and not no_text:
        error_kind, error = "no_content", ("the stream finished without a content chunk and without "
                                           "usage.completion_tokens > 0")
    if error_kind is None and not result.done and result.finish_reason is None:
        error_kind, error = "truncated", "the stream ended without [DONE] or a finish_reason"
    return error_kind, error, no_text


def _output_tokens(result: StreamResult, num_chunks: int) -> tuple[int, str]:
    """(output tokens, where the count came from)."""
    if result.completion_tokens is not None:
        return result.completion_tokens, "usage"
    # No usable usage count: the chunks are counted instead, and a usage the server did send but that was
    # negative or absurd is named, so it is never a silent success.
    return num_chunks, "chunks_bad_usage" if result.num_bad_usage else "chunks"


async def send(pool: ConnectionPool, item: PromptItem, opts: RequestOptions, *, level: str, repeat: int,
               warmup: bool, epoch: float, timeout_s: float = 60.0, slot_wait_s: float = 0.0,
               wall_epoch_s: float | None = None, text_out: list[str] | None = None) -> RequestRecord:
    """Send one streaming request and time it. `epoch` is the run's perf_counter() origin and `wall_epoch_s`
    the wall clock (epoch seconds) at that origin; `timeout_s` is how long the server may send nothing before
    the request counts as a timeout. With `text_out`, the reply's text is appended to it."""
    body = json.dumps(build_payload(item, opts)).encode()
    status: int | None = None
    exc_kind: str | None = None
    exc_text: str | None = None
    response = None
    perf = time.perf_counter
    request_id = uuid.uuid4().hex if opts.request_id_header else None
    headers = {opts.request_id_header: request_id} if opts.request_id_header else None
    chat = opts.endpoint is Endpoint.CHAT or item.messages is not None
    parser = SseParser(chat=chat)
    raw: list[bytes] = []
    on_piece = parser.feed
    if text_out is not None:
        def on_piece(t: float, data: bytes) -> None:
            parser.feed(t, data)
            raw.append(data)
    started = perf()
    try:
        response = await pool.post_stream(opts.endpoint.path if item.messages is None else Endpoint.CHAT.path,
                                          body, timeout_s, on_piece=on_piece, headers=headers)
    except HttpError as e:
        exc_kind, exc_text = e.kind, str(e)[:300]
        response = e.response
        replica = getattr(e, "replica", None)
    else:
        replica = response.replica
    end = perf()
    body_bytes = response.body if response is not None else b""
    status = response.status if response is not None else None
    t0 = response.t_sent if response is not None and response.t_sent is not None else started

    def wall(t: float) -> float | None:
        return None if wall_epoch_s is None else wall_epoch_s + (t - epoch)

    common = dict(
        level=level, repeat=repeat, index=item.index, warmup=warmup, t0_s=t0 - epoch, end_s=end - t0,
        slot_wait_s=slot_wait_s, requested_output_tokens=item.output_tokens, http_status=status,
        connect_s=response.connect_s if response is not None else end - started,
        new_connection=response is not None and not response.reused and response.t_sent is not None,
        retried=response.retried if response is not None else False,
        request_id=request_id, send_epoch_s=wall(t0), end_epoch_s=wall(end),
        conversation=item.conversation, turn=item.turn, trace_line=item.trace_line, replica=replica)
    if status is not None and status != 200:
        return RequestRecord(**common, error_kind=f"http_{status}", error=_error_message(status, body_bytes))

    result = parser.finish()
    error_kind, error, no_text = _stream_error(result, exc_kind, exc_text)
    if text_out is not None and error_kind is None:
        text_out.append(reply_text(b"".join(raw), chat))

    times = [t - t0 for t in result.chunk_times]
    output_tokens, source = _output_tokens(result, len(times))
    chunk_tokens = result.chunk_tokens if times and all(k is not None for k in result.chunk_tokens) else None

    def since(t: float | None) -> float | None:
        return None if t is None else t - t0

    if no_text:
        return RequestRecord(**common, e2e_s=end - t0, input_tokens=result.prompt_tokens,
                             output_tokens=result.completion_tokens, output_tokens_source="usage", no_text=True)
    return RequestRecord(
        **common, ttft_s=times[0] if times else None, e2e_s=times[-1] if times else None,
        input_tokens=result.prompt_tokens, output_tokens=output_tokens if times else None,
        output_tokens_source=source if times else None,
        chunk_times_s=times, chunk_tokens=chunk_tokens,  # type: ignore[arg-type]
        num_reasoning_chunks=result.num_reasoning_chunks, error_kind=error_kind, error=error,
        first_token_epoch_s=wall(result.chunk_times[0]) if times else None,
        ttft_reasoning_s=since(result.first_reasoning_time) if result.num_reasoning_chunks else None,
        ttft_answer_s=since(result.first_answer_time) if result.num_reasoning_chunks else None)


def auth_headers(headers: dict[str, str], api_key: str | None) -> dict[str, str]:
    out = dict(headers)
    if api_key:
        out["authorization"] = f"Bearer {api_key}"
    return out


def make_pool(url: str, pool_size: int, timeout_s: float, headers: dict[str, str],
              api_key: str | None) -> ConnectionPool:
    """The load's one connection pool, sized to the most requests ever in flight."""
    return ConnectionPool(url, pool_size, connect_timeout_s=min(10.0, timeout_s),
                          headers=auth_headers(headers, api_key))


def make_client(url: str, timeout_s: float, headers: dict[str, str], api_key: str | None) -> httpx.AsyncClient:
    """httpx for the few non-load requests (/v1/models, /metrics)."""
    return httpx.AsyncClient(base_url=url.rstrip("/"), headers=auth_headers(headers, api_key),
                             timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)))
