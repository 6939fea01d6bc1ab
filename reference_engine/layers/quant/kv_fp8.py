"""FP8 (e4m3) KV-cache storage helpers: one fp32 scale per (token, kv head).

A per-(token, head) scale needs no calibration and no rescaling of old entries when a new token
arrives: each slot is quantized once, when it is written, against its own absolute maximum.
Storage per token and layer: 2 · H_kv · (d + 4) bytes, against 2 · H_kv · d · 2 for bf16.

In the paged cache a (slot, head) row is ``d + 4`` uint8: the e4m3 bytes, then the scale's 4 bytes
(``pack_kv``/``unpack_kv``), so block copies (copy-on-write) move values and scales together.
"""
from __future__ import annotations

import torch

from triage.reference_engine.layers.quant.fp8 import FP8_DTYPE, FP8_MAX

_MIN_SCALE = 1e-12
SCALE_BYTES = 4


def quantize_kv(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., H, D] float -> (e4m3 [..., H, D], fp32 scale [..., H])."""
    xf = x.float()
    scale = (xf.abs().amax(dim=-1) / FP8_MAX).clamp(min=_MIN_SCALE)
    q = (xf / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q, scale


def dequantize_kv(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Inverse of quantize_kv: e4m3 [..., H, D] and scale [..., H] -> ``dtype``."""
    return (q.to(torch.float32) * scale.unsqueeze(-1)).to(dtype)


def pack_kv(x: torch.Tensor) -> torch.Tensor:
    """[T, H, d] float -> [T, H, d + 4] uint8 (e4m3 bytes, then the fp32 scale's bytes)."""
    q, scale = quantize_kv(x)
    scale_bytes = scale.contiguous().unsqueeze(-1).view(torch.uint8)       # [T, H, 4]
    return torch.cat([q.view(torch.uint8), scale_bytes], dim=-1)


def unpack_kv(packed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[..., H, d + 4] uint8 -> [..., H, d] in ``dtype``."""
    d = packed.shape[-1] - SCALE_BYTES
    values = packed[..., :d].contiguous().view(FP8_DTYPE)
    scale = packed[..., d:].contiguous().view(torch.float32)                # [..., H, 1]
    return dequantize_kv(values, scale.squeeze(-1), dtype)


def kv_bytes_per_token_fp8(num_layers: int, num_kv_heads: int, head_dim: int) -> int:
    """K and V, every layer: e4m3 values plus one fp32 scale per head."""
    return 2 * num_layers * num_kv_heads * (head_dim + SCALE_BYTES)
