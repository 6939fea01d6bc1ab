"""Kernel receive timestamps for the load's plain-TCP connections (Linux `SO_TIMESTAMPNS`).

An asyncio transport hands bytes over when the event loop gets round to them; on a busy host (64 streams,
a server and other jobs sharing two cores) that is tens of milliseconds after they arrived, and every chunk
timestamp (TTFT, ITL) would carry that delay. With SO_TIMESTAMPNS the kernel stamps each packet as it is
received and `recvmsg` returns that stamp with the bytes, so a read's time is when its first byte reached this
host, however late the loop reads it. The stamp is CLOCK_REALTIME; it is moved onto perf_counter()'s clock
(CLOCK_MONOTONIC) with the offset between the two read at that moment.

`StampedTransport` is the small part of asyncio.Transport that http.Conn uses (write, close, is_closing,
get_extra_info), driven by loop.add_reader/add_writer on a non-blocking socket. TLS connections keep asyncio's
own transport (and userspace timestamps).
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if hasattr(socket, "AF_NETLINK") else None)
READ_BYTES = 256 * 1024
COALESCED_S = 0.0005  # a queue whose segments arrived further apart than this is split per SSE event
MAX_SPLITS = 64
_CMSG_BYTES = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("@qq")


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp this socket's received packets; False where it cannot."""
    if SO_TIMESTAMPNS is None or not _CMSG_BYTES:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def recv_stamped(sock: socket.socket, size: int = READ_BYTES, flags: int = 0) -> tuple[bytes, float]:
    """(bytes, perf_counter() time the kernel received the last packet this read reached). TCP reports the
    stamp of the last segment a read copies from. Falls back to now when the kernel sent no stamp. Raises
    BlockingIOError when nothing is there."""
    data, ancillary, _, _ = sock.recvmsg(size, _CMSG_BYTES, flags)
    now_perf = time.perf_counter()
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(payload)
            stamp = (sec - time.time()) + nsec * 1e-9 + time.perf_counter()
            return data, min(stamp, now_perf)
    return data, now_perf


def read_pieces(sock: socket.socket) -> list[tuple[float, bytes]]:
    """Everything readable now, as (arrival, bytes) pieces. A read that the loop got to late can hold segments
    that arrived milliseconds apart, and TCP stamps a read with its last segment only; so when the first and
    the last segment of what is queued arrived more than COALESCED_S apart, the queue is peeked up to the end
    of each SSE event (at most MAX_SPLITS), which gives each event the arrival of the segment that completed
    it, before the bytes are consumed."""
    data, t_last = recv_stamped(sock, READ_BYTES, socket.MSG_PEEK)
    if not data:
        recv_stamped(sock, 1)
        return [(t_last, b"")]
    _, t_first = recv_stamped(sock, 1, socket.MSG_PEEK)
    cuts: list[tuple[int, float]] = []
    if t_last - t_first > COALESCED_S:
        start = 0
        while len(cuts) < MAX_SPLITS:
            end = data.find(b"\n\n", start)
            if end < 0 or end + 2 >= len(data):
                break
            _, t = recv_stamped(sock, end + 2, socket.MSG_PEEK)
            cuts.append((end + 2, t))
            start = end + 2
    taken, _ = recv_stamped(sock, len(data))
    pieces, at = [], 0
    for end, t in cuts:
        pieces.append((t, taken[at:end]))
        at = end
    pieces.append((t_last, taken[at:]))
    return pieces


class StampedTransport(asyncio.Transport):
    """A plain-TCP transport whose reads carry kernel receive times: protocol.data_received(data, t)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Any):
        super().__init__()
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self._fd = sock.fileno()
        self._closing = False
        self._out = bytearray()
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._read_ready)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self._sock
        if name == "peername":
            try:
                return self._sock.getpeername()
            except OSError:
                return default
        return default

    def is_closing(self) -> bool:
        return self._closing

    def _read_ready(self) -> None:
        try:
            pieces = read_pieces(self._sock)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._shut(e)
            return
        for t, data in pieces:
            if not data:
                self._protocol.eof_received()
                self._shut(None)
                return
            if self._closing:
                return
            self._protocol.data_received(data, t)

    def write(self, data: bytes) -> None:  # type: ignore[override]
        if self._closing or not data:
            return
        if self._out:
            self._out += data
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as e:
            self._shut(e)
            return
        if sent < len(data):
            self._out += data[sent:]
            self._loop.add_writer(self._fd, self._write_ready)

    def _write_ready(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._shut(e)
            return
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._fd)

    def close(self) -> None:
        self._shut(None)

    def abort(self) -> None:
        self._shut(None)

    def _shut(self, exc: BaseException | None) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._out.clear()
        self._loop.call_soon(self._lost, exc)

    def _lost(self, exc: BaseException | None) -> None:
        try:
            self._protocol.connection_lost(exc)
        finally:
            self._sock.close()


async def open_stamped(protocol_factory: Any, host: str, port: int) -> Any:
    """Connect like loop.create_connection, but with a StampedTransport; returns the protocol.
    Raises OSError (ConnectionRefusedError, ...) as create_connection does."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            enable(sock)
            await loop.sock_connect(sock, address)
        except OSError as e:
            sock.close()
            last = e
            continue
        except BaseException:
            sock.close()
            raise
        protocol = protocol_factory()
        StampedTransport(loop, sock, protocol)
        return protocol
    raise last or OSError(f"cannot resolve {host}:{port}")


def available() -> bool:
    """Whether this platform stamps received packets (Linux)."""
    if SO_TIMESTAMPNS is None or not _CMSG_BYTES:
        return False
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        return enable(probe)
    finally:
        probe.close()
