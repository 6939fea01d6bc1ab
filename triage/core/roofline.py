"""The roofline model of LLM inference: bytes and FLOPs of a model, and the speed they allow.

Pure functions of numbers: nothing here measures anything. `triage plan` feeds them spec-sheet
figures (triage/core/specs.py); `triage baseline` feeds them what it measured on the host.

The physics (seeds 001 and 004):
- weights: bytes = params x bytes-per-param, with the embedding/LM head and norms kept in 16 bit
  when the linear layers are quantized (as AWQ, GPTQ and vLLM's FP8 do);
- KV cache per token = 2 x L x H_kv x d x bytes (the 2 is K and V); MLA stores one latent of
  (kv_lora_rank + rope_dim) per layer instead; a sliding-window layer keeps at most `window` tokens;
- decode is memory-bound: one step reads all weights once plus every running sequence's KV, so
  tok/s <= B x BW / (W + B x ctx x kv_bytes_per_token), and never more than FLOP/s / FLOPs-per-token;
- prefill is compute-bound: FLOPs ~ 2 x N_params x tokens + the causal attention term.
"""
from __future__ import annotations

from dataclasses import dataclass

# Bytes per stored element. "fp16"/"bf16" are interchangeable for size.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5,
}
# Quantized linear layers also store scales: int4 group-wise carries a 16-bit scale and a 16-bit
# zero point per group; fp8/int8 carry one fp32 scale per output channel (negligible, ignored).
INT4_GROUP_SIZE = 128
INT4_GROUP_OVERHEAD_BYTES = 4.0
QUANTIZED_DTYPES = frozenset({"fp8", "int8", "int4"})


class UnknownDtypeError(ValueError):
    """A dtype name outside DTYPE_BYTES."""


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise UnknownDtypeError(
            f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPE_BYTES)}") from None


def bytes_per_param(dtype: str, group_size: int = INT4_GROUP_SIZE) -> float:
    """Bytes one quantized-linear parameter costs, scales included (int4: 0.5 + 4/group)."""
    b = dtype_bytes(dtype)
    if dtype == "int4":
        b += INT4_GROUP_OVERHEAD_BYTES / group_size
    return b


def weight_bytes(num_params: int, dtype: str, *, num_unquantized_params: int = 0,
                 group_size: int = INT4_GROUP_SIZE) -> float:
    """Bytes of weights: `num_unquantized_params` (embeddings, LM head, norms) stay in bf16 when
    `dtype` is a quantized one; the rest costs `bytes_per_param(dtype)`. Unquantized dtypes store
    every parameter at their own width."""
    if num_unquantized_params < 0 or num_unquantized_params > num_params:
        raise ValueError("num_unquantized_params must be between 0 and num_params")
    if dtype not in QUANTIZED_DTYPES:
        return num_params * dtype_bytes(dtype)
    quantized = num_params - num_unquantized_params
    return quantized * bytes_per_param(dtype, group_size) + num_unquantized_params * DTYPE_BYTES["bf16"]


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, kv_dtype: str) -> float:
    """2 x L x H_kv x d x bytes: K and V for one token across all layers (MHA, GQA and MQA alike;
    GQA/MQA simply have fewer KV heads than query heads)."""
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes(kv_dtype)


def mla_kv_bytes_per_token(num_layers: int, kv_lora_rank: int, qk_rope_head_dim: int,
                           kv_dtype: str) -> float:
    """Multi-head latent attention (DeepSeek V2/V3) caches one compressed latent plus the shared
    rope key per layer: L x (kv_lora_rank + rope_dim) x bytes. No factor 2, no per-head term."""
    return num_layers * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes(kv_dtype)


def kv_tokens_held(context_tokens: int, sliding_window_tokens: int | None) -> int:
    """How many tokens a layer keeps in its cache at this context: all of them, or the window."""
    if sliding_window_tokens is None:
        return context_tokens
    return min(context_tokens, sliding_window_tokens)


def kv_bytes_per_sequence(context_tokens: int, full_kv_bytes_per_token: float,
                          window_kv_bytes_per_token: float = 0.0,
                          sliding_window_tokens: int | None = None) -> float:
    """KV bytes one sequence holds at `context_tokens`: the full-attention layers' share grows with
    the context, the sliding-window layers' share stops at the window."""
    return (context_tokens * full_kv_bytes_per_token
            + kv_tokens_held(context_tokens, sliding_window_tokens) * window_kv_bytes_per_token)


