"""The one interface every attention backend implements, and the metadata the runner builds.

Layout: ``q`` is ``[num_tokens, num_heads, head_dim]`` for a flattened ragged batch; sequence ``i``
owns rows ``q_starts[i] : q_starts[i] + q_lens[i]``. Its keys/values for context positions
``0 .. kv_lens[i]-1`` live in the per-layer caches ``k_cache``/``v_cache`` of shape
``[num_blocks, block_size, num_kv_heads, head_dim]``, position ``p`` in block
``block_tables[i][p // block_size]`` at offset ``p % block_size``. The new tokens were already written
to the cache, so ``kv_lens[i] >= q_lens[i]`` and query row ``r`` is context position
``kv_lens[i] - q_lens[i] + r``: causal masking is aligned lower-right (chunked prefill, decode).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


@dataclass(slots=True)
class AttentionMetadata:
    q_starts: list[int]
    q_lens: list[int]
    kv_lens: list[int]
    block_tables: list[list[int]]
    block_size: int
    block_tables_tensor: torch.Tensor | None = None   # [B, max_blocks] int64, padded with 0
    # Built on first use by the first layer and reused by the others: they are the same for the whole step.
    live_blocks_cache: tuple[torch.Tensor, AttentionMetadata] | None = field(default=None, repr=False)
    decode_groups_cache: list[Any] | None = field(default=None, repr=False)   # SDPA's batched-decode groups

    @property
    def num_seqs(self) -> int:
        return len(self.q_lens)

    def sequences(self) -> Iterator[tuple[int, int, int, list[int]]]:
        """``(q_start, q_len, kv_len, block_table)`` of each sequence, in batch order."""
        return zip(self.q_starts, self.q_lens, self.kv_lens, self.block_tables, strict=True)

    @property
    def is_all_decode(self) -> bool:
        return all(n == 1 for n in self.q_lens)

    def table_tensor(self, device: torch.device) -> torch.Tensor:
        if self.block_tables_tensor is None:
            width = max(len(t) for t in self.block_tables)
            rows = [t + [0] * (width - len(t)) for t in self.block_tables]
            self.block_tables_tensor = torch.tensor(rows, dtype=torch.long, device=device)
        return self.block_tables_tensor

    def live_blocks(self, device: torch.device) -> tuple[torch.Tensor, AttentionMetadata]:
        """The distinct blocks the batch references (sorted, ``[num_live]`` int64) and this metadata with
        its tables renumbered into them: what a format that dequantizes only those blocks attends over."""
        if self.live_blocks_cache is None:
            live = sorted({b for table in self.block_tables for b in table})
            index = {b: i for i, b in enumerate(live)}
            tables = [[index[b] for b in table] for table in self.block_tables]
            self.live_blocks_cache = (torch.tensor(live, dtype=torch.long, device=device),
                                      AttentionMetadata(q_starts=self.q_starts, q_lens=self.q_lens,
                                                        kv_lens=self.kv_lens, block_tables=tables,
                                                        block_size=self.block_size))
        return self.live_blocks_cache


class AttentionBackend(Protocol):
    name: str

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 meta: AttentionMetadata, scale: float) -> torch.Tensor: ...


def gather_kv(cache: torch.Tensor, table: list[int], block_size: int, start: int, end: int) -> torch.Tensor:
    """Context positions ``[start, end)`` of one sequence as ``[end-start, H_kv, d]``. A range inside
    one block, or over blocks with consecutive ids (what a fresh pool hands out), is a view (no copy)."""
    b0, b1 = start // block_size, (end - 1) // block_size
    if b0 == b1:
        return cache[table[b0], start - b0 * block_size:end - b0 * block_size]
    first = table[b0]
    if table[b1] - first == b1 - b0 and table[b0:b1 + 1] == list(range(first, first + b1 - b0 + 1)):
        blocks = cache[first:first + b1 - b0 + 1]
    else:
        blocks = cache.index_select(0, torch.tensor(table[b0:b1 + 1], device=cache.device))
    flat = blocks.reshape(-1, cache.shape[-2], cache.shape[-1])
    return flat[start - b0 * block_size:end - b0 * block_size]


def lower_right_causal_mask(q_len: int, kv_len: int, device: torch.device, q_offset: int = 0,
                            k_offset: int = 0, k_len: int | None = None) -> torch.Tensor:
    """Boolean ``[q_len, k_len]`` mask, True where attending is allowed. Query row ``r`` (plus
    ``q_offset``) sits at context position ``kv_len - total_q + r``; see the module doc."""
    k_len = kv_len if k_len is None else k_len
    rows = torch.arange(q_offset, q_offset + q_len, device=device).unsqueeze(1)
    cols = torch.arange(k_offset, k_offset + k_len, device=device).unsqueeze(0)
    return cols <= rows


def split_gqa(q: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """``[n, Hq, d]`` -> ``[H_kv, group, n, d]`` so that K/V ``[H_kv, 1, d, m]`` broadcast without repeat."""
    n, hq, d = q.shape
    return q.view(n, num_kv_heads, hq // num_kv_heads, d).permute(1, 2, 0, 3)


def merge_gqa(out: torch.Tensor) -> torch.Tensor:
    """Inverse of split_gqa: ``[H_kv, group, n, d]`` -> ``[n, Hq, d]``."""
    hkv, g, n, d = out.shape
    return out.permute(2, 0, 1, 3).reshape(n, hkv * g, d)
