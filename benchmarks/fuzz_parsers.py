"""The property-based fuzz suites of tests/test_fuzz_parsers.py at full size: --examples cases each
(default 10,000), every failure counted. Writes JSON (default benchmarks/results/fuzz_parsers.json).

    python benchmarks/fuzz_parsers.py --examples 10000
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, settings  # noqa: E402

from tests import test_fuzz_parsers as suites  # noqa: E402

SUITES = ("test_sse_parser_is_total_on_any_bytes_and_splits",
          "test_sse_parser_is_total_on_hostile_json_and_the_split_does_not_matter",
          "test_prometheus_parser_never_raises_and_never_keeps_an_unbounded_value",
          "test_report_loader_gives_a_report_or_one_report_error")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "fuzz_parsers.json"))
    args = ap.parse_args()
    results = {}
    for name in SUITES:
        test = settings(max_examples=args.examples, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))(getattr(suites, name))
        t0 = time.perf_counter()
        try:
            test()
            failures, error = 0, None
        except Exception as e:  # noqa: BLE001 - a falsified property is the result we record
            failures, error = 1, f"{type(e).__name__}: {str(e)[:500]}"
        results[name] = {"examples": args.examples, "failures": failures, "error": error,
                         "seconds": round(time.perf_counter() - t0, 1)}
        print(f"{name}: {args.examples} examples, {failures} failures ({results[name]['seconds']} s)", flush=True)
    Path(args.out).write_text(json.dumps({"benchmark": "fuzz_parsers", "suites": results}, indent=1) + "\n")
    return 0 if all(r["failures"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
