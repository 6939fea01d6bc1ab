"""Shared bits of the engine benchmarks: host description, JSON output, argument defaults.

Every engine benchmark compares an "after" against its "before" baseline inside one process, on the
same host, and writes JSON to ``--out`` (default ``benchmarks/results/<name>.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def host_info(threads: int) -> dict:
    """Describe the host, and pin torch to ``threads`` intra-op threads for the whole run."""
    import torch

    torch.set_num_threads(threads)

    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load_1m, load_5m, _ = os.getloadavg()
    except OSError:
        load_1m = load_5m = None
    return {
        "cpu_model": cpu_model,
        "num_cpus": os.cpu_count(),
        "torch_num_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "load_avg_1m_at_start": load_1m,
        "load_avg_5m_at_start": load_5m,
        "note": ("shared 2-core CPU box: other jobs ran concurrently, so absolute numbers are noisy; "
                 "before/after pairs ran back to back in one process"),
    }


def parser(name: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / f"{name}.json",
                   help="where to write the JSON result (default: %(default)s)")
    from triage.reference_engine.host.threads import fit_num_threads

    p.add_argument("--threads", type=int, default=fit_num_threads()[0],
                   help="torch intra-op threads (default: %(default)s, what fits this host now: one core left "
                        "free, none beyond the idle ones; a thread per core stalls on a busy shared box)")
    return p


def write_result(path: Path, name: str, payload: dict, started_s: float) -> None:
    try:
        load_end = os.getloadavg()[0]
    except OSError:
        load_end = None
    doc = {"benchmark": name, "created_unix_s": time.time(), "wall_s": time.perf_counter() - started_s,
           "load_avg_1m_at_end": load_end, **payload}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc.get("summary", doc), indent=2))
    print(f"wrote {path}")
