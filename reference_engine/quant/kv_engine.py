"""Plug an FP8 (e4m3) KV cache into a built LLMEngine, without changing the engine's code.

The engine keeps one cache tensor ``[L, 2, num_blocks, block_size, H_kv, d]`` and its model writes
new K/V into it, then calls the attention backend. ``enable_fp8_kv_cache(engine)``:

1. replaces that tensor with a uint8 one of shape ``[L, 2, num_blocks, block_size, H_kv, d + 4]``:
   the first ``d`` bytes of each (slot, head) row are e4m3 values, the last 4 bytes their fp32
   scale (quant/kv_fp8.py). Block copies (prefix-cache copy-on-write) move values and scales
   together, and ``runner.kv_cache_bytes`` reports the real footprint;
2. swaps every attention module for ``Fp8KvAttention`` (a handler, like the weight handlers): it
   quantizes K/V on write, and before calling the unchanged backend it dequantizes only the blocks
   the batch's block tables reference into a small compact cache, with the tables renumbered.
"""
from __future__ import annotations

import torch
from torch import nn

from reference_engine.attention.base import AttentionMetadata
from reference_engine.model import LlamaAttention, apply_rope
from reference_engine.quant.fp8 import FP8_DTYPE
from reference_engine.quant.kv_fp8 import quantize_kv
from triage.errors import EngineError

SCALE_BYTES = 4


def pack_kv(x: torch.Tensor) -> torch.Tensor:
    """[T, H, d] float -> [T, H, d + 4] uint8 (e4m3 bytes, then the fp32 scale's bytes)."""
    q, scale = quantize_kv(x)
    scale_bytes = scale.contiguous().unsqueeze(-1).view(torch.uint8)       # [T, H, 4]
    return torch.cat([q.view(torch.uint8), scale_bytes], dim=-1)


def unpack_kv(packed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[..., H, d + 4] uint8 -> [..., H, d] in ``dtype``."""
    d = packed.shape[-1] - SCALE_BYTES
    values = packed[..., :d].contiguous().view(FP8_DTYPE).to(torch.float32)
    scale = packed[..., d:].contiguous().view(torch.float32)                # [..., H, 1]
    return (values * scale).to(dtype)


def dequantize_live_blocks(k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                           dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
    """Dequantize the blocks ``meta`` references into a compact cache; return it with renumbered tables."""
    live = sorted({b for table in meta.block_tables for b in table})
    index = {b: i for i, b in enumerate(live)}
    ids = torch.tensor(live, dtype=torch.long, device=k_cache.device)
    k = unpack_kv(k_cache.index_select(0, ids), dtype)
    v = unpack_kv(v_cache.index_select(0, ids), dtype)
    tables = [[index[b] for b in table] for table in meta.block_tables]
    return k, v, AttentionMetadata(q_starts=meta.q_starts, q_lens=meta.q_lens, kv_lens=meta.kv_lens,
                                   block_tables=tables, block_size=meta.block_size)


class Fp8KvAttention(nn.Module):
    """Wraps a LlamaAttention: same projections, e4m3 cache writes, dequantize-then-attend reads."""

    def __init__(self, inner: LlamaAttention) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x, cos, sin, kv_cache, meta, slot_mapping, backend) -> torch.Tensor:
        a = self.inner
        if kv_cache is None:  # the no-cache reference path has nothing to quantize
            return a(x, cos, sin, kv_cache, meta, slot_mapping, backend)
        t = x.shape[0]
        q = a.q_proj(x).view(t, a.num_heads, a.head_dim)
        k = a.k_proj(x).view(t, a.num_kv_heads, a.head_dim)
        v = a.v_proj(x).view(t, a.num_kv_heads, a.head_dim)
        if a.q_norm is not None:
            q, k = a.q_norm(q), a.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k_cache, v_cache = kv_cache
        row = a.head_dim + SCALE_BYTES
        k_cache.view(-1, a.num_kv_heads, row).index_copy_(0, slot_mapping, pack_kv(k))
        v_cache.view(-1, a.num_kv_heads, row).index_copy_(0, slot_mapping, pack_kv(v))
        k_live, v_live, live_meta = dequantize_live_blocks(k_cache, v_cache, meta, q.dtype)
        o = backend(q, k_live, v_live, live_meta, a.scale)
        return a.o_proj(o.reshape(t, a.num_heads * a.head_dim))


def enable_fp8_kv_cache(engine) -> int:
    """Switch a freshly built engine (no requests yet) to an e4m3 KV cache. Returns the new cache bytes."""
    runner = engine.runner
    if engine.has_unfinished():
        raise EngineError("enable the FP8 KV cache before adding requests: the cache is re-allocated")
    cache = runner.kv_cache
    if cache.dtype == torch.uint8:
        raise EngineError("this engine already has an FP8 KV cache")
    layers, two, num_blocks, block_size, num_kv_heads, head_dim = cache.shape
    runner.kv_cache = torch.zeros(layers, two, num_blocks, block_size, num_kv_heads, head_dim + SCALE_BYTES,
                                  dtype=torch.uint8, device=cache.device)
    del cache
    for layer in runner.model.model.layers:
        if not isinstance(layer.self_attn, Fp8KvAttention):
            layer.self_attn = Fp8KvAttention(layer.self_attn)
    if hasattr(engine, "kv_cache_dtype"):
        engine.kv_cache_dtype = "fp8_e4m3"
    return runner.kv_cache_bytes
