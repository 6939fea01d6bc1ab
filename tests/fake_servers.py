"""A tiny real HTTP server that speaks the OpenAI streaming API and misbehaves on purpose.

Not a mock: it listens on a loopback port and writes real HTTP/1.1 (chunked SSE) bytes, so the bench client's
own httpx code meets every failure the way it would in production. Each POST to /v1/completions or
/v1/chat/completions takes the next behaviour from `schedule` (then `default`):

  ok            stream max_tokens tokens, one per chunk, with usage and [DONE]
  ok_no_usage   the same without any usage block
  multi         two tokens per chunk, with per-chunk (continuous) usage
  reasoning     chat only: the first half as reasoning_content, then content
  http_500      a 500 with an OpenAI error body
  http_429      a 429 with Retry-After
  drop          two chunks, then the socket is closed mid-body
  reset         two chunks, then a TCP RST
  garbage       a line that is not SSE
  bad_json      an SSE data line that is not JSON
  error_event   one chunk, then an SSE {"error": ...} event
  stall         one chunk, then silence for `stall_s`
  hang          one chunk, then silence until the server stops (for kill tests)
  no_text       llama.cpp's bytes for tokens that decode to nothing printable: one final chunk with "text": "",
                finish_reason "length" and usage.completion_tokens = max_tokens, then [DONE]
  no_text_zero  the same final chunk with usage.completion_tokens 0: the server says it generated nothing

With `reject_fields`, a POST carrying one of those fields (top level or in stream_options) gets a 400.
With `require_api_key`, a POST without that bearer token gets a 401, whatever the schedule says.

Requests with max_tokens <= 2 (the bench preflight probes) are always answered `ok`.
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class FakeState:
    schedule: list[str] = field(default_factory=list)
    default: str = "ok"
    token_delay_s: float = 0.0
    stall_s: float = 5.0
    max_model_len: int = 4096
    model: str = "fake-model"
    lock: threading.Lock = field(default_factory=threading.Lock)
    num_requests: int = 0
    num_completed: int = 0  # responses fully written ([DONE] sent)
    num_running: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    seen: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)     # every request's path, as the server received it
    authorizations: list[str | None] = field(default_factory=list)  # the Authorization header of each POST
    reject_fields: tuple[str, ...] = ()  # a POST whose body or stream_options has one of these gets a 400
    require_api_key: str | None = None  # POSTs without "Bearer <this>" get a 401 (/v1/models stays open)
    metrics: bool = True                # False: no /metrics (an OpenAI-compatible server that is no known engine)
    max_running: int | None = None      # at most this many streams at once; the rest wait for a slot (a queue)
    slots: threading.Semaphore | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.max_running is not None and self.slots is None:
            self.slots = threading.Semaphore(self.max_running)

    def next_behaviour(self, probe: bool) -> str:
        with self.lock:
            self.num_requests += 1
            if probe:
                return "ok"
            behaviour = self.schedule.pop(0) if self.schedule else self.default
            self.seen.append(behaviour)
            return behaviour


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, *args) -> None:  # quiet
        pass

    # -- helpers
    def _json(self, status: int, obj: dict, extra: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, obj: dict | str) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self._chunk(f"data: {payload}\n\n".encode())

    def do_GET(self) -> None:
        st = self.server.state
        with st.lock:
            st.paths.append(self.path)
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": st.model, "object": "model", "owned_by": "fake", "max_model_len": st.max_model_len}]})
        elif self.path == "/metrics" and st.metrics:
            with st.lock:
                text = (
                    "# TYPE vllm:num_requests_running gauge\n"
                    f'vllm:num_requests_running{{engine="0",model_name="{st.model}"}} {float(st.num_running)}\n'
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    f'vllm:num_requests_waiting{{engine="0",model_name="{st.model}"}} 0.0\n'
                    "# TYPE vllm:kv_cache_usage_perc gauge\n"
                    f'vllm:kv_cache_usage_perc{{engine="0",model_name="{st.model}"}} {0.1 * st.num_running}\n'
                    "# TYPE vllm:prompt_tokens_total counter\n"
                    f'vllm:prompt_tokens_total{{engine="0",model_name="{st.model}"}} {float(st.prompt_tokens_total)}\n'
                    "# TYPE vllm:generation_tokens_total counter\n"
                    f'vllm:generation_tokens_total{{engine="0",model_name="{st.model}"}} '
                    f"{float(st.generation_tokens_total)}\n"
                )
            body = text.encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        st = self.server.state
        length = int(self.headers.get("content-length", "0"))
        with st.lock:
            st.authorizations.append(self.headers.get("authorization"))
            st.paths.append(self.path)
        if st.require_api_key and self.headers.get("authorization") != f"Bearer {st.require_api_key}":
            self.rfile.read(length)
            self._json(401, {"error": {"message": "invalid api key", "type": "authentication_error"}})
            return
        body = json.loads(self.rfile.read(length) or b"{}")
        sent_fields = set(body) | set(body.get("stream_options") or {})
        if sent_fields & set(st.reject_fields):
            self._json(400, {"error": {"message": f"unknown fields {sorted(sent_fields & set(st.reject_fields))}"}})
            return
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._json(404, {"error": {"message": "not found"}})
            return
        max_tokens = int(body.get("max_tokens", 16))
        prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        prompt_tokens = len(prompt.split())
        behaviour = st.next_behaviour(probe=max_tokens <= 2)
        if behaviour == "http_500":
            self._json(500, {"error": {"message": "internal error (on purpose)", "type": "server_error"}})
            return
        if behaviour == "http_429":
            self._json(429, {"error": {"message": "rate limited (on purpose)"}}, {"retry-after": "1"})
            return
        if st.slots is not None:
            st.slots.acquire()          # queued: no byte is sent until a slot frees, as an engine at its cap
        with st.lock:
            st.num_running += 1
        try:
            self._stream(st, behaviour, chat, max_tokens, prompt_tokens, body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with st.lock:
                st.num_running -= 1
            if st.slots is not None:
                st.slots.release()

    def _stream(self, st: FakeState, behaviour: str, chat: bool, max_tokens: int, prompt_tokens: int,
                body: dict) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and behaviour != "ok_no_usage"

        def choice(text: str, reasoning: bool = False, finish: str | None = None) -> dict:
            if chat:
                delta = {"reasoning_content": text} if reasoning else {"content": text}
                return {"index": 0, "delta": delta, "finish_reason": finish}
            return {"index": 0, "text": text, "finish_reason": finish}

        if chat:
            self._event({"id": "x", "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        if behaviour in ("no_text", "no_text_zero"):
            generated = max_tokens if behaviour == "no_text" else 0
            self._event({"choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}],
                         "object": "text_completion", "model": st.model, "id": "chatcmpl-x",
                         "usage": {"completion_tokens": generated, "prompt_tokens": prompt_tokens,
                                   "total_tokens": prompt_tokens + generated}})
            self._event("[DONE]")
            self._chunk(b"")
            with st.lock:
                st.num_completed += 1
                st.generation_tokens_total += generated
            return
        per_chunk = 2 if behaviour == "multi" else 1
        sent = 0
        i = 0
        while sent < max_tokens:
            k = min(per_chunk, max_tokens - sent)
            sent += k
            finish = "length" if sent >= max_tokens else None
            obj = {"id": "x", "choices": [choice(" tok" * k, reasoning=behaviour == "reasoning" and i < max_tokens // 2,
                                                 finish=finish)]}
            if behaviour == "multi":
                obj["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": sent,
                                "total_tokens": prompt_tokens + sent}
            self._event(obj)
            i += 1
            if i == 1 and behaviour in ("stall", "hang"):
                if behaviour == "stall":
                    st.stop_event.wait(st.stall_s)
                else:
                    st.stop_event.wait()
                return
            if i == 1 and behaviour == "error_event":
                self._event({"error": {"message": "engine died (on purpose)", "code": 500}})
                self._chunk(b"")
                return
            if i == 1 and behaviour == "garbage":
                self._chunk(b"this is not server-sent events\n\n")
                self._chunk(b"")
                return
            if i == 1 and behaviour == "bad_json":
                self._chunk(b'data: {"choices": [\n\n')
                self._chunk(b"")
                return
            if i == 2 and behaviour == "done_early":     # [DONE] with no finish_reason, then the socket closes
                self._event("[DONE]")
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if i == 2 and behaviour == "drop":
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if i == 2 and behaviour == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True
                return
            if st.token_delay_s:
                time.sleep(st.token_delay_s)
        if include_usage:
            self._event({"id": "x", "choices": [], "usage": {
                "prompt_tokens": prompt_tokens, "completion_tokens": sent, "total_tokens": prompt_tokens + sent}})
        self._event("[DONE]")
        self._chunk(b"")
        with st.lock:
            st.num_completed += 1
            st.prompt_tokens_total += prompt_tokens
            st.generation_tokens_total += sent


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: FakeState, host: str = "127.0.0.1"):
        super().__init__((host, 0), _Handler)
        self.state = state


class FakeOpenAIServer:
    """Context manager: `with FakeOpenAIServer(schedule=[...]) as srv: srv.url`."""

    def __init__(self, **state_kwargs):
        self.state = FakeState(**state_kwargs)
        self._server = _Server(self.state)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.state.stop_event.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def free_port_refusing() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
