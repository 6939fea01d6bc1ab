"""The load transport's HTTP/1.1 framing, against a real asyncio socket server that writes canned bytes, split
at every byte when asked."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fake_servers import free_port_refusing
from triage.bench.http import Conn as _Conn
from triage.bench.http import HttpError
from triage.bench.pool import ConnectionPool

CHUNKED = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
           b"6\r\ndata: \r\n" b"9\r\n{\"a\": 1}\n\r\n" b"1\r\n\n\r\n" b"0\r\n\r\n")
LENGTH = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 12\r\n\r\n{\"error\": 1}"
CLOSE = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"
UNTIL_CLOSE = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: [DONE]\n\n"


async def serve(responses: list[bytes], split: bool = False):
    """A server answering each request (on any connection) with the next canned response, then silence."""
    state = {"connections": 0}

    async def handle(reader, writer):
        state["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not responses:  # nothing left to say: stay silent (the client times out)
                    await asyncio.sleep(30)
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                await reader.readexactly(length)
                data = responses.pop(0)
                if split:
                    for i in range(len(data)):
                        writer.write(data[i:i + 1])
                        await writer.drain()
                        await asyncio.sleep(0)
                else:
                    writer.write(data)
                if data in (CLOSE, UNTIL_CLOSE):
                    await writer.drain()
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", state


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_chunked_body_split_at_every_byte_is_reassembled_with_ordered_timestamps():
    async def main():
        server, url, _ = await serve([CHUNKED], split=True)
        pool = ConnectionPool(url, 1)
        resp = await pool.post_stream("/v1/completions", b"{}", 5.0)
        pool.close()
        server.close()
        return resp

    resp = run(main())
    assert resp.status == 200 and resp.complete
    assert resp.body == b'data: {"a": 1}\n\n'
    times = [t for t, _ in resp.pieces]
    assert times == sorted(times) and len(times) > 3  # one piece per read: stamped as it arrived


def test_keep_alive_reuses_the_connection_and_connection_close_does_not():
    async def main():
        server, url, state = await serve([LENGTH, CHUNKED, CLOSE, CHUNKED])
        pool = ConnectionPool(url, 1)
        first = await pool.post_stream("/x", b"{}", 5.0)
        second = await pool.post_stream("/x", b"{}", 5.0)
        third = await pool.post_stream("/x", b"{}", 5.0)
        reused = state["connections"]
        fourth = await pool.post_stream("/x", b"{}", 5.0)
        pool.close()
        server.close()
        return first, second, third, fourth, reused, state["connections"]

    first, second, third, fourth, reused, total = run(main())
    assert (first.status, first.body) == (500, b'{"error": 1}')
    assert second.body == b'data: {"a": 1}\n\n' and third.body == b"ok" and fourth.complete
    assert reused == 1  # three requests, one connection
    assert total == 2  # `connection: close` forced a new one


def test_a_body_that_runs_until_close():
    async def main():
        server, url, _ = await serve([UNTIL_CLOSE])
        pool = ConnectionPool(url, 1)
        resp = await pool.post_stream("/x", b"{}", 5.0)
        server.close()
        return resp

    resp = run(main())
    assert resp.complete and resp.body == b"data: [DONE]\n\n"


def test_transport_errors_have_kinds():
    async def main():
        server, url, _ = await serve([b"SSH-2.0-OpenSSH\r\n\r\n", CHUNKED[:100]])
        pool = ConnectionPool(url, 1)
        kinds = []
        for _ in range(2):
            try:
                await pool.post_stream("/x", b"{}", 0.3)
            except HttpError as e:
                kinds.append(e.kind)
        server.close()
        refused = ConnectionPool(free_port_refusing(), 1)
        try:
            await refused.post_stream("/x", b"{}", 1.0)
        except HttpError as e:
            kinds.append(e.kind)
        return kinds

    assert run(main()) == ["malformed_http", "timeout", "connection_refused"]


def test_bad_urls_are_rejected():
    with pytest.raises(ValueError):
        ConnectionPool("ftp://host/", 1)


class _Transport:
    def write(self, data):
        pass

    def get_extra_info(self, name):
        return None

    def is_closing(self):
        return False

    def close(self):
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.sampled_from([b"", CHUNKED[:80], LENGTH[:60]]))
def test_no_bytes_from_a_server_make_the_framing_raise(pieces, prefix):
    async def main():
        conn = _Conn()
        conn.connection_made(_Transport())
        done = conn.start(asyncio.get_running_loop(), b"GET / HTTP/1.1\r\n\r\n")
        for piece in [prefix, *pieces]:
            conn.data_received(piece)  # a framing error settles the future; nothing escapes
        conn.connection_lost(None)
        assert done.done()
        if done.exception() is not None:
            assert isinstance(done.exception(), HttpError)

    asyncio.run(main())
