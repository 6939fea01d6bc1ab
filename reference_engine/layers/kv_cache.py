"""How the paged KV cache stores K and V: the one hook between the model and its cache.

The model computes new K/V and hands them to its ``KvFormat`` (``write_and_attend``), which stores them and
gives the attention backend something to read. Backends themselves only ever see float caches of
shape ``[num_blocks, block_size, H_kv, d]``.

- ``PlainKvFormat``: K/V stored as they are, in a float dtype (``kv_cache_dtype=auto|float32|...``).
- ``Fp8KvFormat`` (``kv_cache_dtype=fp8`` / ``fp8_e4m3``): a uint8 cache whose (slot, head) rows
  hold ``d`` e4m3 bytes and their fp32 scale (quant/kv_fp8.py). ``write`` quantizes per (token, head);
  then it dequantizes only the blocks the batch's block tables reference into a compact float
  cache, renumbers the tables, and calls the unchanged backend. 1 byte + 4/d per value instead of 2
  or 4, at the cost of one dequantize of the live blocks per layer and step.
"""
from __future__ import annotations

import torch

from triage.reference_engine.layers.attention.base import AttentionBackend, AttentionMetadata

FP8_KV_CACHE_DTYPES = ("fp8", "fp8_e4m3")


class PlainKvFormat:
    """K/V stored unquantized in ``dtype`` (None: whatever dtype the cache tensor has)."""

    def __init__(self, dtype: torch.dtype | None = None) -> None:
        self.dtype = dtype

    @property
    def name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def bytes_per_token(self, num_layers: int, num_kv_heads: int, head_dim: int) -> int:
        return 2 * num_layers * num_kv_heads * head_dim * torch.empty(0, dtype=self.dtype).element_size()

    def allocate(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 device: torch.device) -> torch.Tensor:
        return torch.zeros(num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim, dtype=self.dtype,
                           device=device)

    def write(self, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
              k: torch.Tensor, v: torch.Tensor) -> None:
        for cache, new in ((k_cache, k), (v_cache, v)):
            flat = cache.view(-1, cache.shape[-2], cache.shape[-1])
            flat.index_copy_(0, slot_mapping, new.to(flat.dtype))

    def write_and_attend(self, backend: AttentionBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                         meta: AttentionMetadata, scale: float) -> torch.Tensor:
        # A backend with a fused decode (SDPA's CPU kernel) writes and attends in one call where it applies.
        fused = getattr(backend, "fused_decode", None)
        out = fused(q, k_cache, v_cache, meta, scale, (k, v, slot_mapping)) if fused is not None else None
        if out is not None:
            return out
        self.write(k_cache, v_cache, slot_mapping, k, v)
        return backend(q, k_cache, v_cache, meta, scale)


class Fp8KvFormat:
    """e4m3 values with one fp32 scale per (token, kv head), packed in a uint8 cache."""

    name = "fp8_e4m3"

    def __init__(self) -> None:
        # Imported here, not at the top: the model imports this module, and quantization code stays
        # out of the model's imports unless an fp8 cache is actually asked for.
        from triage.reference_engine.layers.quant import kv_fp8

        self._codec = kv_fp8

    def bytes_per_token(self, num_layers: int, num_kv_heads: int, head_dim: int) -> int:
        return self._codec.kv_bytes_per_token_fp8(num_layers, num_kv_heads, head_dim)

    def allocate(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 device: torch.device) -> torch.Tensor:
        return torch.zeros(num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim + self._codec.SCALE_BYTES,
                           dtype=torch.uint8, device=device)

    def write(self, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
              k: torch.Tensor, v: torch.Tensor) -> None:
        for cache, new in ((k_cache, k), (v_cache, v)):
            cache.view(-1, cache.shape[-2], cache.shape[-1]).index_copy_(0, slot_mapping, self._codec.pack_kv(new))

    def write_and_attend(self, backend: AttentionBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                         meta: AttentionMetadata, scale: float) -> torch.Tensor:
        self.write(k_cache, v_cache, slot_mapping, k, v)
        k_live, v_live, live_meta = self.dequantize_live_blocks(k_cache, v_cache, meta, q.dtype)
        return backend(q, k_live, v_live, live_meta, scale)

    def dequantize_live_blocks(self, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                               dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        """Dequantize the blocks ``meta`` references into a compact cache; return it with renumbered tables."""
        ids, live_meta = meta.live_blocks(k_cache.device)
        k = self._codec.unpack_kv(k_cache.index_select(0, ids), dtype)
        v = self._codec.unpack_kv(v_cache.index_select(0, ids), dtype)
        return k, v, live_meta


KvFormat = PlainKvFormat | Fp8KvFormat


def make_kv_format(kv_cache_dtype: str, dtype: torch.dtype) -> KvFormat:
    """``kv_cache_dtype`` as EngineConfig spells it; ``dtype``: the plain cache's storage dtype."""
    if kv_cache_dtype in FP8_KV_CACHE_DTYPES:
        return Fp8KvFormat()
    return PlainKvFormat(dtype)
