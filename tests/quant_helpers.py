"""Test-side helpers for the AWQ/GPTQ import (reference_engine/layers/quant/awq_gptq.py): the packers
that write checkpoints in those formats (the product only reads them), and an engine over such a
checkpoint."""
from __future__ import annotations

import torch

from triage.reference_engine.engine.engine_config import EngineConfig
from triage.reference_engine.engine.llm_engine import LLMEngine
from triage.reference_engine.layers.quant.awq_gptq import AWQ_PACK_ORDER, load_quantized_checkpoint
from triage.reference_engine.layers.quant.handlers import QuantSummary, apply_imported_checkpoint

_SHIFTS64 = torch.arange(0, 32, 4, dtype=torch.int64)  # nibble i lives at bits 4i..4i+3


def _pack_int32(values: torch.Tensor, dim: int) -> torch.Tensor:
    """Inverse of awq_gptq._unpack_int32 for values in 0..15."""
    v = values.to(torch.int64) & 0xF
    if dim == 0:
        v = v.reshape(v.shape[0] // 8, 8, v.shape[1]).permute(0, 2, 1)  # [R, C, 8]
    else:
        v = v.reshape(v.shape[0], v.shape[1] // 8, 8)
    words = (v << _SHIFTS64).sum(dim=-1)
    # Reinterpret the unsigned 32-bit words as signed int32, as the checkpoints store them.
    words = torch.where(words >= 2**31, words - 2**32, words)
    return words.to(torch.int32)


def _awq_order(cols: torch.Tensor) -> torch.Tensor:
    rows, n = cols.shape
    return cols.reshape(rows, n // 8, 8)[..., list(AWQ_PACK_ORDER)].reshape(rows, n)


def pack_gptq(q_kn: torch.Tensor, zeros_gn: torch.Tensor, v2: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """q [K, N] and integer zeros [G, N] (0..15) -> (qweight [K/8, N], qzeros [G, N/8])."""
    stored = zeros_gn if v2 else (zeros_gn - 1)
    return _pack_int32(q_kn, dim=0), _pack_int32(stored, dim=1)


def pack_awq(q_kn: torch.Tensor, zeros_gn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q [K, N] and integer zeros [G, N] -> (qweight [K, N/8], qzeros [G, N/8]) in AWQ's order."""
    return _pack_int32(_awq_order(q_kn), dim=1), _pack_int32(_awq_order(zeros_gn), dim=1)


def load_quantized_engine(path: str, **engine_config) -> tuple[LLMEngine, QuantSummary]:
    """An LLMEngine serving a local GPTQ/AWQ checkpoint: the engine is built from the directory's
    config.json with placeholder weights, then every packed layer is swapped for an Int4Linear and
    the dense tensors (embeddings, norms, an unquantized head) are loaded. Returns (engine, summary)."""
    ckpt = load_quantized_checkpoint(path)
    engine = LLMEngine(EngineConfig(model=str(path), load_format="dummy", **engine_config))
    summary = apply_imported_checkpoint(engine.runner.model, ckpt)
    return engine, summary
