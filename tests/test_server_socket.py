import asyncio
import socket

from triage.reference_engine.serve.server import bind_socket


def test_listening_socket_is_tcp_so_asyncio_sets_nodelay_on_accepted_connections():
    """Without IPPROTO_TCP on the listener, asyncio leaves Nagle on and each SSE chunk after the headers
    waits ~40 ms for the client's delayed ACK (client TTFT read 45 ms against a 5 ms server histogram)."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    seen = {}

    async def main():
        async def on_client(reader, writer):
            conn = writer.get_extra_info("socket")
            seen["nodelay"] = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            writer.close()

        server = await asyncio.start_server(on_client, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if "nodelay" in seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(main())
    assert seen["nodelay"] != 0
