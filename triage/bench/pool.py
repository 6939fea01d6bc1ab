"""The load's keep-alive connection pool: connections opened apart from the measured request, checked before
reuse, and one retry for a request that a dead reused connection swallowed.

Real servers close keep-alive connections on their own: llama.cpp's llama-server closes after every streamed
response while its headers still say `Keep-Alive: timeout=5, max=100`
(../shared/data/llamacpp/stream_completions_with_headers.txt). Before an idle connection is reused the pool
yields to the event loop (so a FIN that already arrived is delivered), polls the socket for EOF, and honours
`Connection: close` and the Keep-Alive `max` and `timeout`. A FIN can still race the write: when a request on a
*reused* connection fails before a single byte of the response arrived, the server never answered it, and
it is sent again, once, on a fresh connection (a POST, on purpose; the retries are counted per level).
Only then: a request that got any byte of an answer is never sent twice, since the server may have started on
it. The previous response's final CRLF, when the server writes it apart from the last chunk (llama-server
does) and it lands after the reuse, is the old response's and does not count as an answer (http.py); still
unread at the reuse check, it is read there and the connection kept. Any other byte that no request asked for
retires the connection. A timeout is never retried.

Timing, as the contract says: `Response.t_sent` is the write that got the response; everything before it
(a new connection, or a dead one's lost time plus the new connect) is `Response.connect_s`, never TTFT.
"""
from __future__ import annotations

import asyncio
import base64
import select
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from triage.bench import stamped
from triage.bench.http import Conn, HttpError, Response

RETRYABLE_KINDS = ("disconnected", "connection_reset")
KEEP_ALIVE_TIMEOUT_FRAC = 0.8  # an idle connection older than this share of the server's timeout is not reused


