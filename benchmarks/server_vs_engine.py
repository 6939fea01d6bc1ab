"""Server tokens/s vs the in-process engine on the same workload: what HTTP, SSE and the engine thread
cost. Target: the server keeps >= 0.9 of the engine's output tokens/s.

Both sides run the same prompts with greedy decoding, ignore_eos and a fixed max_tokens, all requests
submitted at once. The in-process side steps LLMEngine directly; the server side starts `triage serve`
(a child process, via the launcher) and streams every request over loopback with httpx, counting
tokens from the usage chunk. The two runs alternate, and each is repeated; the JSON keeps every run.
Besides wall-clock tokens/s it records CPU seconds (the engine's process; the server's process and
the client's), because on a shared host CPU time per token is much steadier than wall time.

    python benchmarks/server_vs_engine.py --model small --num-requests 32 --max-tokens 64
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import psutil  # noqa: E402

from triage.reference_engine.engine.engine_config import EngineConfig  # noqa: E402
from triage.reference_engine.engine.llm_engine import LLMEngine  # noqa: E402
from triage.reference_engine.layers.sampling_params import SamplingParams  # noqa: E402
from triage.reference_engine.serve.launcher import start_reference_server  # noqa: E402

DEFAULT_OUT = REPO / "benchmarks" / "results" / "server_vs_engine.json"


def prompts(num_requests: int, prompt_chars: int) -> list[str]:
    text = "The reference engine answers the question about batching and paged attention. "
    return [(f"[{i}] " + text * (prompt_chars // len(text) + 1))[:prompt_chars] for i in range(num_requests)]


def run_engine_on_thread(engine: LLMEngine, batch: list[str], max_tokens: int) -> dict:
    """Step the engine on a background thread, as the server does. (On a busy 2-core host, torch ops
    issued from the main thread use the 2-thread OpenMP pool and can run many times slower than the
    same ops issued from another thread; measuring both sides from a background thread compares the
    HTTP layer, not that effect.)"""
    result: dict = {}

    def target() -> None:
        result.update(run_engine(engine, batch, max_tokens))

    thread = threading.Thread(target=target, name="bench-engine")
    thread.start()
    thread.join()
    if not result:
        raise RuntimeError("the in-process engine run failed; see the traceback above")
    return result


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def run_engine(engine: LLMEngine, batch: list[str], max_tokens: int) -> dict:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    me = psutil.Process()
    start_cpu_s = _cpu_s(me)
    start_s = time.perf_counter()
    for i, prompt in enumerate(batch):
        engine.add_request(f"bench-{time.monotonic_ns()}-{i}", prompt, params)
    num_tokens = 0
    while engine.has_unfinished():
        for out in engine.step():
            num_tokens += len(out.new_token_ids)
    elapsed_s = time.perf_counter() - start_s
    cpu_s = _cpu_s(me) - start_cpu_s
    return {"output_tokens": num_tokens, "duration_s": elapsed_s, "output_tokens_per_s": num_tokens / elapsed_s,
            "engine_cpu_s": cpu_s, "output_tokens_per_cpu_s": num_tokens / cpu_s}


async def _stream_one(http: httpx.AsyncClient, model: str, prompt: str, max_tokens: int) -> int:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    usage_tokens = None
    async with http.stream("POST", "/v1/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage_tokens = chunk["usage"]["completion_tokens"]
    if usage_tokens is None:
        raise RuntimeError("the stream ended without a usage chunk")
    return usage_tokens


async def _run_server(url: str, server_pid: int, model: str, batch: list[str], max_tokens: int) -> dict:
    limits = httpx.Limits(max_connections=len(batch) + 4)
    server, client = psutil.Process(server_pid), psutil.Process()
    async with httpx.AsyncClient(base_url=url, timeout=600.0, limits=limits, trust_env=False) as http:
        await _stream_one(http, model, "warm up", 2)
        start_server_cpu_s, start_client_cpu_s = _cpu_s(server), _cpu_s(client)
        start_s = time.perf_counter()
        counts = await asyncio.gather(*(_stream_one(http, model, p, max_tokens) for p in batch))
        elapsed_s = time.perf_counter() - start_s
        server_cpu_s, client_cpu_s = _cpu_s(server) - start_server_cpu_s, _cpu_s(client) - start_client_cpu_s
    num_tokens = sum(counts)
    return {"output_tokens": num_tokens, "duration_s": elapsed_s, "output_tokens_per_s": num_tokens / elapsed_s,
            "server_cpu_s": server_cpu_s, "client_cpu_s": client_cpu_s,
            "output_tokens_per_cpu_s": num_tokens / server_cpu_s}


def host_info() -> dict:
    cpu_model = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    import torch
    return {"cpu_model": cpu_model, "num_cpus": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_num_threads": torch.get_num_threads(),
            "load_avg_1m_at_start": load[0] if load else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small", help="preset (tiny, small) or model directory")
    ap.add_argument("--num-requests", type=int, default=32)
    ap.add_argument("--prompt-chars", type=int, default=128, help="prompt length in bytes (byte tokenizer)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--note", default="", help="free text stored with the results (e.g. the host's load)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()

    batch = prompts(args.num_requests, args.prompt_chars)
    config = EngineConfig(model=args.model, max_num_seqs=args.max_num_seqs, seed=0)
    engine = LLMEngine(config)
    run_engine_on_thread(engine, batch[:2], 2)  # warm-up
    extra = ("--max-num-seqs", str(args.max_num_seqs), "--seed", "0")
    engine_runs, server_runs = [], []
    with start_reference_server(args.model, extra_args=extra) as server:
        for i in range(args.repeats):
            engine_runs.append(run_engine_on_thread(engine, batch, args.max_tokens))
            server_runs.append(asyncio.run(_run_server(server.url, server.pid, args.model, batch,
                                                       args.max_tokens)))
            print(f"run {i + 1}/{args.repeats}: engine {engine_runs[-1]['output_tokens_per_s']:.1f} tok/s, "
                  f"server {server_runs[-1]['output_tokens_per_s']:.1f} tok/s", flush=True)
    engine_tps = statistics.median(r["output_tokens_per_s"] for r in engine_runs)
    server_tps = statistics.median(r["output_tokens_per_s"] for r in server_runs)
    # Each server run follows its engine run within seconds, so the ratio of a pair sees the same
    # host load; the median of those ratios is steadier on a shared host than a ratio of medians.
    pair_ratios = [s["output_tokens_per_s"] / e["output_tokens_per_s"]
                   for e, s in zip(engine_runs, server_runs, strict=True)]
    # CPU time is far less sensitive to other jobs on the host than wall time: the server process's
    # CPU seconds per token against the engine's says what the HTTP layer itself costs.
    cpu_ratios = [s["output_tokens_per_cpu_s"] / e["output_tokens_per_cpu_s"]
                  for e, s in zip(engine_runs, server_runs, strict=True)]
    result = {
        "benchmark": "server_vs_engine",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": host_info(),
        "note": args.note,
        "workload": {"model": args.model, "num_requests": args.num_requests, "prompt_chars": args.prompt_chars,
                     "max_tokens": args.max_tokens, "max_num_seqs": args.max_num_seqs, "temperature": 0.0,
                     "ignore_eos": True, "repeats": args.repeats},
        "engine": {"output_tokens_per_s_median": engine_tps, "runs": engine_runs},
        "server": {"output_tokens_per_s_median": server_tps, "runs": server_runs,
                   "transport": "HTTP/1.1 loopback, SSE streaming, httpx client in the benchmark process"},
        "ratio_server_over_engine": statistics.median(pair_ratios),
        "ratio_per_pair": pair_ratios,
        "ratio_of_medians": server_tps / engine_tps,
        "cpu_efficiency_ratio_server_over_engine": statistics.median(cpu_ratios),
        "cpu_efficiency_ratio_per_pair": cpu_ratios,
        "target_ratio": 0.9,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"server/engine = {result['ratio_server_over_engine']:.3f} (median of "
          f"{', '.join(f'{r:.2f}' for r in pair_ratios)}; medians {server_tps:.1f} vs {engine_tps:.1f} "
          f"output tok/s); tokens per CPU-second, server process / engine = "
          f"{result['cpu_efficiency_ratio_server_over_engine']:.3f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
