"""Does `triage bench --workers N` sustain more load than one process? Against a fast local SSE server (the
one of bench_client_overhead.py, in its own process), the same closed-loop level runs with --workers 1 (the
ordinary single event loop) and --workers N, alternating for --rounds; the figure is SSE chunks per second
(one token per chunk, so output tokens/s) and its ratio to one worker, plus each run's client validity
verdict. On a host with few cores the server competes with the workers for them: the JSON records the
core count, and the ratio means "on this host".

    python benchmarks/bench_workers_scaling.py [--workers 2] [--rounds 3] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(url: str, workers: int, concurrency: int, num_requests: int, tokens: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [sys.executable, "-m", "triage", "bench", "--url", url, "--concurrency", str(concurrency),
               "--num-requests", str(num_requests), "--input-len", "16", "--output-len", str(tokens),
               "--warmup", "8", "--json", str(out), "--format", "json"]
        if workers > 1:
            cmd += ["--workers", str(workers), "--output-dir", str(Path(tmp) / "w")]
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, timeout=900)
        wall = time.perf_counter() - started
        level = json.loads(out.read_text())["bench"]["levels"][0]
    return {"workers": workers, "chunks_per_s": level["output_tokens_per_s"], "valid": level["client"]["valid"],
            "invalid_reason": level["client"]["invalid_reason"], "duration_s": level["duration_s"],
            "ttft_ms_p99": level["ttft_ms"]["p99"], "wall_s": round(wall, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--num-requests", type=int, default=1024)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_workers_scaling.json")
    args = p.parse_args()
    server = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "bench_client_overhead.py"), "--serve"],
                              stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        started = time.time()
        load_before = os.getloadavg()[0]
        runs = []
        for _ in range(args.rounds):
            for workers in (1, args.workers):
                runs.append(run(url, workers, args.concurrency, args.num_requests, args.tokens))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        server.terminate()
        server.wait(10)
    best = {w: max(r["chunks_per_s"] for r in runs if r["workers"] == w) for w in (1, args.workers)}
    result = {
        "benchmark": "bench_workers_scaling",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "host": {"cpu_count": os.cpu_count(), "loadavg_1m_before": load_before, "loadavg_1m_after": os.getloadavg()[0],
                 "note": "the SSE server runs on the same host and competes with the workers for its cores"},
        "setup": vars(args) | {"out": str(args.out)},
        "runs": runs,
        "summary": {"chunks_per_s_1_worker": round(best[1]), f"chunks_per_s_{args.workers}_workers":
                    round(best[args.workers]), "ratio": round(best[args.workers] / best[1], 2)},
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
