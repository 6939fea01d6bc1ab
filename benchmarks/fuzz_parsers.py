"""The property-based fuzz suites of tests/test_fuzz_parsers.py at full size: --examples cases each
(default 10,000), through pytest with TRIAGE_FUZZ_EXAMPLES set. Writes JSON (default
benchmarks/results/fuzz_parsers.json) with each suite's case count, outcome and time.

    python benchmarks/fuzz_parsers.py --examples 10000
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITES = ("test_sse_parser_is_total_on_any_bytes_and_splits",
          "test_sse_parser_is_total_on_hostile_json_and_the_split_does_not_matter",
          "test_prometheus_parser_never_raises_and_never_keeps_an_unbounded_value",
          "test_report_loader_gives_a_report_or_one_report_error")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "fuzz_parsers.json"))
    args = ap.parse_args()
    env = {**os.environ, "TRIAGE_FUZZ_EXAMPLES": str(args.examples)}
    results = {}
    for name in SUITES:
        t0 = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                              f"tests/test_fuzz_parsers.py::{name}", "--timeout", "3000"],
                             cwd=REPO, env=env, capture_output=True, text=True)
        ok = run.returncode == 0
        results[name] = {"examples": args.examples, "failures": 0 if ok else 1,
                         "seconds": round(time.perf_counter() - t0, 1),
                         "error": None if ok else run.stdout[-1500:]}
        print(f"{name}: {args.examples} examples, {'0 failures' if ok else 'FAILED'} "
              f"({results[name]['seconds']} s)", flush=True)
    Path(args.out).write_text(json.dumps({"benchmark": "fuzz_parsers", "suites": results}, indent=1) + "\n")
    return 0 if all(r["failures"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
