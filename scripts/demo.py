"""`make demo`: what triage does, on the bundled reference engine and this host.

1. `triage bench` with no --url: the embedded default starts the reference server on a free
   loopback port, sweeps concurrency, stops it, and writes JSON, JSONL, CSV and HTML.
2. A reference server started with a deliberately undersized configuration (a small KV cache, an
   oversized max_model_len, prefix caching off), load-tested with a shared-prefix workload, then
   `triage diagnose --url … --bench …`: the probes read its /metrics and launch flags while the
   rules judge the load, and the findings name each misconfiguration with the flag that fixes it.

3. `triage coldstart --repeat 2 -- triage serve …`: two starts of the reference server, each broken into its
   phases (process start, weight load, KV allocation, warm-up, API server) with the time to the first token.

`triage compare BASE.json CAND.json` is then the CI gate between two bench reports.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from triage.reference_engine.serve.launcher import start_reference_server  # noqa: E402

# Each flag is a mistake the diagnosis should name: 40 KV blocks of 16 tokens cannot hold one
# 1024-token request (QUANT002) and force preemptions under load (KV002), max_model_len is far
# above the traffic (KV003), and the shared prompt prefix is recomputed (KV005).
UNDERSIZED = ("--num-kv-blocks", "40", "--max-model-len", "1024", "--no-enable-prefix-caching")
WORKLOAD = ("--concurrency", "4,16", "--num-requests", "32", "--input-len", "48", "--output-len", "32",
            "--shared-prefix-len", "32")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args: str) -> int:
    print(f"\n$ triage {' '.join(args)}", flush=True)
    return subprocess.call([sys.executable, "-m", "triage", *args], cwd=REPO)


def closing_hint() -> str:
    """The next step, with the command as it runs here: .venv/bin/triage is not on a fresh shell's PATH."""
    triage = Path(sys.executable).parent / "triage"
    shown = os.path.relpath(triage) if triage.is_file() else f"{sys.executable} -m triage"
    return f"gate a change in CI with: {shown} compare BASE.json CAND.json   (exit 1 on a regression)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out", help="where the reports go (default: out/)")
    out = Path(parser.parse_args().out).resolve()
    code = run("bench", "--concurrency", "1,4,16", "--num-requests", "24", "--output-dir", str(out / "bench"))
    if code not in (0, 1):
        return code
    print(f"\nstarting a reference server with an undersized configuration: {' '.join(UNDERSIZED)}", flush=True)
    with start_reference_server(model="tiny", extra_args=UNDERSIZED) as server:
        code = run("bench", "--url", server.url, *WORKLOAD, "--output-dir", str(out / "undersized"))
        if code not in (0, 1):
            return code
        code = run("diagnose", "--url", server.url, "--bench", str(out / "undersized" / "bench.json"),
                   "--json", str(out / "diagnose.json"))
    if code not in (0, 1):
        return code
    code = run("coldstart", "--repeat", "2", "--json", str(out / "coldstart.json"), "--html",
               str(out / "coldstart.html"), "--", sys.executable, "-m", "triage", "serve", "--port", str(_free_port()))
    if code != 0:
        return code
    print(f"\nreports in {out}/: bench/ (the embedded default: bench.json, report.html, requests.jsonl, "
          "levels.csv), undersized/bench.json, diagnose.json, coldstart.json, coldstart.html", flush=True)
    print(closing_hint())
    return 0


if __name__ == "__main__":
    sys.exit(main())
