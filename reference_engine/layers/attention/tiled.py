"""FlashAttention's algorithm in PyTorch: stream K/V tiles through the block table with an online
softmax, so extra memory is O(q_tile * kv_tile) per head instead of O(q_len * kv_len).

For each query tile, KV tiles strictly above the causal diagonal are skipped, tiles strictly below it
need no mask, and only the diagonal tiles are masked. Running max ``m`` and running denominator ``denom``
rescale the accumulator whenever a new tile raises the max.
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

Q_TILE_TOKENS = 256
KV_TILE_TOKENS = 512


class TiledAttention:
    name = "tiled"

    def __init__(self, q_tile_tokens: int = Q_TILE_TOKENS, kv_tile_tokens: int = KV_TILE_TOKENS):
        self.q_tile_tokens = q_tile_tokens
        self.kv_tile_tokens = kv_tile_tokens

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 meta: AttentionMetadata, scale: float) -> torch.Tensor:
        out = torch.empty_like(q)
        hkv = k_cache.shape[-2]
        for s, n, kv_len, table in meta.sequences():
            first_pos = kv_len - n                                  # context position of query row 0
            for qs in range(0, n, self.q_tile_tokens):
                qe = min(n, qs + self.q_tile_tokens)
                qh = split_gqa(q[s + qs:s + qe], hkv).float() * scale   # [Hkv, g, tq, d]
                q_pos_lo, q_pos_hi = first_pos + qs, first_pos + qe - 1
                m = torch.full(qh.shape[:-1], float("-inf"), device=q.device)
                denom = torch.zeros(qh.shape[:-1], device=q.device)
                acc = torch.zeros_like(qh)
                kv_end = q_pos_hi + 1                               # causal skip of tiles above the diagonal
                for ks in range(0, kv_end, self.kv_tile_tokens):
                    ke = min(kv_end, ks + self.kv_tile_tokens)
                    k = gather_kv(k_cache, table, meta.block_size, ks, ke).float()
                    v = gather_kv(v_cache, table, meta.block_size, ks, ke).float()
                    scores = torch.matmul(qh, k.permute(1, 2, 0).unsqueeze(1))      # [Hkv, g, tq, tk]
                    if ke - 1 > q_pos_lo:                            # tile crosses the diagonal
                        allowed = lower_right_causal_mask(qe - qs, kv_len, q.device, q_offset=q_pos_lo,
                                                          k_offset=ks, k_len=ke - ks)
                        scores = scores.masked_fill(~allowed, float("-inf"))
                    m_new = torch.maximum(m, scores.amax(dim=-1))
                    p = torch.exp(scores - m_new.unsqueeze(-1))
                    correction = torch.exp(m - m_new)
                    denom = denom * correction + p.sum(dim=-1)
                    acc = acc * correction.unsqueeze(-1) + torch.matmul(p, v.permute(1, 0, 2).unsqueeze(1))
                    m = m_new
                out[s + qs:s + qe] = merge_gqa(acc / denom.unsqueeze(-1)).to(q.dtype)
        return out
