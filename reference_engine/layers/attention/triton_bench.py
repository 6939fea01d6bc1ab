"""Time the Triton FlashAttention-2 prefill kernel against torch SDPA (GPU only)."""
from __future__ import annotations

import torch

from triage.reference_engine.layers.attention.triton_support import triton_unavailable_reason


def time_prefill_vs_sdpa(seq_len: int = 8192, num_heads: int = 32, num_kv_heads: int = 8, head_dim: int = 128,
                         device: str = "cuda", dtype: torch.dtype = torch.bfloat16, repeats: int = 10) -> dict:
    """Median ms of each, and ``speed_ratio`` = sdpa_ms / triton_ms (≥ 1 means Triton is faster).
    Returns ``{"skipped": reason}`` where Triton cannot run."""
    reason = triton_unavailable_reason(device)
    if reason is not None or not device.startswith("cuda"):
        return {"skipped": reason or "the timing comparison needs a CUDA device"}
    import torch.nn.functional as F

    from triage.reference_engine.layers.attention.triton_prefill import flash_attention_prefill

    q = torch.randn(1, num_heads, seq_len, head_dim, device=device, dtype=dtype)
    k = torch.randn(1, num_kv_heads, seq_len, head_dim, device=device, dtype=dtype)
    v = torch.randn_like(k)

    def median_ms(fn) -> float:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]

    sdpa_ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    triton_ms = median_ms(lambda: flash_attention_prefill(q, k, v, causal=True))
    return {"seq_len": seq_len, "num_heads": num_heads, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
            "dtype": str(dtype).replace("torch.", ""), "sdpa_ms": sdpa_ms, "triton_ms": triton_ms,
            "speed_ratio": sdpa_ms / triton_ms}
