"""`make demo`: the three things triage does, on the bundled reference engine and this host.

1. `triage bench` with no --url: the embedded default starts the reference server on a free
   loopback port, sweeps concurrency, stops it, and writes JSON/JSONL/CSV/HTML.
2. `triage diagnose --url` against a live reference server, with that bench report, so the probes
   see a real /metrics endpoint and launch flags, and the rules see real load.
Then `triage compare BASE.json CAND.json` is the CI gate between two such bench reports.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reference_engine.launcher import start_reference_server  # noqa: E402


def run(*args: str) -> int:
    print(f"\n$ triage {' '.join(args)}", flush=True)
    return subprocess.call([sys.executable, "-m", "triage", *args], cwd=REPO)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out", help="where the reports go (default: out/)")
    out = Path(parser.parse_args().out).resolve()
    bench_dir = out / "bench"
    code = run("bench", "--concurrency", "1,4,16", "--num-requests", "24", "--output-dir", str(bench_dir))
    if code not in (0, 1):
        return code
    print("\nstarting a reference server for diagnose …", flush=True)
    with start_reference_server(model="tiny") as server:
        code = run("diagnose", "--url", server.url, "--bench", str(bench_dir / "bench.json"),
                   "--json", str(out / "diagnose.json"))
    print(f"\nreports in {out}/: bench/bench.json, bench/report.html, bench/requests.jsonl, "
          "bench/levels.csv, diagnose.json", flush=True)
    print("gate a change in CI with: triage compare BASE.json CAND.json   (exit 1 on a regression)")
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    sys.exit(main())
