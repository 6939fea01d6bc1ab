"""TTFT accuracy of `triage bench` against a truth server, first wave of connections included.

The truth server is a raw-socket SSE server in its own process (listen backlog 1024). For every POST it logs, by
the request's X-Request-Id, the kernel's receive time of the request's first byte (SO_TIMESTAMPNS) and the
CLOCK_MONOTONIC time just before it wrote the first token. The true TTFT is the difference. The bench runs the whole `BenchRunner` path
(preflight, warm-up, connection warm-up, levels) and writes its JSONL; each record's TTFT minus the truth for the
same id is the error. time.perf_counter() is CLOCK_MONOTONIC on Linux, so the send side (t0 vs arrival) and the
receive side (first-token arrival vs the server's write) are reported too.

Where the error comes from is recorded with it: the client's event-loop lag and CPU, and how many errors over
1 ms belong to a request whose first token was read in one piece with the next (equal first two chunk times).
Kernel receive stamps survive a late loop, except there: TCP merges segments left unread in the socket and the
merged bytes keep the newest segment's stamp (tcp_try_coalesce, net/ipv4/tcp_input.c), so a client kept off the
CPU for longer than the token gap stamps its first token with a later token's arrival.

The same run is repeated with --no-warm-connections (the pre-issue-14 behaviour: the first wave opens its
connections inside the measured window) as the baseline, on the same host, round after round.

    python benchmarks/bench_ttft_accuracy.py [--out FILE] [--quick]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

FIRST_TOKEN_DELAY_S = 0.030  # the server's "prefill"
TOKEN_GAP_S = 0.005
NUM_TOKENS = 32


class TruthConnection:
    """One server connection. Reads come through StampedTransport with the kernel's receive time, so a
    request's arrival is when its first byte reached the server's host, whatever this process was doing."""

    def __init__(self, server: TruthServer):
        self.server = server
        self.transport = None
        self.buf = b""
        self.first_byte_s: float | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def eof_received(self) -> None:
        pass

    def connection_lost(self, exc) -> None:
        self.transport = None

    def data_received(self, data: bytes, t: float) -> None:
        if not self.buf:
            self.first_byte_s = t
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            request_line, *lines = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            arrived, self.first_byte_s = self.first_byte_s, (t if self.buf else None)
            method, path, _ = request_line.split(" ", 2)
            asyncio.get_running_loop().create_task(self.server.handle(self, method, path, headers, body, arrived))


class TruthServer:
    def __init__(self) -> None:
        self.log: dict[str, dict[str, float]] = {}

    async def handle(self, conn: TruthConnection, method: str, path: str, headers: dict, body: bytes,
                     arrived: float) -> None:
        if conn.transport is None:
            return
        if method == "POST" and path == "/v1/completions":
            await self.stream(json.loads(body), headers.get("x-request-id"), arrived, conn)
        elif path == "/log":
            self.respond(conn, json.dumps(self.log).encode())
            self.log = {}
        elif path == "/v1/models":
            self.respond(conn, b'{"data": [{"id": "truth", "max_model_len": 100000}]}')
        else:
            self.respond(conn, b'{"error": {"message": "not found"}}', "404 Not Found")

    @staticmethod
    def respond(conn: TruthConnection, body: bytes, status: str = "200 OK") -> None:
        conn.transport.write(f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                             f"content-length: {len(body)}\r\n\r\n".encode() + body)

    async def stream(self, req: dict, request_id: str | None, arrived: float, conn: TruthConnection) -> None:
        num_tokens = int(req.get("max_tokens", 16))
        write = conn.transport.write
        write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        await asyncio.sleep(FIRST_TOKEN_DELAY_S if num_tokens > 2 else 0)
        for i in range(num_tokens):
            if conn.transport is None:
                return
            event = b'data: {"choices":[{"index":0,"text":" tok","finish_reason":%s}]}\n\n' % (
                b'"length"' if i == num_tokens - 1 else b"null")
            before = time.perf_counter()
            conn.transport.write(b"%x\r\n%s\r\n" % (len(event), event))
            if i == 0 and request_id:
                # On loopback the bytes reach the client's socket inside the send() call: the first token left
                # between these two stamps (a preemption of this process in between widens the bracket).
                self.log[request_id] = {"arrived": arrived, "first_write": before,
                                        "first_write_done": time.perf_counter()}
            if i < num_tokens - 1 and num_tokens > 2:
                await asyncio.sleep(TOKEN_GAP_S)
        usage = json.dumps({"choices": [], "usage": {"prompt_tokens": len(req.get("prompt", "").split()) + 1,
                                                      "completion_tokens": num_tokens}}).encode()
        out = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in (b"data: " + usage + b"\n\n", b"data: [DONE]\n\n"))
        if conn.transport is not None:
            conn.transport.write(out + b"0\r\n\r\n")


async def serve_main() -> None:
    from triage.bench.stamped import StampedTransport, enable

    server = TruthServer()
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    listener.setblocking(False)
    enable(listener)
    print(listener.getsockname()[1], flush=True)
    while True:
        sock, _ = await loop.sock_accept(listener)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        enable(sock)
        StampedTransport(loop, sock, TruthConnection(server))


def _stats(values_ms: list[float]) -> dict[str, float | int | None]:
    if not values_ms:
        return {"n": 0, "p50": None, "p99": None, "max": None, "mean": None}
    a = np.asarray(values_ms)
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max()), "mean": float(a.mean())}


def one_run(url: str, levels: tuple[int, ...], num_requests: int, warm: bool) -> dict:
    import httpx

    from triage.bench.level_runner import BenchRunner
    from triage.bench.records import RecordSink, read_records
    from triage.bench.run_config import BenchConfig, LevelSpec

    cfg = BenchConfig(url=url, levels=tuple(LevelSpec(concurrency=c) for c in levels), num_requests=num_requests,
                      warmup=2, input_len=16, output_len=NUM_TOKENS, timeout_s=60.0, scrape_interval_s=30.0,
                      warm_connections=warm)
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "r.jsonl"
        with RecordSink(jsonl) as sink:
            runner = BenchRunner(cfg, sink=sink)
            section = asyncio.run(runner.run())
        records = read_records(jsonl)
    log = httpx.get(url + "/log", timeout=30).json()
    out = {}
    for level in section.levels:
        name = f"c={level.concurrency}"
        rows = [r for r in records if r.level == name and r.ok and not r.warmup]
        err, send_side, recv_side, first_wave, raw, bracket = [], [], [], [], [], []
        merged, late, late_merged = 0, 0, 0
        first_sends = sorted(r.t0_s for r in rows)[:level.concurrency]
        cutoff = first_sends[-1] if first_sends else 0.0
        for r in rows:
            truth = log.get(r.request_id)
            if truth is None:
                continue
            # The truth's first-token time is a bracket [before send(), after send()]; the error is how far the
            # client's TTFT lies outside it (0 inside). `raw` is against the stamp before send() alone.
            lo = truth["first_write"] - truth["arrived"]
            hi = truth["first_write_done"] - truth["arrived"]
            e = (r.ttft_s - hi if r.ttft_s > hi else min(0.0, r.ttft_s - lo)) * 1000.0
            err.append(e)
            # TCP merges segments left unread and keeps the newest one's receive stamp (tcp_try_coalesce): a first
            # token read in one piece with the next carries the next one's arrival (equal first two chunk times).
            is_merged = len(r.chunk_times_s) > 1 and r.chunk_times_s[0] == r.chunk_times_s[1]
            merged += is_merged
            if e > 1.0:
                late += 1
                late_merged += is_merged
            raw.append((r.ttft_s - lo) * 1000.0)
            bracket.append((hi - lo) * 1000.0)
            if r.t0_s <= cutoff:
                first_wave.append(e)
            send_side.append((truth["arrived"] - (runner.epoch + r.t0_s)) * 1000.0)
            recv_side.append((runner.epoch + r.t0_s + r.ttft_s - truth["first_write"]) * 1000.0)
        conns = level.connections or {}
        out[name] = {
            "ttft_error_ms": _stats(err), "first_wave_ttft_error_ms": _stats(first_wave),
            "ttft_error_vs_stamp_before_send_ms": _stats(raw), "truth_send_bracket_ms": _stats(bracket),
            "send_side_ms": _stats(send_side), "receive_side_ms": _stats(recv_side),
            "ttft_ms_p50": level.ttft_ms.p50, "ttft_ms_p99": level.ttft_ms.p99,
            "true_ttft_ms_p50": float(np.median([(v["first_write"] - v["arrived"]) * 1000 for v in log.values()])),
            "failed": level.requests.failed, "client_valid": level.client.valid,
            "client_loop_lag_ms_p99": level.client.event_loop_lag_ms_p99, "client_cpu_pct": level.client.cpu_pct,
            "first_token_merged_with_next": merged, "errors_over_1ms": late,
            "errors_over_1ms_with_first_token_merged": late_merged,
            "connections_opened_warm": conns.get("opened_warm"), "connections_opened_in_window":
                conns.get("opened_in_window"), "connect_ms_p99": (conns.get("connect_ms") or {}).get("p99"),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_ttft_accuracy.json")
    parser.add_argument("--quick", action="store_true", help="One round (a smoke run).")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve_main())
        return 0
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], stdout=subprocess.PIPE,
                              text=True)
    started = time.time()
    load1_at_start = os.getloadavg()[0]
    rounds: dict[str, list[dict]] = {"warm_connections": [], "no_warm_connections": []}
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        for _ in range(1 if args.quick else max(1, args.rounds)):
            rounds["warm_connections"].append(one_run(url, (1, 64), 256, warm=True))
            rounds["no_warm_connections"].append(one_run(url, (1, 64), 256, warm=False))
    finally:
        server.terminate()
        server.wait(timeout=10)
    from triage.probes.host import cpu_model

    def median(mode: str, level: str, key: str, stat: str) -> float | None:
        values = [r[level][key][stat] for r in rounds[mode] if r[level][key][stat] is not None]
        return float(np.median(values)) if values else None

    summary = {mode: {level: {"ttft_error_ms_p50": median(mode, level, "ttft_error_ms", "p50"),
                              "ttft_error_ms_p99": median(mode, level, "ttft_error_ms", "p99"),
                              "first_wave_ttft_error_ms_p99": median(mode, level, "first_wave_ttft_error_ms", "p99"),
                              "client_loop_lag_ms_p99": float(np.median([r[level]["client_loop_lag_ms_p99"] or 0.0
                                                                         for r in rounds[mode]])),
                              "errors_over_1ms": sum(r[level]["errors_over_1ms"] for r in rounds[mode]),
                              "errors_over_1ms_with_first_token_merged":
                                  sum(r[level]["errors_over_1ms_with_first_token_merged"] for r in rounds[mode])}
                      for level in ("c=1", "c=64")} for mode in rounds}
    load1, load5, _ = os.getloadavg()
    report = {
        "benchmark": "bench_ttft_accuracy",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {"cpu_model": cpu_model(), "num_cpus": os.cpu_count(), "python": platform.python_version(),
                 "loadavg_1m_at_start": load1_at_start, "loadavg_1m_at_end": load1, "loadavg_5m_at_end": load5,
                 "note": "the host may be shared: judge by the load average"},
        "setup": {"levels": [1, 64], "num_requests_per_level": 256, "tokens_per_request": NUM_TOKENS,
                  "first_token_delay_ms": FIRST_TOKEN_DELAY_S * 1000, "token_gap_ms": TOKEN_GAP_S * 1000,
                  "server_listen_backlog": 1024, "first_wave_included": True},
        "target": {"ttft_error_ms_p99_at_c64": 5.0},
        "duration_s": time.time() - started,
        "summary_median_over_rounds": summary,
        "rounds": rounds,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
