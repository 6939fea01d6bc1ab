"""Weight-only quantization on this CPU: the small preset's linear shapes, and whole-model decode.

Before (the baseline run first, in the same process): dense bf16 ``F.linear``. After: INT4
group-wise via the packed CPU kernel, its reference dequant path, FP8 dequant-then-linear, and
dense fp32. Then whole-model decode tok/s at bs=1 through the reference engine for bf16, fp32,
int4 (g=128) and fp8. Writes JSON to --out (default benchmarks/results/baseline_quant.json).

    python benchmarks/baseline_quant.py [--threads 1] [--repeats 30] [--skip-model]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from triage.reference_engine.quant import Fp8Linear, Int4Linear, quantize_model  # noqa: E402
from triage.reference_engine.threads import fit_num_threads  # noqa: E402

# (out, in) of the small preset: q, k/v, o, gate/up, down, lm_head (tied embedding).
SMALL_SHAPES = [(768, 768), (256, 768), (2048, 768), (768, 2048), (32000, 768)]


def _host() -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (None, None, None)
    return {"torch": torch.__version__, "python": platform.python_version(), "num_cpus": os.cpu_count(),
            "torch_num_threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "load_avg_1m_at_start": load[0],
            "note": "shared 2-core CPU box with other jobs running: absolute numbers are noisy; the "
                    "before/after pairs ran back to back in this process"}


@torch.inference_mode()
def _time_ms(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _bench_shape(out_f: int, in_f: int, batch: int, repeats: int) -> dict:
    torch.manual_seed(0)
    dense = nn.Linear(in_f, out_f, bias=False).to(torch.bfloat16)
    x = torch.randn(batch, in_f, dtype=torch.bfloat16)
    base_ms = _time_ms(lambda: F.linear(x, dense.weight), repeats)  # the baseline, first
    w32, x32 = dense.weight.float(), x.float()
    int4 = Int4Linear.from_linear(dense, 128)
    int4_ref = Int4Linear.from_linear(dense, 128, path="reference")
    fp8 = Fp8Linear.from_linear(dense)
    candidates = {
        "fp32_dense": lambda: F.linear(x32, w32),
        "int4_packed_g128": lambda: int4(x),
        "int4_reference_g128": lambda: int4_ref(x),
        "fp8_dequant": lambda: fp8(x),
    }
    entry = {"shape_out_in": [out_f, in_f], "batch": batch, "bf16_dense_ms": base_ms,
             "int4_path": int4.path, "fp8_path": fp8.path}
    for name, fn in candidates.items():
        ms = _time_ms(fn, repeats)
        entry[f"{name}_ms"] = ms
        entry[f"{name}_speedup_vs_bf16"] = base_ms / ms
    return entry


def bench_layers(repeats: int, batch: int) -> list[dict]:
    return [_bench_shape(out_f, in_f, batch, repeats) for out_f, in_f in SMALL_SHAPES]


def bench_model(decode_tokens: int) -> dict:
    from triage.reference_engine import EngineConfig, SamplingParams
    from triage.reference_engine.engine import LLMEngine

    out: dict[str, dict] = {}
    for name, dtype, scheme in (("bf16", "bfloat16", None), ("fp32", "float32", None),
                                ("int4_g128", "bfloat16", "int4"), ("fp8", "bfloat16", "fp8")):
        eng = LLMEngine(EngineConfig(model="small", dtype=dtype, max_num_seqs=1, max_model_len=128,
                                     num_kv_blocks=16, enable_prefix_caching=False))
        weight_bytes = None
        if scheme:
            summary = quantize_model(eng.runner.model, scheme, group_size=128)
            weight_bytes = summary.weight_bytes_after
        n = decode_tokens if scheme != "fp8" else max(2, decode_tokens // 8)
        params = SamplingParams(max_tokens=n + 1, temperature=0.0, ignore_eos=True)
        eng.generate([list(range(10, 42))], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True))
        c = eng.generate([list(range(10, 42))], params)[0]
        tpot = (c.times.finished_s - c.times.first_token_s) / n
        out[name] = {"decode_tokens_per_s": 1.0 / tpot, "num_decode_tokens": n, "weight_bytes": weight_bytes}
    base = out["bf16"]["decode_tokens_per_s"]
    for v in out.values():
        v["speedup_vs_bf16"] = v["decode_tokens_per_s"] / base
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "baseline_quant.json")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: fit_num_threads(), one core left free on a busy host)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--skip-model", action="store_true", help="only the per-layer part")
    args = ap.parse_args()
    torch.set_num_threads(args.threads or fit_num_threads()[0])
    result = {"name": "baseline_quant", "host": _host(),
              "layers_bs1": bench_layers(args.repeats, 1), "layers_bs8": bench_layers(args.repeats, 8)}
    if not args.skip_model:
        result["model_small_decode_bs1"] = bench_model(args.decode_tokens)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "host"}, indent=1)[:3000])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
