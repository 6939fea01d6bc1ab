"""Triton FlashAttention-2 prefill vs torch SDPA (the baseline, timed first in the same process) at
2K/8K/16K on a GPU. On a host without one, writes the reason instead of numbers.

    python benchmarks/baseline_triton_attention.py [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from triage.reference_engine.layers.attention.triton_bench import time_prefill_vs_sdpa  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "baseline_triton_attention.json")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = {"name": "baseline_triton_attention", "device": device,
              "gpu": torch.cuda.get_device_name() if device == "cuda" else None,
              "target": "Triton prefill ≥ 0.8× torch SDPA at 8K",
              "points": [time_prefill_vs_sdpa(seq_len=n, device=device) for n in (2048, 8192, 16384)]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
