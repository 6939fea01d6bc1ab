"""Shared by benchmarks/baseline_quant.py and quant_step_parts.py: steady-state decode of the reference engine
through the baseline's driver, the linears a decode step streams, and the load average every figure carries."""
from __future__ import annotations

import os
import time

from torch import nn

from triage.baseline.engine_driver import Driver, greedy, synthetic_prompt
from triage.reference_engine import LLMEngine

PROMPT_TOKENS = 32
WARM_STEPS = 2


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _decode_linears(model: nn.Module) -> list[nn.Module]:
    """The layers a decode step streams, in call order: every linear-shaped module (not the embedding)."""
    return [m for m in model.modules() if hasattr(m, "in_features") and hasattr(m, "out_features")
            and not isinstance(m, nn.Embedding)]


def _decode(engine: LLMEngine, batch: int, steps: int, vocab: int) -> float:
    """Steady-state decode tok/s at ``batch`` sequences."""
    drv = Driver(engine)
    for i in range(batch):
        drv.add(f"r{i}", synthetic_prompt(PROMPT_TOKENS, vocab, seed=i), greedy(steps + WARM_STEPS + 1))
    while any(not t.token_times_s for t in drv.traces.values()):
        drv.step()
    for _ in range(WARM_STEPS):
        drv.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        drv.step()
    elapsed = time.perf_counter() - t0
    drv.run_until_done()
    return batch * steps / elapsed
