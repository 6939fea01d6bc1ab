"""`triage baseline --quick`, timed: wall time, per-row time, the compute dtype it chose and why, and
every row's gain (each row's "after" against its "before", measured in the same run).

Targets (set when the compute dtype became chosen by measurement): the whole run <= 60 s on a 2-core AVX2-only CPU; continuous >= 2x static; flash
(SDPA) >= 3x naive TTFT at a 4K context; decode at bs=1 >= 60% of the measured read-bandwidth roofline.
The box may be shared: ``--repeats N`` runs the whole thing N times and keeps every run; the summary
quotes the fastest run and the best value of each ratio over the runs (best of N), and records the
load average around each run. ``--previous REPORT`` carries an earlier `triage baseline --quick` report's
figures along (another CPU) for comparison.

    python benchmarks/baseline_quick.py [--repeats 2] [--previous reports/examples/baseline.json]
"""
from __future__ import annotations

import json
import os
import time

from engine_common import host_info, parser, write_result

NAME = "baseline_quick"


def one_run() -> dict:
    from triage.baseline.config import BaselineConfig
    from triage.baseline.runner import run_baseline

    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    section = run_baseline(BaselineConfig.quick())
    wall = time.perf_counter() - t0
    rows = {r["key"]: r for r in section["rows"]}
    bs1 = [p for p in section["roofline"]["points"] if p["batch_size"] == 1]
    return {
        "wall_s": wall, "load_avg_1m_before": load_before, "load_avg_1m_after": os.getloadavg()[0],
        "dtype": section["dtype"], "dtype_note": section["dtype_note"], "durations_s": section["durations_s"],
        "gains": {k: r.get("gain") for k, r in rows.items()},
        "skipped": {k: r.get("reason") for k, r in rows.items() if r["status"] != "measured"},
        "attention": rows.get("attention", {}).get("details", {}).get("ttft_runs_ms"),
        "roofline_bs1": bs1[0] if bs1 else None,
        "notes": section["notes"],
    }


def figures_from_report(path: str) -> dict:
    """The headline figures of an earlier ``triage baseline --quick`` report (another CPU, another commit)."""
    with open(path) as f:
        report = json.load(f)
    b = report["baseline"]
    return {"source": path, "cpu_model": report.get("host", {}).get("cpu_model"), "dtype": b.get("dtype"),
            "total_s": b.get("total_s"), "gains": {r["key"]: r.get("gain") for r in b["rows"]},
            "decode_bs1_roofline_pct": b.get("roofline", {}).get("bs1_pct"),
            "note": "an earlier run on the bf16-capable (AVX-512, AMX) Xeon box, before the compute dtype was chosen by measurement; kept for comparison"}


def main() -> None:
    p = parser(NAME, __doc__)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--previous", default=None, help="a JSON file with an earlier run's figures to carry along")
    args = p.parse_args()
    started = time.perf_counter()
    host = host_info(args.threads)
    runs = [one_run() for _ in range(args.repeats)]

    def best(key: str) -> float | None:
        vals = [r["gains"].get(key) for r in runs if r["gains"].get(key) is not None]
        return max(vals) if vals else None

    bs1 = [r["roofline_bs1"]["roofline_pct"] for r in runs if r["roofline_bs1"]]
    summary = {
        "wall_s_fastest": round(min(r["wall_s"] for r in runs), 1), "wall_s_target": 60,
        "wall_s_all": [round(r["wall_s"], 1) for r in runs],
        "dtype": runs[0]["dtype"],
        "batching_gain_x": best("batching"), "batching_target_x": 2.0,
        "attention_ttft_gain_x": best("attention"), "attention_target_x": 3.0,
        "decode_bs1_roofline_pct": max(bs1) if bs1 else None, "decode_bs1_target_pct": 60.0,
        "load_avg_1m": [(r["load_avg_1m_before"], r["load_avg_1m_after"]) for r in runs],
    }
    previous = figures_from_report(args.previous) if args.previous else None
    write_result(args.out, NAME, {"host": host, "config": {"repeats": args.repeats, "threads": args.threads},
                                  "runs": runs, "summary": summary, "previous": previous}, started)


if __name__ == "__main__":
    main()
