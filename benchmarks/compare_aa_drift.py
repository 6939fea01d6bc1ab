"""`compare_aa.py --drift`: does host drift make `triage compare` cry wolf, with repeats in rounds and back to back?

One reference server (no injected delay), so every pair is A/A: whatever compare calls a regression is a
false alarm. Each pair is two benches of it, `--repeat 3` each; halfway through the second one a CPU burner
(a bounded busy-loop subprocess) starts and runs to its end, as another CI job landing on the runner would.
Every pair is run twice, once with `--repeat-order rounds` and once `back-to-back` (which goes first
alternates), so both orders meet the same server, host and burner. Reported per metric and per order: the
share of rows called regression (the false-alarm rate), and how many levels the drift check flagged.

Writes benchmarks/results/compare_aa_drift.json.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORDERS = ("rounds", "back-to-back")
BENCH_ARGS = ("--concurrency", "1,4", "--num-requests", "16", "--repeat", "3", "--warmup", "1",
              "--input-len", "32", "--output-len", "16")
BURNER = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n"
MAX_BURN_S = 300.0


def _bench(url: str, order: str, path: Path) -> tuple[float, float]:
    """One bench: (its launch, its end), epoch s."""
    cmd = [sys.executable, "-m", "triage", "bench", "--url", url, *BENCH_ARGS, "--repeat-order", order,
           "--json", str(path), "--format", "json"]
    t0 = time.time()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench failed: {done.stderr[-2000:]}")
    return t0, time.time()


def _window(path: Path, launched: float, ended: float) -> tuple[float, float]:
    """(seconds from launch to the bench's own start, seconds it measured): the process start-up (imports,
    preflight) is not part of the run the burner has to land in the middle of."""
    started = json.loads(path.read_text())["bench"]["config"]["started_epoch_s"]
    return started - launched, ended - started


def _burn_halfway(startup_s: float, span_s: float) -> tuple[threading.Thread, list]:
    """Start a busy loop halfway through the bench's measured span, for the rest of it (bounded)."""
    procs: list = []

    def later():
        time.sleep(startup_s + span_s / 2)
        burn_s = min(MAX_BURN_S, span_s / 2 + 5.0)
        procs.append(subprocess.Popen([sys.executable, "-c", BURNER, str(burn_s)]))

    thread = threading.Thread(target=later, daemon=True)
    thread.start()
    return thread, procs


def collect(runs_dir: Path, pairs: int) -> dict[str, list[tuple[Path, Path, float]]]:
    from triage.reference_engine.serve.launcher import start_reference_server

    runs_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[tuple[Path, Path, float]]] = {o: [] for o in ORDERS}
    with start_reference_server(model="tiny") as server:
        for p in range(pairs):
            for order in (ORDERS if p % 2 == 0 else ORDERS[::-1]):
                quiet, burnt = runs_dir / f"{order}_p{p}_a.json", runs_dir / f"{order}_p{p}_b.json"
                startup_s, span_s = _window(quiet, *_bench(server.url, order, quiet))
                thread, procs = _burn_halfway(startup_s, span_s)
                load_before = os.getloadavg()[0]
                _bench(server.url, order, burnt)
                thread.join()
                for proc in procs:
                    proc.kill()
                    proc.wait()
                out[order].append((quiet, burnt, load_before))
                print(f"pair {p} {order}: {span_s:.1f} s measured (after {startup_s:.1f} s start-up); burner "
                      f"from {span_s / 2:.1f} s into b's run", flush=True)
    return out


def analyse(runs: dict[str, list[tuple[Path, Path, float]]]) -> dict:
    from triage.compare import compare_reports
    from triage.compare.bench_diff import Verdict
    from triage.compare.thresholds import parse_max_regression
    from triage.core.report_io import read_report

    rules = parse_max_regression(None)
    out = {}
    for order, pairs in runs.items():
        by_metric: dict[str, list[str]] = {}
        drifted = levels = any_alarm = 0
        for quiet, burnt, _ in pairs:
            result = compare_reports(read_report(quiet), read_report(burnt), rules)
            any_alarm += bool(result.exit_code)
            levels += len(read_report(burnt).bench.levels)
            drifted += sum(1 for d in result.drift if d["report"] == "candidate")
            for m in result.metrics:
                if m.verdict is not Verdict.NOT_MEASURED:      # goodput without an SLO: nothing to judge
                    by_metric.setdefault(m.metric, []).append(m.verdict.value)
        out[order] = {
            "pairs": len(pairs),
            "false_alarm_share": {k: v.count(Verdict.REGRESSION.value) / len(v) for k, v in by_metric.items()},
            "inconclusive_share": {k: v.count(Verdict.INCONCLUSIVE.value) / len(v) for k, v in by_metric.items()},
            "pairs_that_failed_the_gate": any_alarm,
            "burnt_levels_flagged_as_drift": f"{drifted}/{levels}",
        }
    return out


def main(pairs: int, runs_dir: Path, out_path: Path, reuse: bool) -> int:
    started, load_start = time.time(), os.getloadavg()
    if reuse:
        runs = {o: [(a, runs_dir / a.name.replace("_a.json", "_b.json"), 0.0)
                    for a in sorted(runs_dir.glob(f"{o}_p*_a.json"))] for o in ORDERS}
    else:
        runs = collect(runs_dir, pairs)
    result = {
        "what": "A/A false alarms of triage compare when a CPU burner starts halfway through the candidate "
                "bench: repeats in rounds vs back to back, same server, same burner (default thresholds)",
        "host": {"python": platform.python_version(), "num_cpus": os.cpu_count(),
                 "load_avg_1m_at_start": load_start[0], "load_avg_1m_at_end": os.getloadavg()[0],
                 "load_avg_1m_before_each_burnt_bench": {o: [p[2] for p in v] for o, v in runs.items()},
                 "note": "the host is shared with other jobs: judge by the load average"},
        "bench_args": list(BENCH_ARGS), "burner": "one busy-loop process from half of the bench's expected wall "
                                                   "time to its end (bounded)",
        "by_order": analyse(runs),
        "wall_s": time.time() - started,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    for order, r in result["by_order"].items():
        worst = max(r["false_alarm_share"].values())
        print(f"{order}: worst metric false-alarm share {worst:.1%} over {r['pairs']} pairs; "
              f"{r['pairs_that_failed_the_gate']} pair(s) failed the gate; drift flagged on "
              f"{r['burnt_levels_flagged_as_drift']} burnt levels")
    print(f"written to {out_path}")
    return 0
