"""How much does the bench client itself add? Measured against a fast local SSE server that timestamps its sends.

The server runs in its own process (so it does not share this process's GIL) and records, for every request,
the CLOCK_MONOTONIC time just before it writes the first content chunk. The client's first-content timestamp
(run epoch + t0 + TTFT, on the same clock: time.perf_counter is CLOCK_MONOTONIC on Linux) minus that is the
TTFT error: loopback delivery plus everything the client does. The same is measured for a baseline in this
process: a raw asyncio-socket reader that does nothing but find the first content chunk (the floor).

Reports: TTFT error p50/p99 at concurrency 1, 16 and 64; the SSE chunks/s one client process sustains; and
client CPU-seconds per 1k chunks. Writes JSON to --out (default benchmarks/results/bench_client_overhead.json).

    python benchmarks/bench_client_overhead.py [--out FILE] [--quick]
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import psutil  # noqa: E402

CLOCK = time.CLOCK_MONOTONIC

# ---------------------------------------------------------------------------------------------------------
# The fast SSE server (run as: this script --serve). Minimal HTTP/1.1 with keep-alive and chunked bodies.


class SseServer:
    def __init__(self) -> None:
        self.gap_s = 0.0
        self.sends: dict[str, float] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                length = 0
                for line in header_lines:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if path == "/v1/completions":
                    await self.stream(json.loads(body), writer)
                elif path == "/sends":
                    self.respond(writer, json.dumps(self.sends).encode())
                    self.sends = {}
                elif path == "/config":
                    self.gap_s = float(json.loads(body)["gap_ms"]) / 1000.0
                    self.respond(writer, b"{}")
                elif path == "/v1/models":
                    self.respond(writer, b'{"data": [{"id": "fast", "max_model_len": 100000}]}')
                else:
                    self.respond(writer, b'{"error": {"message": "not found"}}', status="404 Not Found")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def respond(writer: asyncio.StreamWriter, body: bytes, status: str = "200 OK") -> None:
        writer.write(f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
                     .encode() + body)

    async def stream(self, request: dict, writer: asyncio.StreamWriter) -> None:
        num_tokens = int(request.get("max_tokens", 16))
        prompt = request.get("prompt", "")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for i in range(num_tokens):
            event = b'data: {"id":"x","choices":[{"index":0,"text":" tok","finish_reason":%s}]}\n\n' % (
                b'"length"' if i == num_tokens - 1 else b"null")
            if i == 0:
                self.sends[prompt] = time.clock_gettime(CLOCK)
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            if self.gap_s:
                await asyncio.sleep(self.gap_s)
        usage = json.dumps({"id": "x", "choices": [], "usage": {"prompt_tokens": len(prompt.split()),
                                                              "completion_tokens": num_tokens}}).encode()
        for event in (b"data: " + usage + b"\n\n", b"data: [DONE]\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        writer.write(b"0\r\n\r\n")


async def serve_main() -> None:
    server = SseServer()
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, backlog=1024)
    print(srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()


# ---------------------------------------------------------------------------------------------------------
# Clients: triage's (httpx + SSE parsing) and the raw baseline.


def _stats_ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "mean": None, "n": 0}
    a = np.asarray(values) * 1000.0
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "mean": float(a.mean()),
            "n": int(a.size)}


async def triage_client_run(url: str, concurrency: int, num_requests: int, num_tokens: int, http_get) -> dict:
    from triage.bench.client import RequestOptions, make_pool
    from triage.bench.levels import LevelContext, run_closed
    from triage.bench.prompts import TokenCalibration, synthetic
    from triage.bench.run_config import BenchConfig, Endpoint, LevelSpec

    cfg = BenchConfig(url=url, input_len=16, output_len=num_tokens, seed=concurrency)
    items = synthetic(cfg, num_requests, TokenCalibration())
    opts = RequestOptions(endpoint=Endpoint.COMPLETIONS, model="fast")
    proc = psutil.Process()
    pool = make_pool(url, concurrency, 60.0, {}, None)
    epoch = time.perf_counter()
    cpu0, wall0 = sum(proc.cpu_times()[:2]), time.perf_counter()
    ctx = LevelContext(pool, opts, items, epoch, lambda r: None)
    run = await run_closed(ctx, LevelSpec(concurrency=concurrency), num_requests, None)
    wall = time.perf_counter() - wall0
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    pool.close()
    sends = await http_get("/sends")
    errors, chunks, failed = [], 0, 0
    for r in run.records:
        if not r.ok:
            failed += 1
            continue
        chunks += len(r.chunk_times_s)
        sent = sends.get(items[r.index].prompt)
        if sent is not None:
            errors.append(epoch + r.t0_s + r.ttft_s - sent)
    return {"ttft_error_ms": _stats_ms(errors), "num_chunks": chunks, "wall_s": wall, "cpu_s": cpu,
            "num_failed": failed}


async def raw_client_run(host: str, port: int, concurrency: int, num_requests: int, num_tokens: int,
                         http_get) -> dict:
    """The floor: keep-alive sockets, one write per request, a timestamp on the read with the first content."""
    from triage.bench.prompts import TokenCalibration, synthetic
    from triage.bench.run_config import BenchConfig

    items = synthetic(BenchConfig(url="", input_len=16, output_len=num_tokens, seed=1000 + concurrency),
                      num_requests, TokenCalibration())
    counter = iter(range(num_requests))
    firsts: dict[str, float] = {}
    totals = {"chunks": 0}
    perf = time.perf_counter

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        for i in counter:
            body = json.dumps({"model": "fast", "prompt": items[i].prompt, "max_tokens": num_tokens,
                               "stream": True}).encode()
            writer.write(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            buf, first = b"", None
            while not buf.endswith(b"0\r\n\r\n"):
                data = await reader.read(65536)
                t = perf()
                if not data:
                    raise ConnectionError("server closed")
                if first is None and b'"text":" tok"' in data:
                    first = t
                buf += data
            totals["chunks"] += buf.count(b'"text":" tok"')
            firsts[items[i].prompt] = first
        writer.close()

    proc = psutil.Process()
    cpu0, wall0 = sum(proc.cpu_times()[:2]), perf()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = perf() - wall0, sum(proc.cpu_times()[:2]) - cpu0
    sends = await http_get("/sends")
    errors = [firsts[p] - sends[p] for p in firsts if p in sends and firsts[p] is not None]
    return {"ttft_error_ms": _stats_ms(errors), "num_chunks": totals["chunks"], "wall_s": wall, "cpu_s": cpu,
            "num_failed": 0}


def _throughput(result: dict) -> dict:
    chunks = result["num_chunks"]
    return {"chunks_per_s": chunks / result["wall_s"] if result["wall_s"] else None,
            "cpu_s_per_1k_chunks": result["cpu_s"] / (chunks / 1000.0) if chunks else None,
            "client_cpu_pct": 100.0 * result["cpu_s"] / result["wall_s"] if result["wall_s"] else None}


def _median_of(rounds: list[dict], key: str) -> float | None:
    values = [r[key] for r in rounds if r.get(key) is not None]
    return float(np.median(values)) if values else None


def _summarise(rounds: list[dict], keys: tuple[str, ...]) -> dict:
    """The median over rounds of each number, plus every round (the host is shared: rounds vary)."""
    return {**{k: _median_of(rounds, k) for k in keys}, "rounds": rounds}


async def bench_main(url: str, host: str, port: int, quick: bool, num_rounds: int) -> dict:
    import httpx

    async with httpx.AsyncClient(base_url=url) as control:
        async def http_get(path: str) -> dict:
            return (await control.get(path)).json()

        async def set_gap(ms: float) -> None:
            await control.post("/config", json={"gap_ms": ms})

        out: dict = {"ttft_error": {}, "throughput": {}}
        latency_keys = ("p50", "p99", "mean", "chunks_per_s", "cpu_s_per_1k_chunks", "client_cpu_pct")
        rate_keys = ("chunks_per_s", "cpu_s_per_1k_chunks", "client_cpu_pct")
        # TTFT error under a realistic stream: 5 ms between tokens (200 tokens/s per request). The two clients
        # alternate, round after round, so both see the same mix of host load.
        await set_gap(5.0)
        for concurrency in (1, 16, 64):
            n = max(32 if quick else 64, concurrency * (2 if quick else 4))
            ours_rounds, floor_rounds = [], []
            for _ in range(num_rounds):
                ours = await triage_client_run(url, concurrency, n, 32, http_get)
                floor = await raw_client_run(host, port, concurrency, n, 32, http_get)
                ours_rounds.append({**ours["ttft_error_ms"], "num_failed": ours["num_failed"], **_throughput(ours)})
                floor_rounds.append({**floor["ttft_error_ms"], **_throughput(floor)})
            out["ttft_error"][f"c={concurrency}"] = {
                "num_requests": n, "tokens_per_request": 32, "token_gap_ms": 5.0,
                "triage_client": _summarise(ours_rounds, latency_keys),
                "raw_socket_baseline": _summarise(floor_rounds, latency_keys),
            }
        # Sustained chunks/s: the server sends as fast as it can.
        await set_gap(0.0)
        for concurrency in (16, 64):
            n = concurrency * (2 if quick else 4)
            ours_rounds, floor_rounds = [], []
            for _ in range(num_rounds):
                ours = await triage_client_run(url, concurrency, n, 256, http_get)
                floor = await raw_client_run(host, port, concurrency, n, 256, http_get)
                ours_rounds.append({**_throughput(ours), "num_chunks": ours["num_chunks"],
                                    "num_failed": ours["num_failed"]})
                floor_rounds.append({**_throughput(floor), "num_chunks": floor["num_chunks"]})
            out["throughput"][f"c={concurrency}"] = {
                "num_requests": n, "tokens_per_request": 256,
                "triage_client": _summarise(ours_rounds, rate_keys),
                "raw_socket_baseline": _summarise(floor_rounds, rate_keys),
            }
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_client_overhead.json")
    parser.add_argument("--quick", action="store_true", help="Fewer requests and one round (a smoke run).")
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds of each client (median kept).")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve_main())
        return 0
    server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        started = time.time()
        num_rounds = 1 if args.quick else max(1, args.rounds)
        results = asyncio.run(bench_main(url, "127.0.0.1", port, args.quick, num_rounds))
        load1, load5, _ = os.getloadavg()
        report = {
            "benchmark": "bench_client_overhead",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": {"cpu_model": platform.processor() or None, "num_cpus": os.cpu_count(),
                     "python": platform.python_version(), "loadavg_1m_at_end": load1, "loadavg_5m_at_end": load5,
                     "note": "the host may be shared: judge by the load average"},
            "uvloop": False,
            "num_rounds": num_rounds,
            "duration_s": time.time() - started,
            "targets": {"ttft_error_ms_p50_at_c64": 1.0, "chunks_per_s": 20000},
            **results,
        }
    finally:
        server.terminate()
        server.wait(timeout=10)
    from triage.probes.host import cpu_model

    report["host"]["cpu_model"] = cpu_model()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for section in ("ttft_error", "throughput"):
        for level, entry in report[section].items():
            for client in ("triage_client", "raw_socket_baseline"):
                numbers = {k: round(v, 4) for k, v in entry[client].items() if isinstance(v, float)}
                print(f"{section:10} {level:5} {client:20} {numbers}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
