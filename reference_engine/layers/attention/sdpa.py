"""PyTorch's ``scaled_dot_product_attention`` (on CPU its fused flash kernel) over the paged cache.

SDPA's ``is_causal`` aligns the mask upper-left, which is wrong when q_len < kv_len (chunked
prefill), so those chunks get an explicit lower-right boolean mask; full prefills use ``is_causal``
and decodes need no mask. All-decode batches run as a few padded calls with a length mask, sequences
grouped by context length so that little of the gathered cache is padding. On a CPU, all-decode batches go to
one C++ call a layer instead (kernels/decode_attention.py), where it is built and the dtypes fit (fp32 or bf16).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from triage.reference_engine.layers.attention.base import (
    AttentionMetadata,
    gather_kv,
    lower_right_causal_mask,
)
from triage.reference_engine.layers.kernels.decode_attention import decode_attention

DECODE_BUCKET_FILL = 0.75


class SdpaAttention:
    name = "sdpa"

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 meta: AttentionMetadata, scale: float) -> torch.Tensor:
        out = self.fused_decode(q, k_cache, v_cache, meta, scale)
        if out is not None:
            return out
        if meta.num_seqs == 1 and meta.q_lens[0] == 1:
            return single_decode(q, k_cache, v_cache, meta, scale)
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

    @staticmethod
    def fused_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                     scale: float, new_kv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
                     ) -> torch.Tensor | None:
        """An all-decode batch in one C++ call, which first writes ``new_kv`` (k, v, slots) into the cache when
        given; None, with nothing written, where the kernel does not apply."""
        if q.shape[0] == meta.num_seqs and meta.is_all_decode:
            return decode_attention(q, k_cache, v_cache, meta, scale, new_kv)
        return None

    def _batched_decode(self, q, k_cache, v_cache, meta, scale):
        """Decodes grouped by context length, so that padding each group to its longest context wastes
        at most ``1 - DECODE_BUCKET_FILL`` of the gathered keys; one SDPA call per group."""
        if meta.decode_groups_cache is None:
            meta.decode_groups_cache = _decode_groups(meta, q.device)
        out = torch.empty_like(q)
        for group in meta.decode_groups_cache:
            out[group.rows] = self._decode_group(q[group.rows], k_cache, v_cache, group, meta.block_size, scale)
        return out

    @staticmethod
    def _decode_group(q, k_cache, v_cache, group: _DecodeGroup, block_size, scale):
        max_kv = group.max_kv
        num_blocks = group.tables.shape[1]
        b, hkv, d = q.shape[0], k_cache.shape[-2], k_cache.shape[-1]
        # index_select over the flattened block ids: ~3x faster on a CPU than advanced indexing (aten::index)
        ids = group.tables.reshape(-1)
        k = k_cache.index_select(0, ids).view(b, num_blocks * block_size, hkv, d)[:, :max_kv]
        v = v_cache.index_select(0, ids).view(b, num_blocks * block_size, hkv, d)[:, :max_kv]
        o = F.scaled_dot_product_attention(q.unsqueeze(2), k.to(q.dtype).transpose(1, 2),
                                           v.to(q.dtype).transpose(1, 2), attn_mask=group.mask, scale=scale,
                                           enable_gqa=True)
        return o.squeeze(2)


def single_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                  scale: float) -> torch.Tensor:
    """One sequence, one query token (bs=1 decode): softmax(q K^T * scale) V as two batched matmuls over the
    KV heads, each query head group against its own K/V head (GQA without repeat). No mask is needed and SDPA's
    flash kernel, its layout changes and the copy into an output buffer cost more than the math at this size."""
    kv_len, table = meta.kv_lens[0], meta.block_tables[0]
    hkv, d = k_cache.shape[-2], k_cache.shape[-1]
    k = gather_kv(k_cache, table, meta.block_size, 0, kv_len).to(q.dtype)       # [kv, Hkv, d]
    v = gather_kv(v_cache, table, meta.block_size, 0, kv_len).to(q.dtype)
    qg = q.reshape(hkv, q.shape[1] // hkv, d)                                     # [Hkv, g, d]
    scores = torch.bmm(qg, k.permute(1, 2, 0)).mul_(scale)                      # [Hkv, g, kv]
    return torch.bmm(scores.softmax(-1), v.transpose(0, 1)).view(q.shape)       # [Hkv, g, d] -> [1, Hq, d]


@dataclass(frozen=True, slots=True)
class _DecodeGroup:
    rows: torch.Tensor      # the group's rows in the batch
    tables: torch.Tensor    # [b, num_blocks] block tables, cut to the blocks of the longest context
    max_kv: int
    mask: torch.Tensor      # [b, 1, 1, max_kv], True where a key lies inside the row's context


def _decode_groups(meta: AttentionMetadata, device: torch.device) -> list[_DecodeGroup]:
    """Sequences by context length, longest first, cut into groups whose shortest context is at least
    ``DECODE_BUCKET_FILL`` of their longest. The same for every layer of a step."""
    order = sorted(range(meta.num_seqs), key=lambda i: meta.kv_lens[i], reverse=True)
    tables = meta.table_tensor(device)
    groups: list[_DecodeGroup] = []
    start = 0
    while start < len(order):
        longest = meta.kv_lens[order[start]]
        end = start + 1
        while end < len(order) and meta.kv_lens[order[end]] >= DECODE_BUCKET_FILL * longest:
            end += 1
        rows = order[start:end]
        idx = torch.tensor(rows, device=device)
        num_blocks = -(-longest // meta.block_size)
        lens = torch.tensor([meta.kv_lens[i] for i in rows], device=device)
        mask = (torch.arange(longest, device=device).unsqueeze(0) < lens.unsqueeze(1))[:, None, None, :]
        groups.append(_DecodeGroup(rows=idx, tables=tables[idx][:, :num_blocks], max_kv=longest, mask=mask))
        start = end
    return groups