def decode_tokens_per_s_bound(batch_size: int, bandwidth_bytes_per_s: float, weight_bytes: float,
                              context_tokens: float, kv_bytes_per_token: float) -> float:
    """The memory roofline of decode: B x BW / (W + B x ctx x kv_bytes_per_token) tokens/s.

    One decode step streams every weight once and each of the B sequences' KV once; it emits B
    tokens. With tensor parallelism pass the summed bandwidth of the group (each GPU reads 1/TP).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    step_bytes = weight_bytes + batch_size * context_tokens * kv_bytes_per_token
    return batch_size * bandwidth_bytes_per_s / step_bytes


def attention_flops_per_token(num_layers: int, num_heads: int, qk_head_dim: int, v_head_dim: int,
                              num_keys: float) -> float:
    """FLOPs for one query token attending to `num_keys` keys in every layer:
    QK^T (2 x d_qk per key) plus PV (2 x d_v per key), per head."""
    return 2.0 * num_layers * num_heads * (qk_head_dim + v_head_dim) * num_keys


def causal_keys_sum(num_tokens: int, sliding_window_tokens: int | None = None) -> float:
    """Sum over a prompt's tokens of the keys each attends to under a causal mask (and a window)."""
    n = num_tokens
    w = sliding_window_tokens
    if w is None or n <= w:
        return n * (n + 1) / 2.0
    return w * (w + 1) / 2.0 + (n - w) * w


def prefill_flops(num_params: int, num_tokens: int, num_layers: int, num_heads: int, head_dim: int,
                  *, v_head_dim: int | None = None, num_window_layers: int = 0,
                  sliding_window_tokens: int | None = None) -> float:
    """FLOPs to prefill one prompt: 2 x N_params x tokens (every weight is one multiply-add per
    token) plus causal attention, ~2 x L x H x d x tokens^2 for full attention. Pass the *active*
    parameter count for MoE models."""
    dv = head_dim if v_head_dim is None else v_head_dim
    num_full_layers = num_layers - num_window_layers
    attn = 2.0 * num_heads * (head_dim + dv) * (
        num_full_layers * causal_keys_sum(num_tokens)
        + num_window_layers * causal_keys_sum(num_tokens, sliding_window_tokens))
    return 2.0 * num_params * num_tokens + attn


def decode_flops_per_token(num_active_params: int, attention_flops: float = 0.0) -> float:
    """FLOPs for one decode token: 2 x active params plus its attention over the cached keys."""
    return 2.0 * num_active_params + attention_flops


@dataclass(frozen=True, slots=True)
class StepBound:
    """The roofline time of one step: the slower of streaming its bytes and doing its FLOPs."""
    memory_s: float
    compute_s: float

    @property
    def time_s(self) -> float:
        return max(self.memory_s, self.compute_s)

    @property
    def limited_by(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


def step_bound(step_bytes: float, step_flops: float, bandwidth_bytes_per_s: float,
               flops_per_s: float) -> StepBound:
    if bandwidth_bytes_per_s <= 0 or flops_per_s <= 0:
        raise ValueError("bandwidth and FLOP/s must be positive")
    return StepBound(memory_s=step_bytes / bandwidth_bytes_per_s, compute_s=step_flops / flops_per_s)


def decode_step_bound(batch_size: int, weight_bytes: float, kv_bytes_per_seq: float,
                      flops_per_token: float, bandwidth_bytes_per_s: float,
                      flops_per_s: float) -> StepBound:
    """One decode step of B sequences: reads W + B x kv_bytes_per_seq, computes B x flops_per_token."""
    return step_bound(weight_bytes + batch_size * kv_bytes_per_seq, batch_size * flops_per_token,
                      bandwidth_bytes_per_s, flops_per_s)


def prefill_bound(flops: float, weight_bytes: float, bandwidth_bytes_per_s: float,
                  flops_per_s: float) -> StepBound:
    """A prefill: its FLOPs, and at least one full read of the weights."""
    return step_bound(weight_bytes, flops, bandwidth_bytes_per_s, flops_per_s)


def ridge_point_flops_per_byte(flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Arithmetic intensity above which a kernel is compute-bound (~295 FLOP/byte on an H100 SXM)."""
    return flops_per_s / bandwidth_bytes_per_s


def moe_expert_fraction_touched(num_experts: int, num_experts_per_tok: int, num_tokens: int) -> float:
    """Expected fraction of a layer's routed experts that a step of `num_tokens` tokens reads,
    assuming uniform routing: 1 - (1 - k/E)^tokens. One token reads k/E of them; a big batch, all."""
    if num_experts <= 0:
        return 1.0
    p_unused = (1.0 - num_experts_per_tok / num_experts) ** max(num_tokens, 0)
    return 1.0 - p_unused
