"""Weights stored in bf16, arithmetic in fp32: for a CPU without bf16 units, where the compute dtype is fp32.

A bf16 checkpoint upcast to fp32 holds exactly the same values in twice the bytes, and a decode step at small
batch reads every weight once: it waits on memory. `Bf16StoredLinear` keeps the weight in bf16 and, for a few
rows (decode), multiplies with a small AVX2 kernel (bf16_weights.cpp) that widens each weight in registers
and accumulates in fp32; for many rows (prefill, compute-bound) it widens the weight and calls torch's fp32
matmul. The kernel is compiled once with torch.utils.cpp_extension (cached under ~/.cache/torch_extensions);
where that fails (no compiler, no AVX2/FMA), `kernel()` says why and the engine keeps fp32 weights.

Whether to use it is measured (`choose_storage`): one decode-shaped matmul each way; bf16 storage only when
it is faster by `MIN_GAIN_X`. The numbers and the reason go into the engine's dtype note.
"""
from __future__ import annotations

import functools
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

log = logging.getLogger(__name__)

MAX_KERNEL_ROWS = 32        # more rows than this: widen the weight and use torch's matmul (prefill)
MIN_GAIN_X = 1.15
_SOURCE = Path(__file__).with_name("bf16_weights.cpp")


@functools.cache
def kernel() -> tuple[Any, str | None]:
    """(the compiled module, None) or (None, why not)."""
    return build_extension("triage_bf16_weights", [_SOURCE], {"avx2", "fma"}, ["-O3", "-mavx2", "-mfma"],
                           "the bf16-weight kernel (about 30 s)", {"bf16_weight_linear": _bf16_weight_linear_shape})


def build_extension(name: str, sources: list[Path], needs: set[str], cflags: list[str], what: str,
                    fakes: dict[str, Callable[..., torch.Tensor]]) -> tuple[Any, str | None]:
    """A C++ CPU kernel compiled once with torch's cpp_extension (cached afterwards): (module, None), or (None, why
    not) where the CPU lacks `needs` or no compiler, headers or ninja are at hand (callers keep torch paths).
    ``fakes``: the output shape of each operator the library registers in the ``triage`` namespace, by name."""
    missing = needs - _cpu_flags()
    if missing:
        return None, f"the CPU lacks {'/'.join(sorted(f.upper() for f in missing))}"
    # ninja from the `engine` extra lives next to this interpreter, which may not be on PATH (a venv used
    # without activating it).
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    try:
        from torch.utils.cpp_extension import load

        _drop_stale_build_lock(name)
        log.info("compiling %s once; cached afterwards", what)
        module = load(name, [str(p) for p in sources], extra_cflags=cflags, verbose=False)
    except Exception as e:  # noqa: BLE001 - no compiler, no headers, no ninja: the caller keeps torch's path
        return None, f"the kernel could not be built here ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
    for op, shape in fakes.items():
        torch.library.register_fake(f"triage::{op}", shape)
    return module, None


# The kernel is also a torch operator, ``triage::bf16_weight_linear``, which bf16_weights.cpp registers as it
# loads: torch.compile keeps it whole in the compiled decode step (engine/compiled_step.py), where a pybind call
# would be opaque to Dynamo and split the graph, and the compiled code calls it through the dispatcher. Its fake
# implementation gives the output's shape, which is all tracing needs. Eager calls take the pybind function, which
# skips the dispatcher; ``torch.compiler.is_compiling()`` is a constant while Dynamo traces.
def _bf16_weight_linear_shape(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], w.shape[0])


def bf16_weight_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """fp32 ``x [T, K]`` @ bf16 ``w [N, K]``ᵀ on the kernel, in fp32."""
    if torch.compiler.is_compiling():
        return torch.ops.triage.bf16_weight_linear(x, w)
    return kernel()[0].bf16_weight_linear(x, w)


STALE_BUILD_LOCK_S = 600.0     # a build takes about a minute here; a lock this old outlived the build that took it


def _drop_stale_build_lock(name: str) -> None:
    """torch waits forever on the lock file of a build that was killed (Ctrl-C, a timeout): remove one that old."""
    from torch.utils.cpp_extension import _get_build_directory  # private, but it is where `load` builds

    lock = Path(_get_build_directory(name, False)) / "lock"
    try:
        age_s = time.time() - lock.stat().st_mtime
    except OSError:
        return
    if age_s > STALE_BUILD_LOCK_S:
        log.warning("removing %s: left by a build killed %.0f s ago", lock, age_s)
        lock.unlink(missing_ok=True)


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


class Bf16StoredLinear(nn.Module):
    """nn.Linear's job with a bf16 weight and fp32 arithmetic. Same parameter names (`weight`, `bias`)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.kernel_built = kernel()[0] is not None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if self.kernel_built and rows.shape[0] <= MAX_KERNEL_ROWS and rows.dtype == torch.float32:
            out = bf16_weight_linear(rows, self.weight)
            if self.bias is not None:
                out = out + self.bias
        else:
            out = F.linear(rows, self.weight.to(rows.dtype), self.bias)
        return out.reshape(*x.shape[:-1], self.out_features)

    def to_linear(self) -> nn.Linear:
        """The same layer with fp32 weights (the quantization handlers convert nn.Linear)."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        with torch.no_grad():
            linear.weight.copy_(self.weight.float())
            if self.bias is not None:
                linear.bias.copy_(self.bias)
        return linear


def bf16_exact(model: nn.Module) -> bool:
    """Every fp32 Linear weight holds bf16 values exactly (a bf16 checkpoint, upcast)."""
    for m in model.modules():
        if type(m) is nn.Linear:
            w = m.weight.detach()
            if w.dtype != torch.float32 or not torch.equal(w, w.to(torch.bfloat16).float()):
                return False
    return True


def _time_s(fn, repeats: int = 20) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeats)
    return best


def choose_storage(model: nn.Module, hidden: int, intermediate: int, device: str) -> tuple[bool, str]:
    """(store Linear weights in bf16?, why), by measurement on a decode-shaped matmul."""
    if device != "cpu":
        return False, "fp32 weights (bf16 storage is a CPU path)"
    if not bf16_exact(model):
        return False, "fp32 weights (they are not bf16 values: storing them in bf16 would change them)"
    module, why = kernel()
    if module is None:
        return False, f"fp32 weights ({why})"
    gen = torch.Generator().manual_seed(0)
    w32 = torch.randn(intermediate, hidden, generator=gen)
    w16, x = w32.to(torch.bfloat16), torch.randn(1, hidden, generator=gen)
    fp32_s = _time_s(lambda: F.linear(x, w32))
    bf16_s = _time_s(lambda: module.bf16_weight_linear(x, w16))
    gain = fp32_s / bf16_s
    timing = f"a 1x{hidden} @ {hidden}x{intermediate} decode matmul: {fp32_s * 1e3:.3f} ms with fp32 weights, " \
             f"{bf16_s * 1e3:.3f} ms with bf16 weights"
    if gain < MIN_GAIN_X:
        return False, f"fp32 weights ({timing}: bf16 storage only {gain:.2f}x faster)"
    return True, f"bf16-stored weights, fp32 arithmetic ({timing}, {gain:.2f}x)"


def store_bf16(model: nn.Module) -> int:
    """Swap every nn.Linear for a Bf16StoredLinear (a tied lm_head gets its own bf16 copy; the embedding
    table stays fp32). Returns how many were swapped."""
    swapped = 0
    for name, m in list(model.named_modules()):
        if type(m) is nn.Linear:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, Bf16StoredLinear(m))
            swapped += 1
    return swapped