@dataclass(frozen=True, slots=True)
class ConnectEvent:
    at_s: float  # perf_counter() when the connection was up
    connect_s: float
    warm: bool  # opened by warm() before a level's measured window


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
        # Plain TCP on Linux: reads carry the kernel's receive time (stamped.py), not the loop's.
        self.kernel_stamps = self.ssl is None and stamped.available()
        self.max_connections = max_connections
        self.connects: list[ConnectEvent] = []
        self.retries: list[float] = []  # perf_counter() of each retry on a fresh connection
        self._idle: deque[Conn] = deque()
        self._slots = asyncio.Semaphore(max_connections)
        headers = dict(headers or {})
        if parts.username is not None and not any(k.lower() == "authorization" for k in headers):
            # http://user:password@host: Basic auth, as httpx (used for /v1/models) does it
            userinfo = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(userinfo).decode("ascii")
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._head_tail = (f"host: {host_header}\r\nuser-agent: triage-bench\r\naccept: text/event-stream\r\n"
                           f"{extra}").encode("latin-1")

    @property
    def num_idle(self) -> int:
        return len(self._idle)

    async def _connect(self, warm: bool = False, start: float | None = None) -> Conn:
        loop = asyncio.get_running_loop()
        start = time.perf_counter() if start is None else start
        try:
            if self.kernel_stamps:
                conn = await asyncio.wait_for(stamped.open_stamped(Conn, self.host, self.port), self.connect_timeout_s)
            else:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(Conn, self.host, self.port, ssl=self.ssl,
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
        if warm:
            await self._confirm(conn)
        now = time.perf_counter()
        self.connects.append(ConnectEvent(at_s=now, connect_s=now - start, warm=warm))
        return conn

    async def _confirm(self, conn: Conn) -> None:
        """A warm connection is open when the server has answered on it: the TCP handshake completes in the
        kernel, and a server slow to accept() leaves it queued there, so a cheap GET of /v1/models makes sure
        that wait lands in the warm-up's connect time, not in the first measured request's TTFT."""
        request = (f"GET {self.base_path}/v1/models HTTP/1.1\r\n").encode("latin-1") + self._head_tail + b"\r\n"
        try:
            await asyncio.wait_for(conn.start(asyncio.get_running_loop(), request), self.connect_timeout_s)
        except (asyncio.TimeoutError, HttpError) as e:
            conn.transport.close()  # type: ignore[union-attr]
            kind = e.kind if isinstance(e, HttpError) else "connect_timeout"
            raise HttpError(kind, f"a warm-up connection to {self.host}:{self.port} got no answer: {e}") from None
        conn.num_requests = 0  # the check does not count against the Keep-Alive max of the load

    def _reusable(self, conn: Conn) -> bool:
        """Not closed by the peer, within the Keep-Alive max and timeout, and (plain TCP) not readable: an idle
        HTTP/1.1 connection that polls readable has either an EOF or bytes nobody asked for."""
        if conn.closed or conn.unsolicited or conn.transport is None or conn.transport.is_closing():
            return False
        if conn.keep_alive_max is not None and (conn.keep_alive_max <= 1 or conn.num_requests >= conn.keep_alive_max):
            return False
        if conn.keep_alive_timeout_s is not None and \
                time.perf_counter() - conn.idle_since_s > KEEP_ALIVE_TIMEOUT_FRAC * conn.keep_alive_timeout_s:
            return False
        if self.ssl is None:
            sock = conn.transport.get_extra_info("socket")
            if sock is not None:
                try:
                    readable, _, _ = select.select([sock.fileno()], [], [], 0)
                except (OSError, ValueError):
                    return False
                if readable and not (conn.drain_owed(sock) and not select.select([sock.fileno()], [], [], 0)[0]):
                    return False  # an EOF, or a byte other than the last body's late final CRLF
        return True

    async def _idle_connection(self) -> Conn | None:
        if not self._idle:
            return None
        await asyncio.sleep(0)  # let the loop deliver an EOF that already arrived
        while self._idle:
            conn = self._idle.pop()
            if self._reusable(conn):
                return conn
            conn.transport.close()  # type: ignore[union-attr]
        return None

    async def warm(self, num_connections: int) -> list[HttpError]:
        """Open idle connections until `num_connections` (at most the pool size) are ready, all at once, before
        a level's measured window. Returns the failures (the level then opens what it lacks itself)."""
        alive = [c for c in self._idle if self._reusable(c)]
        for conn in self._idle:
            if conn not in alive:
                conn.transport.close()  # type: ignore[union-attr]
        self._idle = deque(alive)
        need = min(num_connections, self.max_connections) - len(self._idle)
        if need <= 0:
            return []
        results = await asyncio.gather(*(self._connect(warm=True) for _ in range(need)), return_exceptions=True)
        errors = []
        for result in results:
            if isinstance(result, Conn) and (result.closed or not result.response or not result.response.keep_alive):
                result.transport.close()  # type: ignore[union-attr]  # the server will not keep it open
            elif isinstance(result, Conn):
                result.idle_since_s = time.perf_counter()
                self._idle.appendleft(result)
            elif isinstance(result, HttpError):
                errors.append(result)
            elif isinstance(result, BaseException):
                raise result
        return errors

    async def _exchange(self, conn: Conn, request: bytes, read_timeout_s: float,
                        on_piece: Callable[[float, bytes], None] | None) -> Response:
        done = conn.start(asyncio.get_running_loop(), request, on_piece)
        while True:
            wait_s = conn.last_data_s + read_timeout_s - time.perf_counter()
            if wait_s <= 0:
                raise HttpError("timeout", f"no data from the server for {read_timeout_s:g} s")
            finished, _ = await asyncio.wait((done,), timeout=wait_s)
            if finished:
                return done.result()

    async def post_stream(self, path: str, body: bytes, read_timeout_s: float,
                          on_piece: Callable[[float, bytes], None] | None = None,
                          headers: dict[str, str] | None = None) -> Response:
        """POST `body` (JSON) and read the whole response; a 200's body goes to `on_piece` as it arrives when
        given. Raises HttpError; the partial response (with its timing) is attached as `.response`."""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        request = (f"POST {self.base_path}{path} HTTP/1.1\r\ncontent-type: application/json\r\n"
                   f"content-length: {len(body)}\r\n{extra}").encode("latin-1") + self._head_tail + b"\r\n" + body
        async with self._slots:
            begin = time.perf_counter()
            conn = await self._idle_connection()
            reused = conn is not None
            retried = False
            if conn is None:
                conn = await self._connect()
            while True:
                try:
                    response = await self._exchange(conn, request, read_timeout_s, on_piece)
                except HttpError as e:
                    _abandon(conn)
                    if reused and not retried and e.kind in RETRYABLE_KINDS and conn.response_bytes == 0:
                        # The server closed this idle connection as it was reused and never answered: send the
                        # request again, once, on a fresh connection.
                        retried, reused = True, False
                        self.retries.append(time.perf_counter())
                        try:
                            conn = await self._connect()
                        except HttpError as connect_error:
                            connect_error.response = Response(retried=True)
                            raise
                        continue
                    e.response = conn.response
                    if e.response is not None:
                        self._stamp(e.response, conn, begin, reused, retried)
                    raise
                except BaseException:
                    _abandon(conn)  # cancelled mid-response (Ctrl-C): never reuse
                    raise
                break
            self._stamp(response, conn, begin, reused, retried)
            if response.keep_alive and not conn.closed:
                conn.idle_since_s = time.perf_counter()
                self._idle.append(conn)
            else:
                conn.transport.close()  # type: ignore[union-attr]
            return response

    @staticmethod
    def _stamp(response: Response, conn: Conn, begin: float, reused: bool, retried: bool) -> None:
        response.t_sent = conn.t_sent
        response.reused, response.retried = reused, retried
        response.connect_s = 0.0 if reused else max(0.0, conn.t_sent - begin)

    def close(self) -> None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None:
                conn.transport.close()


def _abandon(conn: Conn) -> None:
    """Close a connection whose exchange ended early (an error, a timeout, a cancelled request). Its pending
    response future is cancelled first: the close would otherwise fail it with nobody left to read the error
    ("Future exception was never retrieved" on stderr)."""
    done = conn.done
    if done is not None:
        if done.done() and not done.cancelled():
            done.exception()  # already failed: mark its error as read
        done.cancel()
    conn.transport.close()  # type: ignore[union-attr]
