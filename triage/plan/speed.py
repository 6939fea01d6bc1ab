"""Speed: the roofline decode rate at a batch size, and the prefill time of a prompt, for one replica.

Everything is per GPU of the tensor-parallel group (each reads 1/TP of the weights and its share of
the KV cache at its own bandwidth). The bound is at spec-sheet peak; the expected figure divides
the memory time by --mbu and the compute time by --mfu. All-reduce time between TP ranks is not
modelled.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from triage.core import roofline, specs
from triage.plan.inputs import PlanInputs
from triage.plan.kv_memory import kv_shards, model_weight_bytes, routed_expert_bytes
from triage.plan.model_shape import ModelShape


def compute_dtype(weight_dtype: str) -> str:
    """The dtype matmuls run in: W8A8 for fp8/int8 (where the GPU has such tensor cores), bf16 for
    weight-only int4, else the weights' own."""
    return weight_dtype if weight_dtype in ("fp8", "int8", "fp16") else "bf16"


def decode_attention_flops(model: ModelShape, context_tokens: float) -> float:
    """Attention FLOPs of one decode token over its cached keys. MLA decodes on the absorbed latent
    (as vLLM and FlashMLA do): QK over kv_lora_rank + rope, PV over kv_lora_rank."""
    if model.kv_lora_rank is not None:
        dqk, dv = model.kv_lora_rank + model.qk_rope_head_dim, model.kv_lora_rank
    else:
        dqk, dv = model.head_dim, model.head_dim
    full_layers = model.num_layers - model.num_window_layers
    keys_window = roofline.kv_tokens_held(int(context_tokens), model.sliding_window_tokens)
    return (roofline.attention_flops_per_token(full_layers, model.num_attention_heads, dqk, dv, context_tokens)
            + roofline.attention_flops_per_token(model.num_window_layers, model.num_attention_heads,
                                                 dqk, dv, keys_window))


def weight_bytes_read(model: ModelShape, dtype: str, num_tokens: int) -> float:
    """Weight bytes one forward pass over `num_tokens` tokens streams: everything of a dense model;
    for a MoE, the shared parts plus the fraction of routed experts those tokens select."""
    total = model_weight_bytes(model, dtype)
    if not model.is_moe:
        return total
    experts = routed_expert_bytes(model, dtype)
    frac = roofline.moe_expert_fraction_touched(model.num_experts, model.num_experts_per_tok, num_tokens)
    return total - experts + experts * frac


@dataclass(frozen=True, slots=True)
class DecodePoint:
    batch_size: int
    context_tokens: float
    step_bytes_per_gpu: float
    step_flops_per_gpu: float
    bound_tokens_per_s: float          # roofline, at spec peak
    bound_tpot_ms: float
    limited_by: str                    # memory | compute
    memory_s: float                    # bound: step bytes / bandwidth
    compute_s: float                   # bound: step FLOPs / peak FLOP/s
    expected_tokens_per_s: float       # at --mbu / --mfu
    expected_tpot_ms: float
    step_s_expected: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decode_point(inputs: PlanInputs, tp: int, batch_size: int, context_tokens: float) -> DecodePoint:
    m, gpu = inputs.model, inputs.gpu
    shards = kv_shards(m, tp)
    kv_seq_per_gpu = m.kv_bytes_per_sequence(int(context_tokens), inputs.kv_storage_dtype) / shards
    weights_per_gpu = weight_bytes_read(m, inputs.dtype, batch_size) / tp
    flops_per_token_per_gpu = roofline.decode_flops_per_token(
        m.num_active_params, decode_attention_flops(m, context_tokens)) / tp
    flops = specs.tensor_flops_per_s(gpu, compute_dtype(inputs.dtype))
    bound = roofline.decode_step_bound(batch_size, weights_per_gpu, kv_seq_per_gpu, flops_per_token_per_gpu,
                                       gpu.hbm_bandwidth_bytes_per_s, flops)
    expected_s = max(bound.memory_s / inputs.mbu, bound.compute_s / inputs.mfu)
    return DecodePoint(
        batch_size=batch_size, context_tokens=context_tokens,
        step_bytes_per_gpu=weights_per_gpu + batch_size * kv_seq_per_gpu,
        step_flops_per_gpu=batch_size * flops_per_token_per_gpu,
        bound_tokens_per_s=batch_size / bound.time_s, bound_tpot_ms=bound.time_s * 1e3,
        limited_by=bound.limited_by, memory_s=bound.memory_s, compute_s=bound.compute_s,
        expected_tokens_per_s=batch_size / expected_s,
        expected_tpot_ms=expected_s * 1e3, step_s_expected=expected_s,
    )


@dataclass(frozen=True, slots=True)
class PrefillPoint:
    input_tokens: int
    flops: float                       # the whole prompt, all GPUs
    bound_ttft_ms: float
    limited_by: str
    memory_s: float
    compute_s: float
    expected_ttft_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def prefill_point(inputs: PlanInputs, tp: int) -> PrefillPoint:
    m, gpu = inputs.model, inputs.gpu
    n = inputs.input_len
    flops = roofline.prefill_flops(
        m.num_active_params, n, m.num_layers, m.num_attention_heads, m.qk_head_dim,
        v_head_dim=m.attn_v_head_dim, num_window_layers=m.num_window_layers,
        sliding_window_tokens=m.sliding_window_tokens)
    peak = specs.tensor_flops_per_s(gpu, compute_dtype(inputs.dtype))
    bound = roofline.prefill_bound(flops / tp, weight_bytes_read(m, inputs.dtype, n) / tp,
                                   gpu.hbm_bandwidth_bytes_per_s, peak)
    expected_s = max(bound.memory_s / inputs.mbu, bound.compute_s / inputs.mfu)
    return PrefillPoint(input_tokens=n, flops=flops, bound_ttft_ms=bound.time_s * 1e3,
                        limited_by=bound.limited_by, memory_s=bound.memory_s, compute_s=bound.compute_s,
                        expected_ttft_ms=expected_s * 1e3)
