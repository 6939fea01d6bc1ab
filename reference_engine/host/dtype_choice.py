"""The compute dtype, chosen by measurement.

``auto`` times one small matmul per candidate dtype on the target device and takes the fastest one the
weights allow: the checkpoint's own dtype and any wider one that holds its values exactly (bf16 or
fp16 upcast to fp32). A model that declares no dtype is float32 (generated weights are made in
float32). A CPU without bf16 units (AVX2 only, no AVX512_BF16 / AMX) runs bf16 matmuls emulated, often
8-50× slower than fp32, and the measurement sees it; a CPU with AMX or a GPU runs bf16 at least as fast
as fp32 and keeps it. The CPU's flags are reported next to the timings, but never decide: two CPUs
with the same flags can differ, and a torch build may not use the units it has.

Candidates within ``TIE_FRAC`` of the fastest count as a tie, broken towards the narrower dtype: it
reads half the bytes, which is what decode waits on. ``--dtype`` forces a dtype and skips all this.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}
# Ties go to the first of these (narrow first; bf16 before fp16 for its fp32-sized exponent range).
TIE_ORDER = ("bfloat16", "float16", "float32")
TIE_FRAC = 0.10
# The probe: a decode-to-prefill sized matmul, [M, K] @ [K, N]. Small enough to cost a few ms even
# when emulated, large enough that per-call overhead does not hide the arithmetic rate.
PROBE_M, PROBE_K, PROBE_N = 64, 512, 512
PROBE_REPEATS = 5
_NATIVE_FLAGS = {"bfloat16": ("avx512_bf16", "amx_bf16"), "float16": ("avx512_fp16", "amx_fp16")}

MeasureFn = Callable[[str, str], "float | None"]    # (dtype name, device) -> seconds per matmul, None: unusable


@dataclass(frozen=True, slots=True)
class DtypeChoice:
    dtype: torch.dtype
    note: str                                              # one sentence: which dtype and why
    timings_s: dict[str, float | None] = field(default_factory=dict)   # per candidate; None: unusable
    forced: bool = False

    @property
    def name(self) -> str:
        return DTYPE_NAMES[self.dtype]


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> set[str]:
    try:
        for line in Path(cpuinfo_path).read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def allowed_dtypes(checkpoint_dtype: str | None) -> tuple[str, ...]:
    """The dtypes the weights allow: their own and wider ones that hold their values exactly."""
    if checkpoint_dtype not in TORCH_DTYPES or checkpoint_dtype == "float32":
        return ("float32",)            # float32 weights (or undeclared: generated in float32); narrowing changes them
    return (checkpoint_dtype, "float32")


def time_matmul_s(dtype: str, device: str) -> float | None:
    """Best of ``PROBE_REPEATS`` runs of one probe matmul in ``dtype`` on ``device``, after a warm-up."""
    dev = torch.device(device)
    tdtype = TORCH_DTYPES[dtype]
    gen = torch.Generator().manual_seed(0)
    try:
        a = torch.randn(PROBE_M, PROBE_K, generator=gen).to(device=dev, dtype=tdtype)
        b = torch.randn(PROBE_K, PROBE_N, generator=gen).to(device=dev, dtype=tdtype)
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda *_: None)
        torch.mm(a, b)
        sync(dev)
        best = float("inf")
        for _ in range(PROBE_REPEATS):
            t0 = time.perf_counter()
            torch.mm(a, b)
            sync(dev)
            best = min(best, time.perf_counter() - t0)
    except RuntimeError:                                  # no kernel for this dtype on this device
        return None
    return best


@functools.lru_cache(maxsize=16)
def _cached_time(dtype: str, device: str) -> float | None:
    return time_matmul_s(dtype, device)


def _flags_note(device: str, candidates: tuple[str, ...], flags: set[str] | None) -> str:
    if device.startswith("cuda"):
        return ""
    flags = cpu_flags() if flags is None else flags
    have = sorted({f for c in candidates for f in _NATIVE_FLAGS.get(c, ()) if f in flags})
    capability = torch.backends.cpu.get_cpu_capability()
    return (f"; CPU flags: {', '.join(have)}" if have else "; CPU has no avx512_bf16/amx_bf16/avx512_fp16/amx_fp16"
            ) + f", torch kernels: {capability}"


def choose_dtype(requested: str, checkpoint_dtype: str | None, device: str,
                 measure: MeasureFn | None = None, flags: set[str] | None = None) -> DtypeChoice:
    """The compute dtype for ``requested`` (``auto`` or a dtype name) and why. ``measure`` times one
    matmul per candidate (default: ``time_matmul_s``, cached per process); tests inject their own."""
    if requested != "auto":
        return DtypeChoice(TORCH_DTYPES[requested], f"{requested}: forced (--dtype {requested})", forced=True)
    candidates = allowed_dtypes(checkpoint_dtype)
    ckpt = f"the checkpoint is {checkpoint_dtype}" if checkpoint_dtype in TORCH_DTYPES else \
        "the weights declare no dtype, so they are float32"
    if len(candidates) == 1:
        return DtypeChoice(TORCH_DTYPES[candidates[0]], f"{candidates[0]}: {ckpt}, and a narrower dtype "
                           "would change their values (nothing to measure)")
    timer = measure or _cached_time
    timings = {c: timer(c, device) for c in candidates}
    usable = {c: t for c, t in timings.items() if t is not None and t > 0}
    if not usable:
        fallback = checkpoint_dtype if checkpoint_dtype in TORCH_DTYPES else "float32"
        return DtypeChoice(TORCH_DTYPES[fallback], f"{fallback}: no candidate matmul ran on {device}; {ckpt}",
                           timings)
    fastest = min(usable.values())
    tied = [c for c in TIE_ORDER if c in usable and usable[c] <= fastest * (1 + TIE_FRAC)]
    pick = tied[0]
    rates = ", ".join(f"{c} {_gflops(t)}" for c, t in sorted(usable.items(), key=lambda kv: kv[1]))
    skipped = [c for c, t in timings.items() if c not in usable]
    why = (f"fastest measured ({rates} on a {PROBE_M}×{PROBE_K}×{PROBE_N} matmul)" if len(tied) == 1 else
           f"within {TIE_FRAC:.0%} of the fastest and narrower ({rates} on a {PROBE_M}×{PROBE_K}×{PROBE_N} matmul)")
    if pick == "float32":
        why += f"; {ckpt}, upcast exactly"
    if skipped:
        why += f"; unusable here: {', '.join(skipped)}"
    return DtypeChoice(TORCH_DTYPES[pick], f"{pick}: {why}{_flags_note(device, candidates, flags)}", timings)


def _gflops(seconds: float) -> str:
    return f"{2 * PROBE_M * PROBE_K * PROBE_N / seconds / 1e9:.1f} GFLOP/s"

