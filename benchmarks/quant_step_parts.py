"""Where a decode step's time goes, for benchmarks/baseline_quant.py: the step with its linears stubbed out
(engine_floor_s), the real step cut into its linears and the rest (step_split), and the packed weights in huge
pages against 4 KiB pages (huge_pages_ab)."""
from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

import torch
from quant_decode import _decode, _decode_linears, _load
from torch import nn

from triage.reference_engine import LLMEngine
from triage.reference_engine.layers.kernels import quant_weights as qw
from triage.reference_engine.layers.quant import quantize_model


class _ZeroLinear(nn.Module):
    """A linear that reads nothing: what a decode step costs without its matmuls (the engine's own floor)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.in_features, self.out_features = layer.in_features, layer.out_features
        self.register_buffer("weight", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(*x.shape[:-1], self.out_features)


def engine_floor_s(engine: LLMEngine, base: nn.Module, batch: int, steps: int, vocab: int, repeats: int = 9) -> float:
    """Seconds a decode step takes with every linear replaced by _ZeroLinear: attention, norms, sampling,
    scheduling, Python. No kernel can make a step faster than this. The best of ``repeats`` runs of ``steps``
    steps (9: a 2-3 ms figure on a shared VM; with 3 it moved by 10% between runs of the same code)."""
    stub = copy.deepcopy(base)
    targets = {id(m) for m in _decode_linears(stub)}
    for mod in list(stub.modules()):
        for child_name, child in list(mod.named_children()):
            if id(child) in targets:
                setattr(mod, child_name, _ZeroLinear(child))
    engine.runner.model = stub
    best = max(_decode(engine, batch, steps, vocab) for _ in range(repeats))
    engine.runner.model = base
    return batch / best


def _huge_kib(t: torch.Tensor) -> int | None:
    """KiB of ``t``'s mapping that the OS backs with transparent huge pages (/proc/self/smaps), if readable."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return None
    addr, inside = t.data_ptr(), False
    for line in smaps.read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= addr < hi
        elif inside and head == "AnonHugePages:":
            return int(line.split()[1])
    return None


def huge_pages_ab(engine: LLMEngine, base: nn.Module, steps: int, vocab: int, rounds: int) -> dict:
    """Decode tok/s at bs=1 for each scheme with its packed weights in huge pages (as quantize_model packs them)
    and in 4 KiB pages (ARENA_HUGE_PAGES off), alternating within each round; the median of the per-round
    ratios, and the KiB the OS actually backed with huge pages."""
    models = {}
    for scheme in ("fp8", "int4"):
        for huge in (True, False):
            qw.ARENA_HUGE_PAGES = huge
            try:
                models[scheme, huge] = copy.deepcopy(base)
                quantize_model(models[scheme, huge], scheme, group_size=128)
            finally:
                qw.ARENA_HUGE_PAGES = True
    best: dict[tuple[str, bool], float] = {}
    ratios: dict[str, list[float]] = {"fp8": [], "int4": []}
    for _ in range(rounds):
        tok = {}
        for key, m in models.items():
            engine.runner.model = m
            tok[key] = _decode(engine, 1, steps, vocab)
            best[key] = max(best.get(key, 0.0), tok[key])
        for scheme in ratios:
            ratios[scheme].append(tok[scheme, True] / tok[scheme, False])
    engine.runner.model = base
    out = {}
    for scheme, rs in ratios.items():
        arena = next(b for n, b in models[scheme, True].named_buffers() if n.endswith(("weight_u8", "weight_packed")))
        out[scheme] = {"huge_pages_tok_s_best": best[scheme, True], "small_pages_tok_s_best": best[scheme, False],
                       "ratio_median": statistics.median(rs), "ratios_per_round": [round(r, 3) for r in rs],
                       "storage_bytes": arena.untyped_storage().nbytes(), "huge_pages_kib": _huge_kib(arena),
                       "load_avg": _load()}
        print(f"bs=1 {scheme}: weights in huge pages vs 4 KiB pages: x{out[scheme]['ratio_median']:.3f} "
              f"{out[scheme]['ratios_per_round']} ({out[scheme]['huge_pages_kib']} KiB in huge pages)", flush=True)
    return out


def step_split(engine: LLMEngine, model: nn.Module, batch: int, steps: int, vocab: int, repeats: int = 3) -> dict:
    """The real decode step cut in two: the time spent inside the linears (each one's call timed where the step
    makes it, decode calls only) and the rest. The rest is larger than `engine_floor`: the same attention, norm
    and Python work runs after every linear has streamed its weights through the caches, and finds its own code
    and data evicted. Best of ``repeats`` runs; the timers add two perf_counter calls to each linear."""
    acc = {"s": 0.0, "calls": 0}
    linears = _decode_linears(model)

    def timed(forward):
        def call(x: torch.Tensor) -> torch.Tensor:
            t = time.perf_counter()
            y = forward(x)
            if x.shape[0] == batch:
                acc["s"] += time.perf_counter() - t
                acc["calls"] += 1
            return y
        return call

    for layer in linears:
        layer.forward = timed(layer.forward)
    engine.runner.model = model
    best = None
    try:
        for _ in range(repeats):
            acc["s"], acc["calls"] = 0.0, 0
            tok_s = _decode(engine, batch, steps, vocab)
            step_s = batch / tok_s
            linears_s = acc["s"] / max(1, acc["calls"]) * len(linears)    # per step (decode calls only)
            if best is None or step_s < best["step_s"]:
                best = {"step_s": step_s, "linears_s": linears_s, "rest_s": step_s - linears_s,
                        "linear_calls_per_step": len(linears), "load_avg": _load()}
    finally:
        for layer in linears:
            del layer.forward       # the instance attribute: the class's forward again
    return best
