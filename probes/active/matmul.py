"""The `matmul` active probe: dense bf16 (and fp8, where the GPU has FP8 tensor cores) matmul TFLOP/s per
GPU, next to the spec-sheet dense peak (triage/core/specs.py) and its share. FLOPs = 2 n^3 per matmul.
Keys: docs/SNAPSHOT.md, `matmul`.
"""
from __future__ import annotations

import time
from typing import Any

from triage.core.probe_data.active import MatmulData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.active.cuda import device_info, share, spec_of, time_cuda, torch_cuda, unsupported
from triage.probes.registry import ProbeRun, register

DEFAULT_N = 8192
DEFAULT_BUDGET_S = 4.0


def fp8_reason(torch: Any, cc: list[int]) -> str | None:
    """None when this GPU and torch can run an FP8 matmul, else why not."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no torch._scaled_mm / float8 types"
    if tuple(cc) < (8, 9):
        return f"compute capability {cc[0]}.{cc[1]} has no FP8 tensor cores (needs 8.9+)"
    return None


def _tflops(times: list[float], n: int) -> float | None:
    rates = [2.0 * n ** 3 / t for t in times if t > 0]
    return round(max(rates) / 1e12, 1) if rates else None


def _one_gpu(torch: Any, i: int, n: int, budget_s: float) -> dict[str, Any]:
    info = device_info(torch, i)
    dev = torch.device("cuda", i)
    spec = spec_of(info)
    out: dict[str, Any] = {**info, "n": n, "spec_key": spec.key if spec else None}
    unsupported_fields: list[str] = [] if spec else ["bf16_spec_tflops"]
    with torch.cuda.device(dev):
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        out["bf16_tflops"] = _tflops(time_cuda(torch, lambda: a @ b, 20, budget_s / 2, inner=5), n)
        why = fp8_reason(torch, info["compute_capability"])
        if why is None:
            try:
                a8 = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
                b8 = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()   # column-major, as _scaled_mm wants
                one = torch.ones((), device=dev)
                out["fp8_tflops"] = _tflops(time_cuda(
                    torch, lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                    20, budget_s / 2, inner=5), n)
            except RuntimeError as e:
                why = f"{type(e).__name__}: {e}"[:200]
        if why is not None:
            out["fp8_tflops"] = None
            out["fp8_reason"] = why
            unsupported_fields.append("fp8_tflops")
    out["bf16_spec_tflops"] = round(spec.bf16_flops_per_s / 1e12, 1) if spec else None
    out["fp8_spec_tflops"] = round(spec.fp8_flops_per_s / 1e12, 1) if spec and spec.fp8_flops_per_s else None
    out["bf16_share_of_spec"] = share(out["bf16_tflops"], out["bf16_spec_tflops"])
    out["fp8_share_of_spec"] = share(out.get("fp8_tflops"), out["fp8_spec_tflops"])
    out["unsupported_fields"] = unsupported_fields
    return out


def probe_matmul(budget_s: float = DEFAULT_BUDGET_S, n: int = DEFAULT_N) -> ProbeResult:
    start = time.perf_counter()
    torch, why = torch_cuda()
    if why is not None:
        return unsupported("matmul", why, start)
    count = torch.cuda.device_count()
    gpus = []
    for i in range(count):
        try:
            gpus.append(_one_gpu(torch, i, n, budget_s / count))
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            gpus.append({"index": i, "error": f"{type(e).__name__}: {e}"[:300],
                         "unsupported_fields": ["bf16_tflops", "fp8_tflops"]})
    return ProbeResult("matmul", ProbeStatus.OK, time.perf_counter() - start, None,
                       MatmulData.build({"gpus": gpus, "method": "square n x n matmuls (torch bf16 @, torch._scaled_mm fp8 with "
                                                "unit scales), 5 per CUDA-event pair, best of the repeats; "
                                                "FLOPs = 2 n^3; spec = dense tensor-core peak"}))


BUDGET_S = 3.0


@register("matmul", phase=4, order=140, timeout_s=lambda run: BUDGET_S + 15.0, active=True, budget_s=BUDGET_S,
          extra="engine")
def _run(run: ProbeRun) -> ProbeResult:
    return probe_matmul(BUDGET_S)
