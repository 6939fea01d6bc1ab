"""Turns a scheduled batch into tensors, runs the model over the KV cache, and samples.

The KV cache is one tensor ``[num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim]``, in the
storage format of ``kv_format`` (layers/kv_cache.py: plain float, or e4m3 + scale with ``head_dim + 4`` bytes). For
the contiguous "before" layout the same shape is used with ``block_size = max_model_len`` and one
block (slot) per sequence.
"""
from __future__ import annotations

import torch

from triage.reference_engine.engine.compiled_step import CompiledDecode
from triage.reference_engine.engine.scheduler import ScheduledBatch
from triage.reference_engine.engine.sequence import Sequence
from triage.reference_engine.engine.step_attention import PagedStep
from triage.reference_engine.layers.attention import get_backend
from triage.reference_engine.layers.attention.base import AttentionMetadata
from triage.reference_engine.layers.kv_cache import KvFormat, PlainKvFormat
from triage.reference_engine.layers.sampler import sample
from triage.reference_engine.models.llama import LlamaForCausalLM
from triage.reference_engine.models.model_config import ModelConfig


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, cfg: ModelConfig, num_blocks: int, block_size: int,
                 kv_dtype: torch.dtype, device: str, attention: str, kv_format: KvFormat | None = None):
        self.model = model
        self.cfg = cfg
        self.device = torch.device(device)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.backend = get_backend(attention, device)
        self.kv_format: KvFormat = PlainKvFormat(kv_dtype) if kv_format is None else kv_format
        self.kv_cache = self._allocate()
        self.compiled: CompiledDecode | None = None     # set by the engine when it compiles the decode step

    def _allocate(self) -> torch.Tensor:
        return self.kv_format.allocate(self.cfg.num_hidden_layers, self.num_blocks, self.block_size,
                                       self.cfg.num_key_value_heads, self.cfg.head_dim, self.device)

    @property
    def kv_cache_bytes(self) -> int:
        return self.kv_cache.numel() * self.kv_cache.element_size()

    def copy_blocks(self, copies: list[tuple[int, int]]) -> None:
        for src, dst in copies:
            self.kv_cache[:, :, dst].copy_(self.kv_cache[:, :, src])

    def prepare(self, batch: ScheduledBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                       AttentionMetadata, list[int], list[Sequence]]:
        bs = self.block_size
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        q_starts, q_lens, kv_lens, tables = [], [], [], []
        logit_rows: list[int] = []
        sample_seqs: list[Sequence] = []
        for seq, n in batch.entries:
            start = seq.num_computed_tokens
            q_starts.append(len(ids))
            ids.extend(seq.token_ids[start:start + n])
            table = seq.block_table
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, start + n))
            positions.extend(range(start, start + n))
            q_lens.append(n)
            kv_lens.append(start + n)
            tables.append(seq.block_table)
            if start + n == seq.num_tokens:
                logit_rows.append(len(ids) - 1)
                sample_seqs.append(seq)
        dev = self.device
        meta = AttentionMetadata(q_starts=q_starts, q_lens=q_lens, kv_lens=kv_lens, block_tables=tables,
                                 block_size=bs)
        return (torch.tensor(ids, dtype=torch.long, device=dev), torch.tensor(positions, dtype=torch.long, device=dev),
                torch.tensor(slots, dtype=torch.long, device=dev), meta, logit_rows, sample_seqs)

    @torch.inference_mode()
    def execute(self, batch: ScheduledBatch, copies: list[tuple[int, int]]) -> tuple[torch.Tensor, list[Sequence]]:
        """Forward the batch; return float32 logits for the sequences that get a new token, in order."""
        self.copy_blocks(copies)
        input_ids, positions, slot_mapping, meta, logit_rows, sample_seqs = self.prepare(batch)
        step = PagedStep(self.kv_cache, slot_mapping, meta, self.backend, self.kv_format, int(input_ids.shape[0]))
        if self.runs_compiled(meta, len(logit_rows)):
            return self.compiled.run(input_ids, positions, step), sample_seqs
        hidden = self.model.hidden_states(input_ids, positions, step)
        if not logit_rows:
            return torch.empty(0, self.cfg.vocab_size), []
        if len(logit_rows) == hidden.shape[0]:     # every row samples (all-decode steps): rows 0..T-1 in order
            return self.model.logits(hidden), sample_seqs
        rows = torch.tensor(logit_rows, dtype=torch.long, device=self.device)
        return self.model.logits(hidden.index_select(0, rows)), sample_seqs

    def runs_compiled(self, meta: AttentionMetadata, num_sampled: int) -> bool:
        """A decode step (one new token per sequence, each sampled) that fits a compiled bucket."""
        return (self.compiled is not None and meta.is_all_decode and num_sampled == meta.num_seqs
                and self.compiled.bucket_for(meta.num_seqs) is not None)

    def scratch_step(self, num_tokens: int) -> PagedStep:
        """A decode step of ``num_tokens`` one-token sequences, all in block 0 slot 0: for compiling and timing
        before any request has a block (what it writes there is overwritten before anything reads it)."""
        meta = AttentionMetadata(q_starts=list(range(num_tokens)), q_lens=[1] * num_tokens, kv_lens=[1] * num_tokens,
                                 block_tables=[[0]] * num_tokens, block_size=self.block_size)
        slots = torch.zeros(num_tokens, dtype=torch.long, device=self.device)
        return PagedStep(self.kv_cache, slots, meta, self.backend, self.kv_format, num_tokens)

    @torch.inference_mode()
    def sample(self, logits: torch.Tensor, seqs: list[Sequence], generators, banned) -> list[int]:
        return sample(logits, [s.params for s in seqs], generators, banned)
