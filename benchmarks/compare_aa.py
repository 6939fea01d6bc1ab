"""How often does `triage compare` cry wolf, and how small a real slowdown does it catch?

1. Collect (the slow part): reference servers with `--inject-delay-ms 0` and with known delays (a sleep
   before each generation, in the server's request path), and interleaved rounds of
   `triage bench --repeat 3` against each, so that host-load drift hits every server alike.
2. A/A over repeats: every pair of delay-0 benches (two benches of the same server, `--repeat 3` each),
   compared at the default thresholds → the share of metric × level rows called `regression`.
3. A/A over resamples of one run: the per-request samples of one delay-0 run split at random into two
   halves, each half a report without repeats (the within-run interval path) → the same share.
4. Power: every (delay-0 bench, delayed bench) pair → the share caught as a regression, per metric; the
   smallest delay caught ≥ 90% of the time, and what relative slowdown of that metric it was.

    python benchmarks/compare_aa.py [--rounds 3] [--delays 1,2,4,8] [--runs-dir DIR] [--reuse]
    python benchmarks/compare_aa.py --drift [--pairs 4]     # host drift: repeats in rounds vs back to back

Writes benchmarks/results/compare_aa.json. The box is shared: absolute latencies move, ratios matter.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.factories import stats_of  # noqa: E402
from triage.compare import compare_reports  # noqa: E402
from triage.compare.bench_diff import Verdict  # noqa: E402
from triage.compare.thresholds import parse_max_regression  # noqa: E402
from triage.core.report_io import read_report  # noqa: E402

BENCH_ARGS = ("--concurrency", "1,4", "--num-requests", "16", "--repeat", "3", "--warmup", "1",
              "--input-len", "32", "--output-len", "16")
RULES = parse_max_regression(None)
DEFAULT_RUNS = "/tmp/triage_compare_aa_runs"


def collect(runs_dir: Path, delays: list[float], rounds: int) -> dict[float, list[Path]]:
    from triage.reference_engine.serve.launcher import start_reference_server

    runs_dir.mkdir(parents=True, exist_ok=True)
    out: dict[float, list[Path]] = {d: [] for d in [0.0, *delays]}
    with ExitStack() as stack:
        servers = {d: stack.enter_context(start_reference_server(
            model="tiny", extra_args=("--inject-delay-ms", str(d)))) for d in out}
        for r in range(rounds):
            # Two delay-0 benches a round (the A/A pairs), one per delay; order rotated each round.
            order = [0.0, *delays, 0.0]
            order = order[r % len(order):] + order[:r % len(order)]
            for i, d in enumerate(order):
                path = runs_dir / f"d{d:g}_r{r}_{i}.json"
                cmd = [sys.executable, "-m", "triage", "bench", "--url", servers[d].url, *BENCH_ARGS,
                       "--json", str(path), "--format", "json"]
                done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
                if done.returncode not in (0, 1):
                    raise SystemExit(f"bench failed: {done.stderr[-2000:]}")
                out[d].append(path)
                print(f"round {r} delay {d:g} ms -> {path.name}", flush=True)
    return out


def _rates(results: list) -> dict[str, dict[str, float]]:
    """Per metric: the share of rows called regression / inconclusive, over all pairs and levels."""
    by_metric: dict[str, list[str]] = {}
    for result in results:
        for m in result.metrics:
            by_metric.setdefault(m.metric, []).append(m.verdict.value)
    return {metric: {"rows": len(v), "regression_share": v.count(Verdict.REGRESSION.value) / len(v),
                     "inconclusive_share": v.count(Verdict.INCONCLUSIVE.value) / len(v)}
            for metric, v in by_metric.items()}


def _half(report, idx_by_level):
    """The report with each level's per-request samples cut to `idx` and its stats recomputed; no repeats."""
    levels = []
    for lv, idx in zip(report.bench.levels, idx_by_level, strict=False):
        samples = {k: [v[i] for i in idx if i < len(v)] for k, v in (lv.samples or {}).items()}
        stats = {k: stats_of(v) for k, v in samples.items() if k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")}
        levels.append(dataclasses.replace(lv, samples=samples, repeats=None, **stats))
    return dataclasses.replace(report, bench=dataclasses.replace(report.bench, levels=tuple(levels)))


def resample_aa(paths: list[Path], splits: int, seed: int) -> list:
    """A/A on one run: its requests split at random into two halves, compared on the per-request samples."""
    rng = np.random.default_rng(seed)
    results = []
    for path in paths:
        report = read_report(path)
        for _ in range(splits):
            a_idx, b_idx = [], []
            for lv in report.bench.levels:
                n = len((lv.samples or {}).get("ttft_ms", []))
                perm = rng.permutation(n)
                a_idx.append(sorted(perm[: n // 2]))
                b_idx.append(sorted(perm[n // 2:]))
            results.append(compare_reports(_half(report, a_idx), _half(report, b_idx), RULES))
    return results


def _slowdown_pct(base: list[Path], cand: list[Path], metric: str) -> float | None:
    """The mean relative change of `metric` (the worse direction positive) from delay 0 to this delay."""
    def mean_value(paths):
        values = []
        for p in paths:
            for lv in read_report(p).bench.levels:
                fam, _, stat = metric.partition(".")
                values.append(getattr(getattr(lv, fam), stat) if stat else getattr(lv, metric))
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None
    b, c = mean_value(base), mean_value(cand)
    if b is None or c is None or b == 0:
        return None
    change = 100.0 * (c - b) / b
    return change if "." in metric else -change


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delays", default="1,2,4,8", help="injected delays in ms")
    parser.add_argument("--splits", type=int, default=40, help="random halvings per delay-0 run")
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS)
    parser.add_argument("--reuse", action="store_true", help="analyse the runs already in --runs-dir")
    parser.add_argument("--out", default=None, help="default benchmarks/results/compare_aa.json "
                                                        "(compare_aa_drift.json with --drift)")
    parser.add_argument("--drift", action="store_true", help="plant a CPU burner halfway through one bench of "
                        "each A/A pair; false alarms with repeats in rounds vs back to back (compare_aa_drift.py)")
    parser.add_argument("--pairs", type=int, default=4, help="--drift: A/A pairs per repeat order")
    args = parser.parse_args()
    results_dir = REPO / "benchmarks" / "results"
    if args.drift:
        from benchmarks.compare_aa_drift import main as drift_main

        runs = Path(args.runs_dir if args.runs_dir != DEFAULT_RUNS else DEFAULT_RUNS + "_drift")
        return drift_main(args.pairs, runs, Path(args.out or results_dir / "compare_aa_drift.json"), args.reuse)
    args.out = args.out or str(results_dir / "compare_aa.json")
    delays = [float(d) for d in args.delays.split(",") if d]
    runs_dir = Path(args.runs_dir)
    started = time.time()
    if args.reuse:
        runs = {d: sorted(runs_dir.glob(f"d{d:g}_r*.json")) for d in [0.0, *delays]}
    else:
        runs = collect(runs_dir, delays, args.rounds)
    collect_s = time.time() - started
    base = runs[0.0]
    aa_pairs = [compare_reports(read_report(a), read_report(b), RULES) for a, b in itertools.combinations(base, 2)]
    aa_resample = resample_aa(base, args.splits, seed=0)
    power = {}
    for d in delays:
        results = [compare_reports(read_report(a), read_report(b), RULES) for a in base for b in runs[d]]
        caught = {metric: r["regression_share"] for metric, r in _rates(results).items()}
        power[f"{d:g}"] = {"pairs": len(results),
                           "caught_share": caught,
                           "slowdown_pct": {m: _slowdown_pct(base, runs[d], m) for m in caught}}
    smallest = {}
    for rule in RULES:
        hit = next((d for d in delays if power[f"{d:g}"]["caught_share"].get(rule.metric, 0) >= 0.9), None)
        smallest[rule.metric] = None if hit is None else {
            "delay_ms": hit, "slowdown_pct": power[f"{hit:g}"]["slowdown_pct"][rule.metric]}
    load = os.getloadavg()
    result = {
        "what": "A/A false-alarm rate and detectable slowdown of triage compare (default thresholds, "
                "default --inconclusive pass)",
        "host": {"python": platform.python_version(), "num_cpus": os.cpu_count(), "load_avg_1m_at_end": load[0],
                 "note": "the host may be shared: judge by the load average"},
        "bench_args": list(BENCH_ARGS), "delays_ms": delays, "rounds": args.rounds,
        "runs": {f"{d:g}": len(p) for d, p in runs.items()},
        "aa_repeats": {"pairs": len(aa_pairs), "per_metric": _rates(aa_pairs),
                       "any_regression_share": sum(1 for r in aa_pairs if r.exit_code) / max(1, len(aa_pairs))},
        "aa_resamples": {"pairs": len(aa_resample), "per_metric": _rates(aa_resample),
                         "any_regression_share": sum(1 for r in aa_resample if r.exit_code) / max(1, len(aa_resample))},
        "power": power,
        "smallest_delay_caught_90pct": smallest,
        "wall_s": {"collect": collect_s, "total": time.time() - started},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    worst_aa = max(v["regression_share"] for v in result["aa_repeats"]["per_metric"].values())
    worst_rs = max(v["regression_share"] for v in result["aa_resamples"]["per_metric"].values())
    print(f"A/A (repeats): worst metric false-alarm share {worst_aa:.1%}; "
          f"A/A (resamples): {worst_rs:.1%}; written to {out}")
    for metric, s in smallest.items():
        print(f"  {metric}: " + ("not caught 90% of the time at any delay" if s is None else
                                 f"caught >=90% from {s['delay_ms']:g} ms ({s['slowdown_pct']:+.1f}%)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
