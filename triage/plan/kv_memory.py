"""Memory: weight bytes, KV bytes, and how much KV cache a tensor-parallel group has room for.

vLLM's budget per GPU is gpu_memory_utilization x VRAM. From it come the weights (1/TP of them),
the activation peak of its profile run, and runtime overhead; what is left is the KV cache.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from triage.core import roofline
from triage.plan import assumptions as A
from triage.plan.inputs import PlanInputs
from triage.plan.model_shape import ModelShape


def model_weight_bytes(model: ModelShape, dtype: str) -> float:
    return roofline.weight_bytes(model.num_params, dtype, num_unquantized_params=model.num_embedding_params)


def routed_expert_bytes(model: ModelShape, dtype: str) -> float:
    return model.routed_expert_params * roofline.bytes_per_param(dtype)


def kv_shards(model: ModelShape, tp: int) -> int:
    """How many ways the KV cache splits over a TP group. KV heads split over GPUs until there is one
    per GPU (beyond that vLLM replicates them); MLA's latent is replicated on every GPU."""
    if model.kv_lora_rank is not None:
        return 1
    return min(tp, model.num_kv_heads)


def activation_bytes_per_gpu(model: ModelShape, tp: int, max_num_seqs: int,
                             max_num_batched_tokens: int = A.DEFAULT_MAX_NUM_BATCHED_TOKENS) -> float:
    """Peak of vLLM's profile forward pass, estimated: per batched token a few hidden-size buffers
    (residual, norm output, attention output, o-proj) and the MLP's gate/up/act intermediates (this
    GPU's shard), plus fp32 logits for one sampled token per sequence."""
    if model.is_moe:
        ffn = (model.num_experts_per_tok * model.moe_intermediate_size
               + model.num_shared_experts * model.moe_intermediate_size
               + model.shared_expert_intermediate_size)
    else:
        ffn = model.intermediate_size
    per_token = 4 * model.hidden_size + 3 * ffn / tp
    return (max_num_batched_tokens * per_token * A.ACTIVATION_BYTES
            + max_num_seqs * model.vocab_size * A.LOGITS_BYTES)


