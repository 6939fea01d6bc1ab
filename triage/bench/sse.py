"""Turning the raw bytes of an OpenAI-style SSE stream into timed content chunks. Pure: no I/O.

The transport stamps every network read with its arrival time before handing the bytes over; an event's time
is the arrival of the read that completed it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

DONE = b"[DONE]"


@dataclass(slots=True)
class StreamResult:
    chunk_times: list[float] = field(default_factory=list)  # arrival of each content chunk (absolute)
    chunk_tokens: list[int | None] = field(default_factory=list)  # per-chunk usage delta, when reported
    num_reasoning_chunks: int = 0
    first_reasoning_time: float | None = None  # arrival of the first reasoning_content chunk (absolute)
    first_answer_time: float | None = None  # arrival of the first answer (content/text) chunk (absolute)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False  # saw [DONE]
    finish_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    num_bad_usage: int = 0  # usage numbers that were negative, not integers, or absurd: not measured

    def fail(self, kind: str, message: str) -> None:
        if self.error_kind is None:
            self.error_kind, self.error = kind, message[:300]


def _content_of(choice: dict, chat: bool) -> tuple[bool, bool]:
    """(has content, is reasoning) for one choice of a chunk. Role-only and empty deltas are not content."""
    if chat:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise ValueError("a chat choice's delta is not an object")
        if delta.get("content"):
            return True, False
        if delta.get("reasoning_content") or delta.get("reasoning"):
            return True, True
        return False, False
    text = choice.get("text")
    if text:
        return True, False
    if choice.get("reasoning_content") or choice.get("reasoning"):
        return True, True
    return False, False


MAX_USAGE_TOKENS = 10_000_000   # more tokens than any context window: the number is not believable


def _tokens(value: object, out: StreamResult) -> int | None:
    """A usage count within bounds, or None (counted in `num_bad_usage` when one was sent but is unusable)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_USAGE_TOKENS:
        return value
    out.num_bad_usage += 1
    return None


def _decode(data: bytes, out: StreamResult) -> dict | None:
    """The event's JSON object; None at [DONE] or when the event is not one (the failure recorded)."""
    if data.strip() == DONE:
        out.done = True
        return None
    try:
        obj = json.loads(data)
    except ValueError as e:
        out.fail("malformed_json", f"an SSE data line is not JSON ({e}): {data[:80]!r}")
        return None
    except RecursionError:
        out.fail("malformed_json", f"an SSE data line is JSON nested too deeply to read: {data[:80]!r}")
        return None
    if not isinstance(obj, dict):
        out.fail("malformed_json", f"an SSE event is JSON but not an object: {data[:80]!r}")
        return None
    if "error" in obj:
        err = obj["error"]
        message = err.get("message") if isinstance(err, dict) else str(err)
        out.fail("server_error_event", f"the server sent an error event mid-stream: {message}")
        return None
    return obj


