"""How long reading a server log as evidence takes, against the one-pass regex scan of the same text.

A vLLM log of --mib MiB is built from an incident's lines (tests/fixtures/incidents/) and a serving tail of stats
lines and access-log lines, the mix a busy server writes. Measured, best of --repeats, in this process:
- `scan`: probes/logs.scan_lines, the engine-independent single pass (slow tokenizer, CUDA-graph lines,
  shared-memory stalls, OOM lines; one literal search of each lower-cased line): the baseline, the floor any
  reading of these lines pays;
- `plain`: triage/core/log_text.plain_lines, undoing what pasting does;
- `read`: probes/logs.read_files, everything the `logs` probe does (plain lines, the engine's facts at its
  version, the start-up phases, the typed evidence).
Writes JSON (default benchmarks/results/log_reading.json) with the ratios read/scan and the host.

    python benchmarks/log_reading.py [--mib 16] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.core.log_text import plain_lines  # noqa: E402
from triage.probes.logs import read_files, scan_lines  # noqa: E402

INCIDENT = ROOT / "tests" / "fixtures" / "incidents" / "vllm-v0-preemption-swap-546.log"
STATS = ("INFO 10-28 11:{m:02d}:{s:02d} metrics.py:349] Avg prompt throughput: 0.0 tokens/s, Avg generation "
         "throughput: 7154.5 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 98 reqs, GPU KV cache usage: "
         "86.1%, CPU KV cache usage: 0.0%.")
ACCESS = 'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK'


def build(mib: float) -> list[str]:
    lines = [line for line in INCIDENT.read_text().splitlines() if not line.startswith("# ")]
    size, n = sum(len(x) + 1 for x in lines), 0
    while size < mib * 2**20:
        stats = STATS.format(m=(n // 60) % 60, s=n % 60)
        lines += [ACCESS, ACCESS, stats]
        size += 2 * len(ACCESS) + len(stats) + 3
        n += 1
    return lines


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(min(times), 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=float, default=16.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "log_reading.json")
    args = ap.parse_args()
    lines = build(args.mib)
    text = "\n".join(lines)
    scan_s = best(lambda: scan_lines(lines), args.repeats)
    plain_s = best(lambda: plain_lines(text), args.repeats)
    read_s = best(lambda: read_files([("server.log", lines)], "--from"), args.repeats)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    out = {"mib": args.mib, "num_lines": len(lines), "repeats": args.repeats, "scan_s": scan_s, "plain_s": plain_s,
           "read_s": read_s, "read_over_scan": round(read_s / scan_s, 2), "read_mib_per_s": round(args.mib / read_s, 2),
           "host": {"cpu": cpu, "cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2),
                    "python": platform.python_version()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