@dataclass(frozen=True, slots=True)
class TpFit:
    tp: int
    valid: bool                     # vLLM accepts this TP for the model (heads divide)
    budget_bytes_per_gpu: float
    weight_bytes_per_gpu: float
    activation_bytes_per_gpu: float
    overhead_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float  # negative when the weights alone do not fit
    kv_bytes_per_token_per_gpu: float
    kv_capacity_tokens: int         # full-attention tokens the cache holds (vLLM's "KV cache size")
    kv_capacity_seqs: int           # sequences of the planned length (input + output) it holds
    max_seq_tokens: int | None      # the longest single sequence it holds (None: windows bound it)
    max_len_checked: int            # the sequence length vLLM must hold one of to start
    weights_fit: bool
    can_start: bool                 # one max_len_checked sequence fits (vLLM's start-up check)
    headroom_ok: bool               # at least min_seqs planned sequences fit
    fit_margin_bytes_per_gpu: float # KV budget left after one max_len_checked sequence
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_for_tp(inputs: PlanInputs, tp: int, min_seqs: int, max_len_checked: int) -> TpFit:
    m, gpu = inputs.model, inputs.gpu
    budget = inputs.gpu_memory_utilization * gpu.vram_bytes
    weights = model_weight_bytes(m, inputs.dtype) / tp
    act = activation_bytes_per_gpu(m, tp, inputs.max_num_seqs)
    overhead = float(A.RUNTIME_OVERHEAD_BYTES)
    kv_budget = budget - weights - act - overhead
    shards = kv_shards(m, tp)
    kv_tok = m.kv_bytes_per_token(inputs.kv_storage_dtype) / shards
    kv_seq = m.kv_bytes_per_sequence(inputs.context_tokens, inputs.kv_storage_dtype) / shards
    kv_max = m.kv_bytes_per_sequence(max_len_checked, inputs.kv_storage_dtype) / shards
    valid = m.num_attention_heads % tp == 0
    capacity_tokens = int(max(kv_budget, 0) // kv_tok)
    capacity_seqs = int(max(kv_budget, 0) // kv_seq)
    max_seq = longest_sequence_tokens(m, inputs.kv_storage_dtype, max(kv_budget, 0) * shards)
    weights_fit = kv_budget > 0
    can_start = valid and weights_fit and kv_budget >= kv_max
    headroom_ok = can_start and capacity_seqs >= min_seqs
    if not valid:
        reason = f"{m.num_attention_heads} attention heads do not split {tp} ways"
    elif not weights_fit:
        reason = (f"weights {weights / A.GIB:.1f} GiB + activations and overhead "
                  f"{(act + overhead) / A.GIB:.1f} GiB exceed the {budget / A.GIB:.1f} GiB budget per GPU")
    elif not can_start:
        reason = f"KV room holds {capacity_tokens:,} tokens, less than one {max_len_checked:,}-token sequence"
    elif not headroom_ok:
        reason = (f"KV room holds {capacity_seqs} sequence{'' if capacity_seqs == 1 else 's'} of "
                  f"{inputs.context_tokens:,} tokens, fewer than {min_seqs}")
    else:
        reason = f"fits: {capacity_seqs:,} sequences of {inputs.context_tokens:,} tokens"
    return TpFit(
        tp=tp, valid=valid, budget_bytes_per_gpu=budget, weight_bytes_per_gpu=weights,
        activation_bytes_per_gpu=act, overhead_bytes_per_gpu=overhead, kv_budget_bytes_per_gpu=kv_budget,
        kv_bytes_per_token_per_gpu=kv_tok, kv_capacity_tokens=capacity_tokens,
        kv_capacity_seqs=capacity_seqs, max_seq_tokens=max_seq, max_len_checked=max_len_checked, weights_fit=weights_fit,
        can_start=can_start, headroom_ok=headroom_ok, fit_margin_bytes_per_gpu=kv_budget - kv_max,
        reason=reason,
    )


def longest_sequence_tokens(model: ModelShape, kv_dtype: str, kv_bytes: float) -> int | None:
    """The longest sequence `kv_bytes` of cache holds. Sliding-window layers stop growing at the
    window, so a model whose every layer is windowed is never bounded by its cache (None)."""
    full, window = model.kv_bytes_per_token_split(kv_dtype)
    w = model.sliding_window_tokens
    if window == 0 or w is None:
        return int(kv_bytes // full)
    if kv_bytes < w * (full + window):            # the window is not yet full
        return int(kv_bytes // (full + window))
    if full == 0:
        return None
    return int((kv_bytes - w * window) // full)


def tp_candidates(inputs: PlanInputs) -> list[int]:
    found = list(A.TP_CANDIDATES)
    if inputs.tp is not None and inputs.tp not in found:
        found.append(inputs.tp)
    return sorted(found)


def choose_tp(fits: list[TpFit]) -> TpFit | None:
    """The smallest TP that fits with headroom; else the smallest that at least starts."""
    for f in fits:
        if f.headroom_ok:
            return f
    for f in fits:
        if f.can_start:
            return f
    return None


def suggested_max_model_len(inputs: PlanInputs, fit: TpFit) -> int:
    """The model's own maximum when one such sequence fits the KV cache, else the longest multiple
    of 1024 that does (never below the planned request length)."""
    if inputs.max_model_len is not None:
        return inputs.max_model_len
    model_max = inputs.model.max_position_embeddings or inputs.context_tokens
    if fit.max_seq_tokens is None or fit.max_seq_tokens >= model_max:
        return model_max
    return max(inputs.context_tokens, min(model_max, fit.max_seq_tokens // 1024 * 1024))
