"""The "before": materialize the whole score matrix softmax(Q K^T) V for each sequence.

Extra memory is O(q_len * kv_len) per head, which is what FlashAttention removes.
"""
from __future__ import annotations

import torch

from triage.reference_engine.layers.attention.base import (
    AttentionMetadata,
    gather_kv,
    lower_right_causal_mask,
    merge_gqa,
    split_gqa,
)


class NaiveAttention:
    name = "naive"

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 meta: AttentionMetadata, scale: float) -> torch.Tensor:
        out = torch.empty_like(q)
        hkv = k_cache.shape[-2]
        for s, n, kv_len, table in meta.sequences():
            k = gather_kv(k_cache, table, meta.block_size, 0, kv_len).to(q.dtype)
            v = gather_kv(v_cache, table, meta.block_size, 0, kv_len).to(q.dtype)
            qh = split_gqa(q[s:s + n], hkv)                        # [Hkv, g, n, d]
            kh = k.permute(1, 2, 0).unsqueeze(1)                   # [Hkv, 1, d, kv]
            vh = v.permute(1, 0, 2).unsqueeze(1)                   # [Hkv, 1, kv, d]
            scores = torch.matmul(qh.float(), kh.float()) * scale  # [Hkv, g, n, kv]
            if n > 1:
                allowed = lower_right_causal_mask(n, kv_len, q.device, q_offset=kv_len - n)
                scores = scores.masked_fill(~allowed, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            out[s:s + n] = merge_gqa(torch.matmul(probs, vh.float())).to(q.dtype)
        return out
