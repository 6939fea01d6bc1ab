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
import errno
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

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
    # Filled by the pool (pool.py): when the request bytes that got this response were written (perf_counter),
    # the connection setup before that write (0 on a reused connection; a dead reused connection's lost time
    # plus the new connect on a retry), and how the connection was had.
    t_sent: float | None = None
    connect_s: float = 0.0
    reused: bool = False
    retried: bool = False
    replica: int | None = None  # several --url: which replica's pool answered (fleet.py)

    def add(self, t: float, data: bytes) -> None:
        if self.on_piece is not None and self.status == 200:
            self.on_piece(t, data)
        else:
            self.pieces.append((t, data))

    @property
    def body(self) -> bytes:
        return b"".join(p for _, p in self.pieces)


def parse_keep_alive(value: str) -> tuple[int | None, float | None]:
    """`Keep-Alive: timeout=5, max=100` -> (100, 5.0); what is absent or unreadable is None."""
    max_requests = timeout_s = None
    for part in value.split(","):
        key, _, text = part.strip().partition("=")
        try:
            if key.strip().lower() == "max":
                max_requests = int(text.strip())
            elif key.strip().lower() == "timeout":
                timeout_s = float(text.strip())
        except ValueError:
            continue
    return max_requests, timeout_s


class Conn(asyncio.Protocol):
    """One keep-alive connection. Parses HTTP/1.1 response framing as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost_exc: BaseException | None = None
        self.response: Response | None = None
        self.done: asyncio.Future | None = None
        self.last_data_s = 0.0
        self.t_sent = 0.0  # perf_counter() just before the last request's bytes were written
        self.response_bytes = 0  # bytes received for the current request (0: the server never answered)
        self.unsolicited = False  # bytes arrived that no request asked for: never reuse this connection
        self.num_requests = 0  # requests written on this connection
        self.keep_alive_max: int | None = None  # from the last response's `Keep-Alive: timeout=T, max=N`
        self.keep_alive_timeout_s: float | None = None
        self.idle_since_s = 0.0
        self._buf = b""
        self._state = "idle"  # idle | head | chunk_size | chunk_data | length | until_close
        # The finished chunked body's final CRLF, when it had not arrived with the last chunk: its bytes may land
        # after the connection was reused, and belong to the old response, not to an answer to the new one.
        self._crlf_owed = b""
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

    def data_received(self, data: bytes, t: float | None = None) -> None:
        """`t`: when the bytes reached this host (a kernel stamp, stamped.py); else now."""
        if t is None:
            t = time.perf_counter()
        if self._crlf_owed:
            owed = self._crlf_owed
            if data[:len(owed)] == owed[:len(data)]:
                take = min(len(owed), len(data))
                self._crlf_owed, data = owed[take:], data[take:]
            else:
                self._crlf_owed = b""
            if not data:
                return
        self.last_data_s = t
        self.response_bytes += len(data)
        if self.response is None or self.done is None or self.done.done():
            self.unsolicited = True  # bytes with no request outstanding: the connection will not be reused
            return
        try:
            self._feed(t, data)
        except HttpError as e:
            self._finish(e)

    def eof_received(self) -> None:
        self.closed = True  # the peer sent FIN: never reuse; connection_lost follows and finishes a request

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

    def drain_owed(self, sock: socket.socket) -> bool:
        """Before reuse, on an idle plain-TCP socket that polls readable: read what is there. True when it was
        just the owed final CRLF of the last body (now consumed: the connection is clean); False on an EOF, an
        error, or any other byte."""
        if not self._crlf_owed or not isinstance(sock, socket.socket):
            return False  # (asyncio's own transport hands out a wrapper that should not be read)
        try:
            data = sock.recv(len(self._crlf_owed), socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not data or not self._crlf_owed.startswith(data):
            return False
        sock.recv(len(data))
        self._crlf_owed = self._crlf_owed[len(data):]
        return True

    # -- framing
    def start(self, loop: asyncio.AbstractEventLoop, request: bytes,
              on_piece: Callable[[float, bytes], None] | None = None) -> asyncio.Future:
        self.response = Response(on_piece=on_piece)
        self.done = loop.create_future()
        self._buf, self._state = b"", "head"
        self.response_bytes = 0
        self.num_requests += 1
        if self.closed or self.transport.is_closing():  # type: ignore[union-attr]
            self.t_sent = self.last_data_s = time.perf_counter()
            self._finish(HttpError("disconnected", "the server closed the connection before the request was sent"))
            return self.done
        self.t_sent = self.last_data_s = time.perf_counter()
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
        go_on = True
        while go_on:
            step = _STEPS.get(self._state)
            if step is None:
                buf = b""
                break
            buf, go_on = step(self, t, buf)
        self._buf = buf

    # Each framing state takes what it can from the buffer: (what is left, whether to go on in the new state).
    def _head(self, t: float, buf: bytes) -> tuple[bytes, bool]:
        if buf[:2] == b"\r\n":  # a stray CRLF that ended the previous chunked body
            buf = buf.lstrip(b"\r\n")
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEADER_BYTES:
                raise HttpError("malformed_http", "response headers larger than 64 KiB")
            return buf, False
        self._parse_head(buf[:end])
        return buf[end + 4:], True

    def _chunk_size(self, t: float, buf: bytes) -> tuple[bytes, bool]:
        end = buf.find(b"\r\n")
        if end < 0:
            return buf, False
        size_text = buf[:end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise HttpError("malformed_http", f"bad chunk size {size_text[:20]!r}") from None
        if size < 0:
            raise HttpError("malformed_http", f"negative chunk size {size_text[:20]!r}")
        buf = buf[end + 2:]
        if size == 0:
            self._last_chunk(buf)
            return b"", False
        self._remaining, self._state = size, "chunk_data"
        return buf, True

    def _last_chunk(self, buf: bytes) -> None:
        # Trailers are not used by SSE servers. The final CRLF may still be in flight: it is owed, and
        # data_received drops it when it comes (it is not a byte of the next response).
        rest = buf[:2]
        self._crlf_owed = b"\r\n"[len(rest):] if b"\r\n".startswith(rest) else b""
        if len(buf) > 2 or not b"\r\n".startswith(rest):
            self.unsolicited = True  # bytes after the body's end: no answer to anything
        self.response.complete = True  # type: ignore[union-attr]
        self._finish(None)

    def _chunk_data(self, t: float, buf: bytes) -> tuple[bytes, bool]:
        resp = self.response
        if len(buf) < self._remaining + 2:
            if self._remaining and len(buf) > 0:
                take = min(len(buf), self._remaining)
                resp.add(t, buf[:take])  # type: ignore[union-attr]
                self._remaining -= take
                buf = buf[take:]
            return buf, False
        if self._remaining:
            resp.add(t, buf[:self._remaining])  # type: ignore[union-attr]
        self._state = "chunk_size"
        return buf[self._remaining + 2:], True

    def _length(self, t: float, buf: bytes) -> tuple[bytes, bool]:
        resp = self.response
        take = min(len(buf), self._remaining)
        if take:
            resp.add(t, buf[:take])  # type: ignore[union-attr]
            self._remaining -= take
        if self._remaining == 0:
            resp.complete = True  # type: ignore[union-attr]
            self._finish(None)
        return buf[take:], False

    def _until_close(self, t: float, buf: bytes) -> tuple[bytes, bool]:
        if buf:
            self.response.add(t, buf)  # type: ignore[union-attr]
        return b"", False

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
        self.keep_alive_max, self.keep_alive_timeout_s = parse_keep_alive(headers.get("keep-alive", ""))
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


_STEPS: dict[str, Callable[[Conn, float, bytes], tuple[bytes, bool]]] = {
    "head": Conn._head, "chunk_size": Conn._chunk_size, "chunk_data": Conn._chunk_data, "length": Conn._length,
    "until_close": Conn._until_close}
