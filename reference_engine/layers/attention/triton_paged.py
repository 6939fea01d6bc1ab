"""Paged attention in Triton for decode and chunked prefill (GPU; CPU only under TRITON_INTERPRET=1).

Layout (vLLM-like, one layer):
    q            [T, H, D]      new tokens of every sequence, packed back to back
    cu_seqlens_q [S + 1] int32  sequence s owns q rows cu_seqlens_q[s] : cu_seqlens_q[s + 1]
    seq_lens_k   [S] int32      keys per sequence, the new tokens included (already in the cache)
    k_cache/v_cache [num_blocks, block_size, H_kv, D]
    block_table  [S, max_blocks] int32   logical block j of sequence s lives in physical block
                                          block_table[s, j]
    k_scale/v_scale (optional) [num_blocks, block_size, H_kv] fp32, for an e4m3 cache: values are
                                          dequantized tile by tile inside the kernel.

Causal masking is aligned lower-right: the q_len new tokens are the last q_len positions of the
sequence, so query i may see keys 0 .. kv_len - q_len + i. Decode is the case q_len = 1.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from triage.reference_engine.layers.attention.triton_softmax import online_softmax_step
from triage.reference_engine.layers.attention.triton_support import check_device


@triton.jit
def _paged_attn_kernel(
    Q, K_CACHE, V_CACHE, K_SCALE, V_SCALE, Out,
    CU_Q, SEQ_LENS, BLOCK_TABLE,
    stride_qt, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_sb, stride_ss,
    stride_ot, stride_oh,
    stride_bt,
    sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, PAGE: tl.constexpr,
    HAS_SCALE: tl.constexpr,
):
    pid_m = tl.program_id(0)
    seq = tl.program_id(1)
    h = tl.program_id(2)
    kv_h = h // GROUP

    q_start = tl.load(CU_Q + seq)
    q_len = tl.load(CU_Q + seq + 1) - q_start
    kv_len = tl.load(SEQ_LENS + seq)
    ctx_len = kv_len - q_len  # keys before the first new token

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_p = tl.arange(0, PAGE)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < q_len

    q = tl.load(Q + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh + offs_d[None, :],
                mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634

    # The last key any row of this tile may see, +1; zero when the tile is past q_len.
    last_key = tl.minimum(kv_len, ctx_len + (pid_m + 1) * BLOCK_M)
    last_key = tl.where(pid_m * BLOCK_M < q_len, last_key, 0)
    num_pages = (last_key + PAGE - 1) // PAGE
    for j in range(0, num_pages):
        phys = tl.load(BLOCK_TABLE + seq * stride_bt + j).to(tl.int64)
        cols = j * PAGE + offs_p
        col_ok = cols < kv_len
        k = tl.load(K_CACHE + phys * stride_kb + offs_p[:, None] * stride_ks + kv_h * stride_kh + offs_d[None, :],
                    mask=col_ok[:, None], other=0.0).to(tl.float32)
        v = tl.load(V_CACHE + phys * stride_vb + offs_p[:, None] * stride_vs + kv_h * stride_vh + offs_d[None, :],
                    mask=col_ok[:, None], other=0.0).to(tl.float32)
        if HAS_SCALE:
            ks = tl.load(K_SCALE + phys * stride_sb + offs_p * stride_ss + kv_h, mask=col_ok, other=0.0)
            vs = tl.load(V_SCALE + phys * stride_sb + offs_p * stride_ss + kv_h, mask=col_ok, other=0.0)
            k = k * ks[:, None]
            v = v * vs[:, None]
        s = tl.dot(q.to(tl.float32), tl.trans(k)) * qk_scale
        valid = col_ok[None, :] & (cols[None, :] <= (ctx_len + offs_m)[:, None]) & row_ok[:, None]
        s = tl.where(valid, s, float("-inf"))
        m_i, l_i, acc = online_softmax_step(s, v, m_i, l_i, acc)
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(Out + (q_start + offs_m)[:, None] * stride_ot + h * stride_oh + offs_d[None, :],
             acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                    cu_seqlens_q: torch.Tensor, seq_lens_k: torch.Tensor, max_q_len: int,
                    sm_scale: float | None = None, k_scale: torch.Tensor | None = None,
                    v_scale: torch.Tensor | None = None, block_m: int = 16) -> torch.Tensor:
    """Attention of the packed new tokens ``q`` over each sequence's paged K/V; returns [T, H, D]."""
    check_device(q)
    num_tokens, num_heads, head_dim = q.shape
    _num_blocks, page, num_kv_heads, kdim = k_cache.shape
    if kdim != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} / v_cache {tuple(v_cache.shape)} do not fit q "
                         f"{tuple(q.shape)}")
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads is not a multiple of {num_kv_heads} kv heads")
    if page < 16 or page & (page - 1):
        raise ValueError(f"block_size {page} must be a power of two ≥ 16 for the Triton kernel")
    if (k_scale is None) != (v_scale is None):
        raise ValueError("pass both k_scale and v_scale, or neither")
    num_seqs = seq_lens_k.shape[0]
    out = torch.empty(q.shape, dtype=torch.float32 if q.dtype == torch.float8_e4m3fn else q.dtype,
                      device=q.device)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    has_scale = k_scale is not None
    ks = k_scale if has_scale else k_cache  # unused pointer when HAS_SCALE is False
    vs = v_scale if has_scale else v_cache
    grid = (triton.cdiv(max(max_q_len, 1), block_m), num_seqs, num_heads)
    _paged_attn_kernel[grid](
        q, k_cache, v_cache, ks, vs, out,
        cu_seqlens_q, seq_lens_k, block_table,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        ks.stride(0) if has_scale else 0, ks.stride(1) if has_scale else 0,
        out.stride(0), out.stride(1),
        block_table.stride(0),
        scale,
        GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_M=block_m, PAGE=page, HAS_SCALE=has_scale,
    )
    return out
