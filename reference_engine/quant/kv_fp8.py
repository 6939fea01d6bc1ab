"""FP8 (e4m3) KV-cache storage helpers: one fp32 scale per (token, kv head).

A per-(token, head) scale needs no calibration and no rescaling of old entries when a new token
arrives: each slot is quantized once, when it is written, against its own absolute maximum.
Storage per token and layer: 2 · H_kv · (d + 4) bytes, against 2 · H_kv · d · 2 for bf16.
"""
from __future__ import annotations

import torch

from reference_engine.quant.fp8 import FP8_DTYPE, FP8_MAX

_MIN_SCALE = 1e-12


def quantize_kv(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., H, D] float -> (e4m3 [..., H, D], fp32 scale [..., H])."""
    xf = x.float()
    scale = (xf.abs().amax(dim=-1) / FP8_MAX).clamp(min=_MIN_SCALE)
    q = (xf / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q, scale


def dequantize_kv(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Inverse of quantize_kv: e4m3 [..., H, D] and scale [..., H] -> ``dtype``."""
    return (q.to(torch.float32) * scale.unsqueeze(-1)).to(dtype)


def kv_bytes_per_token_fp8(num_layers: int, num_kv_heads: int, head_dim: int) -> int:
    """K and V, every layer: e4m3 values plus one fp32 scale per head."""
    return 2 * num_layers * num_kv_heads * (head_dim + 4)
