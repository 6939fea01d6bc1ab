"""The online-softmax step both Triton attention kernels share (imports triton: GPU modules only).

Given a tile's log2-scaled scores ``s`` (masked entries -inf), its values ``v`` and the running max
``m_i``, normaliser ``l_i`` and accumulator ``acc``, fold the tile in: raise the max, rescale what
was accumulated, add the tile. A row whose scores are all masked so far keeps m = -inf without
producing NaNs (the max is treated as 0 for the exponentials).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def online_softmax_step(s, v, m_i, l_i, acc):
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc
