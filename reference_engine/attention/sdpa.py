"""PyTorch's ``scaled_dot_product_attention`` (on CPU its fused flash kernel) over the paged cache.

SDPA's ``is_causal`` aligns the mask upper-left, which is wrong when q_len < kv_len (chunked
prefill), so those chunks get an explicit lower-right boolean mask; full prefills use ``is_causal``
and decodes need no mask. All-decode batches run as a few padded calls with a length mask, sequences
grouped by context length so that little of the gathered cache is padding.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from reference_engine.attention.base import AttentionMetadata, gather_kv, lower_right_causal_mask

DECODE_BUCKET_FILL = 0.75


class SdpaAttention:
    name = "sdpa"

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 meta: AttentionMetadata, scale: float) -> torch.Tensor:
        if meta.num_seqs > 1 and meta.is_all_decode:
            return self._batched_decode(q, k_cache, v_cache, meta, scale)
        out = torch.empty_like(q)
        for s, n, kv_len, table in meta.sequences():
            k = gather_kv(k_cache, table, meta.block_size, 0, kv_len).to(q.dtype).transpose(0, 1)
            v = gather_kv(v_cache, table, meta.block_size, 0, kv_len).to(q.dtype).transpose(0, 1)
            qh = q[s:s + n].transpose(0, 1)
            if n == kv_len:
                o = F.scaled_dot_product_attention(qh.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0),
                                                   is_causal=n > 1, scale=scale, enable_gqa=True)
            else:
                mask = None if n == 1 else lower_right_causal_mask(n, kv_len, q.device, q_offset=kv_len - n)
                o = F.scaled_dot_product_attention(qh.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0),
                                                   attn_mask=mask, scale=scale, enable_gqa=True)
            out[s:s + n] = o[0].transpose(0, 1)
        return out

    def _batched_decode(self, q, k_cache, v_cache, meta, scale):
        """Decodes grouped by context length, so that padding each group to its longest context wastes
        at most ``1 - DECODE_BUCKET_FILL`` of the gathered keys; one SDPA call per group."""
        order = sorted(range(meta.num_seqs), key=lambda i: meta.kv_lens[i], reverse=True)
        out = torch.empty_like(q)
        tables = meta.table_tensor(q.device)
        start = 0
        while start < len(order):
            longest = meta.kv_lens[order[start]]
            end = start + 1
            while end < len(order) and meta.kv_lens[order[end]] >= DECODE_BUCKET_FILL * longest:
                end += 1
            rows = order[start:end]
            idx = torch.tensor(rows, device=q.device)
            out[idx] = self._decode_group(q[idx], k_cache, v_cache, tables[idx], [meta.kv_lens[i] for i in rows],
                                          meta.block_size, scale)
            start = end
        return out

    @staticmethod
    def _decode_group(q, k_cache, v_cache, tables, kv_lens, block_size, scale):
        max_kv = max(kv_lens)
        num_blocks = -(-max_kv // block_size)
        b, hkv, d = q.shape[0], k_cache.shape[-2], k_cache.shape[-1]
        if num_blocks == 1:
            k = k_cache[tables[:, 0], :max_kv]
            v = v_cache[tables[:, 0], :max_kv]
        else:
            tables = tables[:, :num_blocks]
            k = k_cache[tables].reshape(b, num_blocks * block_size, hkv, d)[:, :max_kv]
            v = v_cache[tables].reshape(b, num_blocks * block_size, hkv, d)[:, :max_kv]
        lens = torch.tensor(kv_lens, device=q.device)
        mask = (torch.arange(max_kv, device=q.device).unsqueeze(0) < lens.unsqueeze(1))[:, None, None, :]
        o = F.scaled_dot_product_attention(q.unsqueeze(2), k.to(q.dtype).transpose(1, 2),
                                           v.to(q.dtype).transpose(1, 2), attn_mask=mask, scale=scale,
                                           enable_gqa=True)
        return o.squeeze(2)
