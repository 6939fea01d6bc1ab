"""How long `triage diagnose` takes on this host, and what the concurrent probe runner saves.

Runs the full probe set (no server: host and GPU probes, plus the no-target probes) `--repeats`
times in this process. The baseline is the same run's probes one after another: the sum of their
own durations. Writes JSON to --out (default benchmarks/results/diagnose_runtime.json).

    python benchmarks/diagnose_runtime.py --repeats 3 --window-s 2
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triage.diagnose import DiagnoseOptions, collect, discover  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--url", default=None, help="a server to include (default: none, host probes only)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "diagnose_runtime.json"))
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    opts = DiagnoseOptions(url=args.url, window_s=args.window_s, discover=False)
    found = discover(args.url, look_locally=False)
    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        snapshot = collect(opts, found)
        wall_s = time.perf_counter() - t0
        per_probe = {p.name: p.duration_s for p in snapshot.probes}
        runs.append({"wall_s": round(wall_s, 3), "sequential_sum_s": round(sum(per_probe.values()), 3),
                     "per_probe_s": per_probe, "statuses": {p.name: p.status.value for p in snapshot.probes}})
    wall = [r["wall_s"] for r in runs]
    seq = [r["sequential_sum_s"] for r in runs]
    result = {
        "benchmark": "diagnose_runtime",
        "host": {"platform": platform.platform(), "python": platform.python_version(),
                 "note": "shared CPU host, other jobs running: absolute times are noisy"},
        "window_s": args.window_s,
        "url": args.url,
        "repeats": args.repeats,
        "wall_s_median": round(statistics.median(wall), 3),
        "baseline_sequential_s_median": round(statistics.median(seq), 3),
        "speedup_vs_sequential": round(statistics.median(seq) / statistics.median(wall), 2),
        "runs": runs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"diagnose wall {result['wall_s_median']} s (median of {args.repeats}); probes one after another "
          f"would take {result['baseline_sequential_s_median']} s; written to {out}")


if __name__ == "__main__":
    main()
