"""FlashAttention-2 style causal prefill attention in Triton (GPU; CPU only under TRITON_INTERPRET=1).

Layout: q [B, H, S, D], k/v [B, H_kv, S, D] (H a multiple of H_kv: GQA/MQA), output like q.
One program computes a BLOCK_M tile of queries for one (batch, head): it streams K/V tiles of
BLOCK_N keys, keeps a running max ``m`` and normaliser ``l`` (online softmax), rescales the
accumulator when the max grows, and stops at the causal diagonal so the S×S score matrix never
exists in memory.

Importing this module needs triton; callers guard with ``triton_available()`` from
reference_engine.layers.attention.triton_support.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from triage.reference_engine.layers.attention.triton_softmax import online_softmax_step
from triage.reference_engine.layers.attention.triton_support import check_device


@triton.jit
def _flash_fwd_kernel(
    Q, K, V, Out,
    stride_qb, stride_qh, stride_qs,
    stride_kb, stride_kh, stride_ks,
    stride_vb, stride_vh, stride_vs,
    stride_ob, stride_oh, stride_os,
    num_heads, seq_len, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // num_heads
    h = pid_bh % num_heads
    kv_h = h // GROUP

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :]
    q = tl.load(q_ptrs, mask=offs_m[:, None] < seq_len, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): use exp2

    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)
    else:
        hi = seq_len
    k_base = K + b * stride_kb + kv_h * stride_kh
    v_base = V + b * stride_vb + kv_h * stride_vh
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = cols[:, None] < seq_len
        k = tl.load(k_base + cols[:, None] * stride_ks + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_base + cols[:, None] * stride_vs + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        valid = cols[None, :] < seq_len
        if CAUSAL:
            valid = valid & (cols[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_i, l_i, acc = online_softmax_step(s, v, m_i, l_i, acc)
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :]
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < seq_len)


def flash_attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                            sm_scale: float | None = None, block_m: int = 64, block_n: int = 64) -> torch.Tensor:
    """Causal (or full) attention over q [B, H, S, D], k/v [B, H_kv, S, D]; returns [B, H, S, D]."""
    check_device(q)
    bsz, num_heads, seq_len, head_dim = q.shape
    num_kv_heads = k.shape[1]
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads is not a multiple of {num_kv_heads} kv heads")
    if head_dim not in (16, 32, 64, 128, 256):
        raise ValueError(f"head_dim {head_dim} is not supported (16, 32, 64, 128 or 256)")
    if k.shape != v.shape or k.shape[0] != bsz or k.shape[2] != seq_len or k.shape[3] != head_dim:
        raise ValueError(f"k {tuple(k.shape)} / v {tuple(v.shape)} do not match q {tuple(q.shape)}")
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    out = torch.empty_like(q)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    grid = (triton.cdiv(seq_len, block_m), bsz * num_heads)
    _flash_fwd_kernel[grid](
        q, k, v, out,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        num_heads, seq_len, scale,
        GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
    )
    return out
