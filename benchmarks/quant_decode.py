"""Shared by the quantization benchmarks (baseline_quant.py, quant_step_parts.py, quant_kernel_limits.py):
steady-state decode of the reference engine through the baseline's driver, the linears a decode step streams,
the kernels' ISA choice narrowed for a while, and the load average every figure carries."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from torch import nn

from triage.baseline.engine_driver import steady_decode_tok_s
from triage.reference_engine import LLMEngine
from triage.reference_engine.layers.kernels import quant_weights as qw

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
    return steady_decode_tok_s(engine, batch, steps, vocab, PROMPT_TOKENS, WARM_STEPS)


def _fp32_bodies_allowed() -> str:
    """The fp32-activation bodies TRIAGE_QUANT_ISA allows (all of them when it is unset)."""
    fp32 = [n for i, n in enumerate(qw.ISA_NAMES) if i not in qw.INT8_ACTIVATION_ISAS]
    env = [n.strip() for n in os.environ.get("TRIAGE_QUANT_ISA", "").split(",") if n.strip()]
    return ",".join([n for n in env if n in fp32] or fp32)


@contextlib.contextmanager
def isa_choice(allowed: str | None) -> Iterator[None]:
    """TRIAGE_QUANT_ISA set to ``allowed`` (None: left as it is; "fp32": its fp32-activation bodies) for the
    block, with choose_isa's cache cleared on the way in and out so that the choice is made again."""
    allowed = _fp32_bodies_allowed() if allowed == "fp32" else allowed
    old = os.environ.get("TRIAGE_QUANT_ISA")
    if allowed:
        os.environ["TRIAGE_QUANT_ISA"] = allowed
    qw.choose_isa.cache_clear()
    try:
        yield
    finally:
        os.environ.pop("TRIAGE_QUANT_ISA", None)
        if old is not None:
            os.environ["TRIAGE_QUANT_ISA"] = old
        qw.choose_isa.cache_clear()
