"""One step's attention over the paged KV cache: what the model's ``attend`` does, eager or compiled.

``PagedStep`` holds what a step needs beyond the tokens: the cache, the slots the new K/V go to, the ragged
batch's metadata (Python lists), the backend and the cache's storage format. Eager steps pass its ``__call__``
to the model as ``attend``.

A compiled step cannot take that metadata as an input: Dynamo would guard on every list and recompile at each
step. So attention is one operator, ``triage::paged_attention``, that takes only tensors and the layer index and
reads the rest from the step being run (``running``), the way vLLM's attention operator reads its forward
context (vllm/forward_context.py, ``unified_attention`` in vllm/attention/layer.py). The compiled graph keeps it
whole and fuses what lies between two layers' attention. The cache is not a graph input: the operator writes it
as a side effect no other node of the graph reads, so declaring no mutation is safe. A padded batch (a bucket
larger than the step) carries rows past ``num_tokens``; the operator attends the real rows and returns zeros for
the rest.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from triage.reference_engine.layers.attention.base import AttentionBackend, AttentionMetadata
from triage.reference_engine.layers.kv_cache import KvFormat


@dataclass(slots=True)
class PagedStep:
    kv_cache: torch.Tensor              # [L, 2, blocks, block_size, H_kv, d] in kv_format's storage
    slot_mapping: torch.Tensor          # [num_tokens] int64
    meta: AttentionMetadata
    backend: AttentionBackend
    kv_format: KvFormat
    num_tokens: int                     # the real rows; a compiled bucket may carry more

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, scale: float) -> torch.Tensor:
        k_cache, v_cache = self.kv_cache[layer, 0], self.kv_cache[layer, 1]
        return self.kv_format.write_and_attend(self.backend, q, k, v, k_cache, v_cache, self.slot_mapping, self.meta,
                                               scale)


_running: list[PagedStep] = []


@contextlib.contextmanager
def running(step: PagedStep) -> Iterator[PagedStep]:
    """The step ``triage::paged_attention`` serves while a compiled forward runs."""
    _running.append(step)
    try:
        yield step
    finally:
        _running.pop()


# cudagraph_unsafe: on a GPU, CUDA graphs are captured around it, never through it (compiled_step.py).
@torch.library.custom_op("triage::paged_attention", mutates_args=(), tags=(torch.Tag.cudagraph_unsafe,))
def _paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, scale: float) -> torch.Tensor:
    if not _running:
        raise RuntimeError("triage::paged_attention ran outside a step (use step_attention.running)")
    step = _running[-1]
    n = step.num_tokens
    if n == q.shape[0]:
        return step(q, k, v, layer, scale)
    out = q.new_zeros(q.shape)
    out[:n] = step(q[:n], k[:n], v[:n], layer, scale)
    return out


@_paged_attention.register_fake
def _paged_attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, scale: float) -> torch.Tensor:
    return torch.empty_like(q)


def compiled_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, scale: float) -> torch.Tensor:
    """The model's ``attend`` inside a compiled step: the operator, served by the running step."""
    return torch.ops.triage.paged_attention(q, k, v, layer, scale)