def _usage_completion(usage: object, out: StreamResult) -> int | None:
    """Record the usage block's counts; the completion tokens so far (None when not sent)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = _tokens(usage.get("prompt_tokens"), out), _tokens(usage.get("completion_tokens"), out)
    if prompt is not None:
        out.prompt_tokens = prompt
    if completion is not None:
        out.completion_tokens = completion
    return completion


def _choices_content(choices: list, data: bytes, t: float, chat: bool, out: StreamResult) -> bool | None:
    """Whether the choices carry content (first answer and reasoning times recorded); None on a bad choice."""
    is_content = False
    for choice in choices:
        if not isinstance(choice, dict):
            out.fail("malformed_json", f"a choice is not an object: {data[:80]!r}")
            return None
        try:
            has, reasoning = _content_of(choice, chat)
        except ValueError as e:
            out.fail("malformed_json", f"{e}: {data[:80]!r}")
            return None
        if has:
            is_content = True
            out.num_reasoning_chunks += reasoning
            if reasoning and out.first_reasoning_time is None:
                out.first_reasoning_time = t
            elif not reasoning and out.first_answer_time is None:
                out.first_answer_time = t
        if choice.get("finish_reason"):
            out.finish_reason = choice["finish_reason"]
    return is_content


def _handle_event(data: bytes, t: float, chat: bool, out: StreamResult, state: dict) -> None:
    obj = _decode(data, out)
    if obj is None:
        return
    usage = obj.get("usage")
    usage_completion = _usage_completion(usage, out)
    choices = obj.get("choices")
    if not isinstance(choices, list):
        if usage is None:
            out.fail("malformed_json", f"an SSE event has neither choices nor usage: {data[:80]!r}")
        return
    if not _choices_content(choices, data, t, chat, out):
        return
    out.chunk_times.append(t)
    if usage_completion is not None:
        out.chunk_tokens.append(usage_completion - state["last_usage_completion"])
        state["last_usage_completion"] = usage_completion
    else:
        out.chunk_tokens.append(None)


def _event_data(event: bytes, out: StreamResult) -> list[bytes] | None:
    """The data lines of one event (comments, event, id and retry fields skipped); None on a non-SSE line."""
    data_lines = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data_lines.append(line[5:].lstrip(b" "))
        elif not line or line.startswith(b":") or line.split(b":", 1)[0] in (b"event", b"id", b"retry"):
            continue
        else:
            out.fail("malformed_sse", f"a line of the stream is not SSE: {line[:80]!r}")
            return None
    return data_lines


class SseParser:
    """Incremental: `feed(t, bytes)` as the body arrives, `finish()` at its end. The transport calls feed()
    after it has stamped the read, so parsing costs the event loop a few microseconds per event instead of
    a block at the end of every stream (which, with many streams ending together, delayed other streams'
    timestamps). Parsing stops at the first protocol error (the kind says which)."""

    __slots__ = ("chat", "out", "_buf", "_state", "_cr")

    def __init__(self, chat: bool):
        self.chat = chat
        self.out = StreamResult()
        self._buf = bytearray()
        self._cr = False   # the last read ended with a CR whose LF may come next
        self._state = {"last_usage_completion": 0}

    def feed(self, t: float, piece: bytes) -> None:
        """Linear in the bytes fed, whatever the split: the buffer only grows at its end, each search starts
        where the last one stopped, and consumed events are dropped once per call."""
        out = self.out
        if out.error_kind:
            return
        if self._cr or b"\r" in piece:           # CRLF line ends, a pair possibly split across two reads
            piece = self._lf_only(piece)
        buf = self._buf
        search_from = max(0, len(buf) - 1)
        buf += piece
        pos = 0
        while True:
            end = buf.find(b"\n\n", max(pos, search_from))
            if end < 0:
                break
            event, pos = bytes(buf[pos:end]), end + 2
            data_lines = _event_data(event, out)
            if data_lines is None:
                return
            if data_lines:
                _handle_event(b"\n".join(data_lines), t, self.chat, out, self._state)
                if out.error_kind:
                    return
        if pos:
            del buf[:pos]

    def _lf_only(self, piece: bytes) -> bytes:
        """CRLF as LF; a CR that ends this read is held back until the next shows whether an LF follows."""
        if self._cr:
            piece, self._cr = b"\r" + piece, False
        if piece.endswith(b"\r"):
            piece, self._cr = piece[:-1], True
        return piece.replace(b"\r\n", b"\n")

    def finish(self) -> StreamResult:
        out, buf = self.out, bytes(self._buf)
        if not out.error_kind and buf.strip():
            if buf.lstrip().startswith(b"data:") and not out.done:
                out.fail("truncated", "the stream ended inside an event")
            elif not buf.lstrip().startswith(b"data:"):
                out.fail("malformed_sse", f"trailing bytes are not SSE: {buf[:80]!r}")
        return out


def parse_stream(pieces: list[tuple[float, bytes]], chat: bool) -> StreamResult:
    """Parse the reads of one whole response body."""
    parser = SseParser(chat)
    for t, piece in pieces:
        parser.feed(t, piece)
    return parser.finish()
