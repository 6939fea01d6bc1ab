"""A raw-socket OpenAI-style streaming server on loopback, for the bench client's connection and identity tests.

Not a mock: it owns its listening socket (so the listen backlog and the accept loop can be slow on purpose),
writes real HTTP/1.1 chunked SSE, and logs what it saw for every POST: the request id header, when the request
arrived and when the first token and the end left (wall clock and perf_counter). Options:

  close_after_stream  close the connection after every streamed response while the headers advertise
                      `Connection: keep-alive` and `Keep-Alive: timeout=5, max=100` (as llama-server does);
                      `close_delay_s` waits that long first, so the client's next request races the close
  final_crlf_delay_s  write the last chunk `0\r\n` and the body's final CRLF apart, this long between them
  trailing_bytes      written after the body's end (bytes no request asked for)
  reasoning_chunks    chat: this many `reasoning_content` chunks before the answer's `content` chunks
  status              answer every non-probe POST (max_tokens > 2) with this HTTP status and `error_message`
  fail_prompt_words   a POST whose prompt has this many words gets a 500 (breaks the calibration probe)
  backlog, accept_delay_s  the listen backlog and a pause after each accept (slow to take new connections)
  first_token_delay_s, token_delay_s  the time to the first token and between tokens
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class LoopbackServer:
    close_after_stream: bool = False
    close_delay_s: float = 0.0
    final_crlf_delay_s: float = 0.0
    trailing_bytes: bytes = b""
    reasoning_chunks: int = 0
    status: int | None = None
    error_message: str = "error"
    fail_prompt_words: int | None = None
    backlog: int = 128
    accept_delay_s: float = 0.0
    first_token_delay_s: float = 0.0
    token_delay_s: float = 0.0
    max_model_len: int = 4096
    log: list[dict] = field(default_factory=list)
    num_connections: int = 0
    url: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _sock: socket.socket | None = None
    _stop: asyncio.Event | None = None

    def __enter__(self) -> LoopbackServer:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(self.backlog)
        self._sock.setblocking(False)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
        if self._sock is not None:
            self._sock.close()

    def posts(self) -> list[dict]:
        """The logged POSTs of the load (the preflight probes, max_tokens <= 2, left out)."""
        return [e for e in self.log if not e["probe"]]

    # -- the server thread
    def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        ready.set()
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task] = set()

        async def accept_loop() -> None:
            while True:
                conn, _ = await loop.sock_accept(self._sock)
                self.num_connections += 1
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                task = loop.create_task(self._connection(conn))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                if self.accept_delay_s:
                    await asyncio.sleep(self.accept_delay_s)

        acceptor = loop.create_task(accept_loop())
        await self._stop.wait()
        acceptor.cancel()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(acceptor, *tasks, return_exceptions=True)

    async def _connection(self, conn: socket.socket) -> None:
        reader, writer = await asyncio.open_connection(sock=conn)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                recv_perf, recv_epoch = time.perf_counter(), time.time()
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {}
                for line in lines:
                    name, _, value = line.partition(":")
                    if name:
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if method == "GET" and path == "/v1/models":
                    self._json(writer, 200, {"data": [{"id": "loop", "max_model_len": self.max_model_len}]})
                elif method == "POST":
                    keep = await self._post(writer, path, json.loads(body), headers, recv_perf, recv_epoch)
                    if not keep:
                        return
                else:
                    self._json(writer, 404, {"error": {"message": "not found"}})
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, status: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
                     .encode() + body)

    async def _post(self, writer: asyncio.StreamWriter, path: str, req: dict, headers: dict, recv_perf: float,
                    recv_epoch: float) -> bool:
        chat = path.endswith("/chat/completions")
        max_tokens = int(req.get("max_tokens", 16))
        prompt = req["messages"][-1]["content"] if chat else req.get("prompt", "")
        probe = max_tokens <= 2
        entry = {"request_id": headers.get("x-request-id"), "headers": headers, "probe": probe,
                 "recv_epoch_s": recv_epoch, "recv_perf_s": recv_perf, "first_epoch_s": None, "first_perf_s": None,
                 "end_epoch_s": None, "messages": req.get("messages"), "prompt": prompt}
        self.log.append(entry)
        if self.fail_prompt_words is not None and len(prompt.split()) == self.fail_prompt_words:
            self._json(writer, 500, {"error": {"message": "calibration probe refused (on purpose)"}})
            return True
        if self.status is not None and not probe:
            self._json(writer, self.status, {"error": {"message": self.error_message}})
            return True
        ka = "connection: keep-alive\r\nkeep-alive: timeout=5, max=100\r\n" if self.close_after_stream else ""
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n{ka}\r\n"
                     .encode())
        await writer.drain()
        if self.first_token_delay_s:
            await asyncio.sleep(self.first_token_delay_s)
        total = self.reasoning_chunks + max_tokens if chat else max_tokens
        for i in range(total):
            if chat:
                key = "reasoning_content" if i < self.reasoning_chunks else "content"
                choice = {"index": 0, "delta": {key: " tok"}, "finish_reason": "length" if i == total - 1 else None}
            else:
                choice = {"index": 0, "text": " tok", "finish_reason": "length" if i == total - 1 else None}
            event = b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"
            if i == 0:
                entry["first_perf_s"], entry["first_epoch_s"] = time.perf_counter(), time.time()
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            if self.token_delay_s and i < total - 1:
                await asyncio.sleep(self.token_delay_s)
        usage = {"choices": [], "usage": {"prompt_tokens": len(prompt.split()) + 3, "completion_tokens": total}}
        for event in (b"data: " + json.dumps(usage).encode() + b"\n\n", b"data: [DONE]\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        if self.final_crlf_delay_s:  # the last chunk and the body's final CRLF in two writes (cpp-httplib)
            writer.write(b"0\r\n")
            await writer.drain()
            await asyncio.sleep(self.final_crlf_delay_s)
            writer.write(b"\r\n")
        else:
            writer.write(b"0\r\n\r\n")
        if self.trailing_bytes:
            await writer.drain()
            writer.write(self.trailing_bytes)
        await writer.drain()
        entry["end_epoch_s"] = time.time()
        if self.close_after_stream:
            if self.close_delay_s:
                await asyncio.sleep(self.close_delay_s)
            return False
        return True
