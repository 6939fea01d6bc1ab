"""FP8 (torch._scaled_mm, compute capability 8.9+) and INT4 (the Triton kernel) weight-only matmuls against
bf16 on one CUDA GPU, at decode shapes (rows 1 and 8) and one prefill shape. Writes JSON (--out).

    python benchmarks/gpu_quant.py --out OUT.json
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
from torch import nn  # noqa: E402

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]      # (out, in): attention, MLP up, MLP down at 8B scale


def _ms(fn, repeats: int = 50) -> float:
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    from triage.reference_engine.layers.quant.fp8 import Fp8Linear
    from triage.reference_engine.layers.quant.int4_triton import Int4TritonLinear

    cc = torch.cuda.get_device_capability()
    rows = []
    for n, k in SHAPES:
        dense = nn.Linear(k, n, bias=False).to("cuda", torch.bfloat16)
        fp8 = Fp8Linear.from_linear(dense)
        int4 = Int4TritonLinear.from_linear(dense, 128)
        for m in (1, 8, 512):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            entry = {"out_in": [n, k], "rows": m, "bf16_ms": _ms(lambda: dense(x))}      # noqa: B023
            entry["fp8_path"] = fp8.path
            entry["fp8_ms"] = _ms(lambda: fp8(x))                                       # noqa: B023
            entry["int4_triton_ms"] = _ms(lambda: int4(x))                              # noqa: B023
            ref = dense(x).float()
            entry["int4_rel_err"] = ((int4(x).float() - ref).abs().max() / ref.abs().max()).item()
            entry["fp8_rel_err"] = ((fp8(x).float() - ref).abs().max() / ref.abs().max()).item()
            for key in ("fp8", "int4_triton"):
                entry[f"{key}_speedup_vs_bf16"] = entry["bf16_ms"] / entry[f"{key}_ms"]
            # bytes a decode step reads: bf16 2/weight, fp8 1 + scales, int4 0.5 + scale/offset per 128
            entry["int4_weight_gb_per_s"] = int4.weight_bytes() / entry["int4_triton_ms"] / 1e6
            rows.append(entry)
            print(json.dumps(entry), flush=True)
    result = {"name": "gpu_quant", "gpu": torch.cuda.get_device_name(), "compute_capability": list(cc),
              "torch": torch.__version__, "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
