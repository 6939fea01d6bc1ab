"""The Triton paged-attention kernel as a reference-engine attention backend (GPU hosts).

``register_triton_backend()`` adds it as ``attention="triton"`` and puts it first for ``auto`` on
CUDA; it does nothing (and says why) where Triton cannot run. Shapes the kernel does not take
(a block size that is not a power of two ≥ 16, e.g. the contiguous layout's one-slot blocks) fall
back to the SDPA backend.
"""
from __future__ import annotations

import itertools

import torch

from triage.reference_engine.layers.attention.base import AttentionMetadata
from triage.reference_engine.layers.attention.sdpa import SdpaAttention
from triage.reference_engine.layers.attention.triton_support import triton_unavailable_reason


def _kernel_fits(block_size: int) -> bool:
    return block_size >= 16 and block_size & (block_size - 1) == 0


class TritonPagedAttention:
    name = "triton"

    def __init__(self) -> None:
        self._fallback = SdpaAttention()

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 meta: AttentionMetadata, scale: float) -> torch.Tensor:
        starts = list(itertools.accumulate(meta.q_lens, initial=0))
        if not _kernel_fits(meta.block_size) or starts[:-1] != list(meta.q_starts):
            return self._fallback(q, k_cache, v_cache, meta, scale)
        from triage.reference_engine.layers.attention.triton_paged import paged_attention

        dev = q.device
        cu = torch.tensor(starts, dtype=torch.int32, device=dev)
        seq_lens = torch.tensor(meta.kv_lens, dtype=torch.int32, device=dev)
        table = meta.table_tensor(dev).to(torch.int32)
        return paged_attention(q, k_cache, v_cache, table, cu, seq_lens, max(meta.q_lens), sm_scale=scale)


def register_triton_backend(device: str = "cuda") -> str | None:
    """Register ``attention="triton"``; returns None on success, else the reason it was not registered."""
    reason = triton_unavailable_reason(device)
    if reason is not None:
        return reason
    from triage.reference_engine.layers.attention import register_backend

    register_backend("triton", TritonPagedAttention, prefer_on="cuda" if device.startswith("cuda") else None)
    return None
