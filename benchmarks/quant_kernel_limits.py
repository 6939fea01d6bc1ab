"""Where the FP8/INT4 CPU decode kernels stop short of the memory roofline: compute, row length, or calls.

One process, one thread (as the engine runs on this 2-core host), on the ISA each scheme measures fastest (and
for int4, where that is an int8-activation body, the fastest fp32-activation one beside it). In
each round, against the host's read bandwidth measured in that round and torch's own int64 sum of the stream
buffer (the same bytes, a plain streaming read). The buffer is as large as the bandwidth's (512 MiB): on the
development VM the last-level cache is 480 MiB, and torch's sum of a 100 MiB buffer read at 1.06x the 512 MiB
bandwidth in one run and 0.72x in another, as the neighbours' use of that cache changed.
- ``stream``: one 1 x K @ K x N matmul over the whole buffer of packed weights, at K = 768 and 2048 (the `small`
  preset's two row lengths), and the same bytes cut into the preset's layer heights (256 .. 2048 rows a call);
- ``hot``: the preset's layer shapes with the weights already in L2 (the same layer called again and again):
  the kernel's compute throughput, in packed bytes per second. Where it is not well above the bandwidth, the
  kernel cannot stream at the bandwidth, whatever the prefetching;
- ``call_overhead_us``: a 16 x 64 layer through the nn.Module against the binding alone.
Writes JSON (default benchmarks/results/quant_kernel_limits.json) with host, ISA, load, and the median of rounds.

    python benchmarks/quant_kernel_limits.py [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from baseline_quant import _host  # noqa: E402  (benchmarks/ is on the path)
from quant_decode import _load, isa_choice  # noqa: E402
from torch import nn  # noqa: E402

from triage.baseline.host_bandwidth import host_bandwidth  # noqa: E402
from triage.reference_engine.layers.kernels import quant_weights as qw  # noqa: E402
from triage.reference_engine.layers.kernels.bf16_weights import _time_s  # noqa: E402

STREAM_BYTES = 512 << 20
ROW_LENGTHS = (768, 2048)
LAYER_HEIGHTS = (256, 768, 2048)
LAYER_SHAPES = [(256, 768), (768, 768), (2048, 768), (768, 2048)]     # (out, in): k/v, q/o, gate/up, down


def _calls(scheme: str, isa: int, module, w: torch.Tensor, x: torch.Tensor, group: int = 128):
    """A closure computing x @ w^T for packed ``w`` (fp8: [N, K] bytes; int4: [N, K/2] bytes)."""
    n = w.shape[0]
    if scheme == "fp8":
        scale = torch.ones(n)
        return lambda: module.fp8_linear(x, w, scale, isa)
    scale = torch.ones(n, x.shape[1] // group)
    return lambda: module.int4_linear(x, w, scale, scale, group, isa)


def stream(scheme: str, isa: int, module, buf: torch.Tensor) -> dict:
    out = {}
    for k in ROW_LENGTHS:
        row_bytes = k if scheme == "fp8" else k // 2
        w = buf[: buf.numel() // row_bytes * row_bytes].view(-1, row_bytes)
        x = torch.randn(1, k)
        whole = _calls(scheme, isa, module, w, x)
        entry = {"whole_bytes_per_s": w.numel() / _time_s(whole, 3)}
        for rows in LAYER_HEIGHTS:
            parts = [_calls(scheme, isa, module, w[i:i + rows], x) for i in range(0, w.shape[0] - rows + 1, rows)]
            nbytes = rows * row_bytes * len(parts)
            entry[f"layers_of_{rows}_rows_bytes_per_s"] = nbytes / _time_s(lambda: [f() for f in parts], 3)  # noqa: B023
        out[f"K{k}"] = entry
    return out


def hot(scheme: str, isa: int, module) -> dict:
    out = {}
    gen = torch.Generator().manual_seed(0)
    for n, k in LAYER_SHAPES:
        row_bytes = k if scheme == "fp8" else k // 2
        w = torch.randint(0, 120, (n, row_bytes), dtype=torch.uint8, generator=gen)
        f = _calls(scheme, isa, module, w, torch.randn(1, k, generator=gen))
        out[f"{n}x{k}"] = w.numel() / _time_s(f, 200)
    return out


def call_overhead_us(module, isa: int) -> dict:
    layer = qw.Fp8KernelLinear.from_linear(nn.Linear(64, 16, bias=False), isa)
    x = torch.randn(1, 64)
    with torch.inference_mode():
        return {"module": 1e6 * _time_s(lambda: layer(x), 5000),
                "binding": 1e6 * _time_s(lambda: module.fp8_linear(x, layer.weight_u8, layer.weight_scale, isa), 5000)}


def _paths() -> dict[str, tuple[str, tuple[int, str]]]:
    """name -> (scheme, (isa, why)): each scheme on the body it measures fastest, and where int4's is an
    int8-activation one, the fastest fp32-activation int4 body beside it (``int4_fp32_activations``)."""
    paths = {scheme: (scheme, qw.choose_isa(scheme)) for scheme in ("fp8", "int4")}
    if paths["int4"][1][0] in qw.INT8_ACTIVATION_ISAS:
        with isa_choice("fp32"):
            paths["int4_fp32_activations"] = ("int4", qw.choose_isa("int4"))
    return paths


def _median_tree(rounds: list[dict]) -> dict:
    first = rounds[0]
    if isinstance(first, dict):
        return {k: _median_tree([r[k] for r in rounds]) for k in first}
    return statistics.median(rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "quant_kernel_limits.json")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    host = {**_host(), "torch_num_threads": 1}     # before the work: its load is the load at the start
    module = qw.kernel()[0]
    if module is None:
        sys.exit(f"the kernels could not be built: {qw.kernel()[1]}")
    paths = _paths()
    buf = torch.randint(0, 120, (STREAM_BYTES,), dtype=torch.uint8)
    rounds = []
    for r in range(args.rounds):
        bw = host_bandwidth(512 << 20, 3, 1.0)
        row = {"host_read_bytes_per_s": bw.read_best_bytes_per_s or bw.best_bytes_per_s,
               "torch_sum_bytes_per_s": STREAM_BYTES / _time_s(lambda: buf.view(torch.int64).sum(), 3)}
        for name, (scheme, (isa, _)) in paths.items():
            row[name] = {"stream": stream(scheme, isa, module, buf), "hot_bytes_per_s": hot(scheme, isa, module)}
        rounds.append(row)
        print(f"round {r}: read {row['host_read_bytes_per_s'] / 1e9:.1f} GB/s, torch sum "
              f"{row['torch_sum_bytes_per_s'] / 1e9:.1f} GB/s, load {_load()[0]}", flush=True)
    result = {"name": "quant_kernel_limits", "host": host,
              "isa": {name: why for name, (_, (_, why)) in paths.items()}, "rounds": rounds,
              "median": _median_tree(rounds), "call_overhead_us": call_overhead_us(module, paths["fp8"][1][0])}
    med = result["median"]
    bw = med["host_read_bytes_per_s"]
    ratios = {s: {"stream_pct_of_read": {k: {name: round(100 * v / bw, 1) for name, v in e.items()}
                                         for k, e in med[s]["stream"].items()},
                  "hot_over_read_x": {shape: round(v / bw, 2) for shape, v in med[s]["hot_bytes_per_s"].items()}}
              for s in paths}
    ratios["torch_sum_pct_of_read"] = round(100 * med["torch_sum_bytes_per_s"] / bw, 1)
    result["ratios"] = ratios
    result["host"]["load_avg_at_end"] = _load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({"ratios": ratios, "call_overhead_us": result["call_overhead_us"]}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
