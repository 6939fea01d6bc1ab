"""A small HTTP/1.1 client for the load itself: keep-alive connections in one pool, one write per request, and
a perf_counter() stamp taken in `data_received`, the moment the event loop hands over the bytes.

Why not httpx for the load: its per-chunk path (h11 events, httpcore, anyio) cost ~25 us of CPU per SSE chunk
here and delayed timestamps by tens of milliseconds at 64 streams on a busy 2-core host
(benchmarks/bench_client_overhead.py measures both). httpx is still used for /v1/models and /metrics.
Supported: http and https, chunked and Content-Length bodies, read-until-close. Not supported: proxies,
HTTP/2, redirects (a load test should not follow them).
"""
from __future__ import annotations

import asyncio
import base64
import errno
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

MAX_HEADER_BYTES = 64 * 1024


class HttpError(Exception):
    """A transport failure; `kind` is the bench error kind (connection_refused, timeout, disconnected, ...)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.response: Response | None = None  # what arrived before the failure


@dataclass(slots=True)
class Response:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival, de-chunked body bytes)
    complete: bool = False
    keep_alive: bool = True
    # With a 200, body pieces go to this callback (as they arrive, after their timestamp) instead of `pieces`.
    on_piece: Callable[[float, bytes], None] | None = None

    def add(self, t: float, data: bytes) -> None:
        if self.on_piece is not None and self.status == 200:
            self.on_piece(t, data)
        else:
            self.pieces.append((t, data))

    @property
    def body(self) -> bytes:
        return b"".join(p for _, p in self.pieces)


class _Conn(asyncio.Protocol):
    """One keep-alive connection. Parses HTTP/1.1 response framing as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost_exc: BaseException | None = None
        self.response: Response | None = None
        self.done: asyncio.Future | None = None
        self.last_data_s = 0.0
        self._buf = b""
        self._state = "idle"  # idle | head | chunk_size | chunk_data | length | until_close
        self._remaining = 0

    # -- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        self.last_data_s = t
        if self.response is None or self.done is None or self.done.done():
            return  # bytes with no request outstanding: the connection will not be reused
        try:
            self._feed(t, data)
        except HttpError as e:
            self._finish(e)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost_exc = exc
        if self.done is not None and not self.done.done():
            if self._state == "until_close" and exc is None:
                self.response.complete = True  # type: ignore[union-attr]
                self._finish(None)
            elif isinstance(exc, ConnectionResetError) or (isinstance(exc, OSError) and exc.errno == errno.ECONNRESET):
                self._finish(HttpError("connection_reset", f"connection reset by the server: {exc}"))
            else:
                where = "before the response headers" if self._state == "head" else "mid-response"
                self._finish(HttpError("disconnected", f"the server closed the connection {where}"
                                                       + (f": {exc}" if exc else "")))

    # -- framing
    def start(self, loop: asyncio.AbstractEventLoop, request: bytes,
              on_piece: Callable[[float, bytes], None] | None = None) -> asyncio.Future:
        self.response = Response(on_piece=on_piece)
        self.done = loop.create_future()
        self._buf, self._state = b"", "head"
        self.last_data_s = time.perf_counter()
        self.transport.write(request)  # type: ignore[union-attr]
        return self.done

    def _finish(self, error: HttpError | None) -> None:
        if self.done is not None and not self.done.done():
            if error is None:
                self.done.set_result(self.response)
            else:
                self.done.set_exception(error)
        self._state = "idle"

    def _feed(self, t: float, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        resp = self.response
        while True:
            state = self._state
            if state == "head":
                if buf[:2] == b"\r\n":  # a stray CRLF that ended the previous chunked body
                    buf = buf.lstrip(b"\r\n")
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEADER_BYTES:
                        raise HttpError("malformed_http", "response headers larger than 64 KiB")
                    break
                self._parse_head(buf[:end])
                buf = buf[end + 4:]
            elif state == "chunk_size":
                end = buf.find(b"\r\n")
                if end < 0:
                    break
                size_text = buf[:end].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise HttpError("malformed_http", f"bad chunk size {size_text[:20]!r}") from None
                if size < 0:
                    raise HttpError("malformed_http", f"negative chunk size {size_text[:20]!r}")
                buf = buf[end + 2:]
                if size == 0:
                    # trailers are not used by SSE servers; the final CRLF may still be in flight
                    resp.complete = True
                    self._finish(None)
                    buf = b""
                    break
                self._remaining, self._state = size, "chunk_data"
            elif state == "chunk_data":
                if len(buf) < self._remaining + 2:
                    if self._remaining and len(buf) > 0:
                        take = min(len(buf), self._remaining)
                        resp.add(t, buf[:take])
                        self._remaining -= take
                        buf = buf[take:]
                    break
                if self._remaining:
                    resp.add(t, buf[:self._remaining])
                buf = buf[self._remaining + 2:]
                self._state = "chunk_size"
            elif state == "length":
                take = min(len(buf), self._remaining)
                if take:
                    resp.add(t, buf[:take])
                    self._remaining -= take
                buf = buf[take:]
                if self._remaining == 0:
                    resp.complete = True
                    self._finish(None)
                break
            elif state == "until_close":
                if buf:
                    resp.add(t, buf)
                buf = b""
                break
            else:
                buf = b""
                break
        self._buf = buf

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise HttpError("malformed_http", f"not an HTTP response: {lines[0][:60]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise HttpError("malformed_http", f"bad status line {lines[0][:60]!r}") from None
        if 100 <= status < 200:  # 100 Continue and friends: the real head follows
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        resp = self.response
        resp.status, resp.headers = status, headers
        resp.keep_alive = parts[0] == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = "chunk_size"
        elif "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError:
                raise HttpError("malformed_http", "bad Content-Length") from None
            if self._remaining < 0:
                raise HttpError("malformed_http", "negative Content-Length")
            self._state = "length"
            if self._remaining == 0:
                resp.complete = True
                self._finish(None)
        else:
            resp.keep_alive = False
            self._state = "until_close"


class ConnectionPool:
    """Keep-alive connections to one origin, at most `max_connections` at once."""

    def __init__(self, url: str, max_connections: int, connect_timeout_s: float = 10.0,
                 headers: dict[str, str] | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.base_path = parts.path.rstrip("/")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        self.connect_timeout_s = connect_timeout_s
        self._idle: deque[_Conn] = deque()
        self._slots = asyncio.Semaphore(max_connections)
        headers = dict(headers or {})
        if parts.username is not None and not any(k.lower() == "authorization" for k in headers):
            # http://user:password@host: Basic auth, as httpx (used for /v1/models) does it
            userinfo = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(userinfo).decode("ascii")
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._head_tail = (f"host: {host_header}\r\nuser-agent: triage-bench\r\naccept: text/event-stream\r\n"
                           f"{extra}").encode("latin-1")

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl,
                                       server_hostname=self.host if self.ssl else None),
                self.connect_timeout_s)
        except asyncio.TimeoutError:
            raise HttpError("connect_timeout", f"no connection to {self.host}:{self.port} "
                                               f"within {self.connect_timeout_s:g} s") from None
        except ConnectionRefusedError as e:
            raise HttpError("connection_refused", f"connection refused by {self.host}:{self.port}: {e}") from None
        except ssl.SSLError as e:
            raise HttpError("tls_error", f"TLS handshake with {self.host}:{self.port} failed: {e}") from None
        except OSError as e:
            raise HttpError("connect_error", f"cannot connect to {self.host}:{self.port}: {e}") from None
        return conn

    async def post_stream(self, path: str, body: bytes, read_timeout_s: float,
                          on_piece: Callable[[float, bytes], None] | None = None) -> Response:
        """POST `body` (JSON) and read the whole response; a 200's body goes to `on_piece` as it arrives when
        given. Raises HttpError; the partial response is attached as `.response`."""
        async with self._slots:
            conn = None
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.closed:
                    conn = candidate
                    break
            if conn is None:
                conn = await self._connect()
            request = (f"POST {self.base_path}{path} HTTP/1.1\r\ncontent-type: application/json\r\n"
                       f"content-length: {len(body)}\r\n").encode("latin-1") + self._head_tail + b"\r\n" + body
            loop = asyncio.get_running_loop()
            done = conn.start(loop, request, on_piece)
            try:
                while True:
                    wait_s = conn.last_data_s + read_timeout_s - time.perf_counter()
                    if wait_s <= 0:
                        raise HttpError("timeout", f"no data from the server for {read_timeout_s:g} s")
                    finished, _ = await asyncio.wait((done,), timeout=wait_s)
                    if finished:
                        response = done.result()
                        break
            except HttpError as e:
                e.response = conn.response
                conn.transport.close()
                raise
            except BaseException:
                conn.transport.close()  # cancelled: this connection is mid-response, never reuse it
                raise
            if response.keep_alive and not conn.closed:
                self._idle.append(conn)
            else:
                conn.transport.close()
            return response

    def close(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None:
                conn.transport.close()
