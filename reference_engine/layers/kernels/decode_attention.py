"""Decode attention over the paged KV cache in one C++ call a layer (decode_attention.cpp): the CPU path of the
SDPA backend for batches in which every sequence brings one new token.

At bs=1 a decode layer's attention in torch ops is about a dozen dispatches (gather the sequence's blocks,
two batched matmuls, softmax, layout changes) for a few microseconds of arithmetic; the kernel reads the
blocks where they lie, through the block table, and writes the layer's new K/V rows into the cache in the same
call. It takes an fp32 or bf16 query (a bf16 one is widened to fp32 first and the output narrowed back: the
arithmetic is fp32) and an fp32 or bf16 cache (an FP8 cache is dequantized first, by its KvFormat). A lone fp32
sequence longer than ONE_SEQUENCE_MAX_CONTEXT, anything else, or a host where the kernel cannot be built keeps the
torch path.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from triage.reference_engine.layers.kernels.bf16_weights import build_extension

if TYPE_CHECKING:       # the attention package imports this module
    from triage.reference_engine.layers.attention.base import AttentionMetadata

_SOURCE = Path(__file__).with_name("decode_attention.cpp")
CACHE_DTYPES = (torch.float32, torch.bfloat16)
QUERY_DTYPES = (torch.float32, torch.bfloat16)
# The longest context the kernel takes for a batch of one sequence with an fp32 query. Past it, torch's fp32
# batched matmuls read a sequence whose blocks are consecutive (a view, no gather) about as fast or faster: on the
# 2-vCPU Xeon at 1 thread, `small`'s heads, 2048 tokens took 536 µs on the kernel against 572 µs, 4096 tokens 1104
# against 1054 µs. With scattered blocks, for every batch of 8, and for a bf16 query and cache at every batch, the
# kernel was faster at every length up to 4096 tokens; benchmarks/decode_attention.py has every case.
ONE_SEQUENCE_MAX_CONTEXT = 2048


@functools.cache
def kernel() -> tuple[Any, str | None]:
    """(the compiled module, None) or (None, why not)."""
    return build_extension("triage_decode_attention", [_SOURCE], {"avx2", "fma"}, ["-O3", "-mavx2", "-mfma"],
                           "the decode-attention kernel (about 30 s)", {})


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: AttentionMetadata,
                     scale: float, new_kv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
                     ) -> torch.Tensor | None:
    """``[B, Hq, d]`` attention outputs, in ``q``'s dtype, for a batch of one-token sequences, or None where the
    kernel does not apply (not a CPU tensor, a query that is not fp32 or bf16, a cache that is not fp32 or bf16,
    one sequence with an fp32 query longer than ONE_SEQUENCE_MAX_CONTEXT, no kernel here). ``new_kv``: the
    batch's new ``(k, v, slots)``, written into the cache by the same call before it attends; where the kernel
    does not apply, nothing is written."""
    if (q.device.type != "cpu" or q.dtype not in QUERY_DTYPES or k_cache.dtype not in CACHE_DTYPES
            or (q.dtype == torch.float32 and meta.num_seqs == 1 and meta.kv_lens[0] > ONE_SEQUENCE_MAX_CONTEXT)):
        return None
    module = kernel()[0]
    if module is None:
        return None
    return module.decode_attention(q, k_cache, v_cache, meta.table_tensor(q.device), meta.kv_lens, scale,
                                   *(new_kv or ()))
