"""How long `triage diagnose` takes on this host: the whole process, the import, and the probes.

Four measurements, each written to --out (default benchmarks/results/diagnose_runtime.json):

1. `python -c pass` (the interpreter alone, the baseline of the next two) and `python -c "import triage.cli"`
   (the import a command pays), each a fresh process, `--repeats` times;
2. `triage --version` through the installed entry point (`--triage-bin`, default the `triage` beside this
   Python), best and median of `--repeats` (the target: best of 5 <= 0.3 s);
3. `triage diagnose --url <reference server> --json FILE`, the whole process against a real `triage serve`
   (tiny preset) on loopback, no bench and no GPU, median of `--repeats` (target: <= 5 s);
4. the probe phases in this process (`collect`), with the sum of the probes' own durations as the
   baseline of running them one after another.

The repository root is put first on PYTHONPATH, so the entry point runs this tree's code.

    python benchmarks/diagnose_runtime.py --repeats 5
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.diagnose import DiagnoseOptions, collect, discover  # noqa: E402


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _timed(argv: list[str], repeats: int, check: bool = True) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=_env(), cwd=ROOT, capture_output=True, text=True)
        times.append(round(time.perf_counter() - t0, 3))
        if check and proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return times


def _summary(times: list[float]) -> dict[str, float | list[float]]:
    return {"best_s": min(times), "median_s": round(statistics.median(times), 3), "runs_s": times}


def _in_process(url: str | None, window_s: float, repeats: int) -> dict:
    opts = DiagnoseOptions(url=url, window_s=window_s, discover=False)
    found = discover(url, look_locally=False)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        snapshot = collect(opts, found)
        wall_s = time.perf_counter() - t0
        per_probe = {p.name: p.duration_s for p in snapshot.probes}
        runs.append({"wall_s": round(wall_s, 3), "sequential_sum_s": round(sum(per_probe.values()), 3),
                     "per_probe_s": per_probe, "statuses": {p.name: p.status.value for p in snapshot.probes}})
    wall = [r["wall_s"] for r in runs]
    seq = [r["sequential_sum_s"] for r in runs]
    return {"url": url, "window_s": window_s, "wall_s_median": round(statistics.median(wall), 3),
            "baseline_sequential_s_median": round(statistics.median(seq), 3),
            "speedup_vs_sequential": round(statistics.median(seq) / statistics.median(wall), 2), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window-s", type=float, default=2.0, help="diagnose's window (its default is 2 s)")
    parser.add_argument("--triage-bin", default=shutil.which("triage", path=str(Path(sys.executable).parent)))
    parser.add_argument("--no-server", action="store_true", help="skip the reference-server run (no torch here)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "diagnose_runtime.json"))
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not args.triage_bin:
        parser.error("no `triage` entry point beside this Python; pass --triage-bin")

    python = sys.executable
    bare = _timed([python, "-c", "pass"], args.repeats)
    imp = _timed([python, "-c", "import triage.cli"], args.repeats)
    version = _timed([args.triage_bin, "--version"], args.repeats)
    result: dict = {
        "benchmark": "diagnose_runtime",
        "host": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                 "note": "shared CPU host, other jobs running: absolute times are noisy"},
        "repeats": args.repeats,
        "triage_bin": args.triage_bin,
        "python_bare": _summary(bare),
        "import_triage_cli": _summary(imp),
        "import_over_bare_s_median": round(statistics.median(imp) - statistics.median(bare), 3),
        "triage_version": {**_summary(version), "target_best_s": 0.3,
                           "meets_target": min(version) <= 0.3},
    }
    if not args.no_server:
        from triage.reference_engine.serve.launcher import start_reference_server

        server = start_reference_server("tiny", extra_args=("--seed", "0"), startup_timeout_s=300)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                whole = _timed([args.triage_bin, "--no-color", "diagnose", "--url", server.url, "--window-s",
                                str(args.window_s), "--json", str(Path(tmp) / "diagnose.json")], args.repeats)
                report = json.loads((Path(tmp) / "diagnose.json").read_text())
            result["diagnose_process"] = {
                **_summary(whole), "target_median_s": 5.0, "meets_target": statistics.median(whole) <= 5.0,
                "window_s": args.window_s,
                "probe_statuses": {p["name"]: p["status"] for p in report["probes"]},
                "findings": [f["code"] for f in report["findings"]],
            }
            result["collect_in_process"] = _in_process(server.url, args.window_s, args.repeats)
        finally:
            server.stop()
    else:
        result["collect_in_process"] = _in_process(None, args.window_s, args.repeats)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    line = (f"python -c pass {result['python_bare']['median_s']} s, import triage.cli "
            f"{result['import_triage_cli']['median_s']} s, triage --version best {result['triage_version']['best_s']} s")
    if "diagnose_process" in result:
        line += f", triage diagnose --url (reference) median {result['diagnose_process']['median_s']} s"
    print(f"{line} (median of {args.repeats}); written to {out}")


if __name__ == "__main__":
    main()
