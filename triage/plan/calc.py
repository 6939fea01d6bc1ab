"""The plan: fit, KV capacity, TP choice, roofline speed, fleet and cost, and the vLLM flags.

`build_plan(inputs)` is pure (no I/O): PlanInputs in, the report's `plan` section out (structured
results; triage/plan/plan_tables.py adds the human tables).
"""
from __future__ import annotations

from typing import Any

from triage.core import roofline, specs
from triage.plan import assumptions as A
from triage.plan import flags as F
from triage.plan import kv_memory, speed
from triage.plan.fleet_size import cost_of, size_fleet
from triage.plan.inputs import PlanInputs


def _model_section(inputs: PlanInputs, max_model_len: int) -> dict[str, Any]:
    m = inputs.model
    kv = inputs.kv_storage_dtype
    return {
        **m.as_dict(),
        "weight_dtype": inputs.dtype,
        "weight_bytes": kv_memory.model_weight_bytes(m, inputs.dtype),
        "weight_bytes_bf16": kv_memory.model_weight_bytes(m, "bf16"),
        "kv_cache_dtype": kv,
        "kv_bytes_per_token": m.kv_bytes_per_token(kv),
        "kv_bytes_per_token_bf16": m.kv_bytes_per_token("bf16"),
        "kv_bytes_per_sequence": m.kv_bytes_per_sequence(inputs.context_tokens, kv),
        "kv_bytes_per_sequence_at_max_model_len": m.kv_bytes_per_sequence(max_model_len, kv),
        "context_tokens": inputs.context_tokens,
    }


def _warnings(inputs: PlanInputs, fit: kv_memory.TpFit, fits: list[kv_memory.TpFit], chosen_by_user: bool,
              max_model_len: int, decode_at_batch: speed.DecodePoint) -> list[str]:
    return [*_fit_warnings(inputs, fit, fits, chosen_by_user), *_length_warnings(inputs, fit, max_model_len),
            *_hardware_warnings(inputs, fit, decode_at_batch)]


def _fit_warnings(inputs: PlanInputs, fit: kv_memory.TpFit, fits: list[kv_memory.TpFit], chosen_by_user: bool) -> list[str]:
    """Whether the model fits at all, at the TP asked for, and with room for KV."""
    m, gpu = inputs.model, inputs.gpu
    if not any(f.can_start for f in fits):
        return [f"{m.name} at {inputs.dtype} does not fit on up to {max(f.tp for f in fits)} x {gpu.key} "
                "at this context: quantize (--quantization fp8, or an INT4 AWQ/GPTQ checkpoint; vLLM's --dtype has "
                "no fp8), --kv-cache-dtype fp8, a "
                "shorter --max-model-len, a bigger GPU, or pipeline parallelism across nodes."]
    if chosen_by_user and not fit.can_start:
        return [f"--tp {fit.tp} does not fit: {fit.reason}. The smallest TP that does is "
                f"{next(f.tp for f in fits if f.can_start)}."]
    if not fit.headroom_ok:
        return [f"little KV room at TP {fit.tp}: {fit.reason}. Expect queueing and preemption under "
                "load; a larger TP, --kv-cache-dtype fp8 or a smaller dtype frees room."]
    return []


def _length_warnings(inputs: PlanInputs, fit: kv_memory.TpFit, max_model_len: int) -> list[str]:
    """The context length against the model's positions, the KV cache and the requests planned for."""
    model_max = inputs.model.max_position_embeddings
    out: list[str] = []
    if inputs.max_model_len is not None and model_max is not None and inputs.max_model_len > model_max:
        out.append(f"--max-model-len {inputs.max_model_len} is beyond the model's "
                   f"{model_max} positions; vLLM refuses it.")
    if fit.can_start and inputs.max_model_len is None and model_max is not None and max_model_len < model_max:
        out.append(f"the KV cache holds at most {fit.max_seq_tokens or 0:,} tokens of one sequence, less "
                   f"than the model's {model_max:,}: pass --max-model-len {max_model_len} or vLLM will "
                   "refuse to start.")
    if inputs.context_tokens > max_model_len:
        out.append(f"requests of {inputs.context_tokens:,} tokens (input + output) exceed "
                   f"--max-model-len {max_model_len}; vLLM rejects them.")
    return out


def _hardware_warnings(inputs: PlanInputs, fit: kv_memory.TpFit, decode_at_batch: speed.DecodePoint) -> list[str]:
    """What the GPU lacks (FP8 tensor cores, NVLink, enough of them) and where the roofline binds."""
    m, gpu = inputs.model, inputs.gpu
    out: list[str] = []
    if inputs.dtype == "fp8" and not gpu.supports_fp8:
        out.append(f"{gpu.key} has no FP8 tensor cores: vLLM runs FP8 weights as weight-only (Marlin), "
                   "halving weight memory but computing in bf16.")
    if inputs.kv_storage_dtype == "fp8" and not gpu.supports_fp8:
        out.append(f"{gpu.key} has no FP8 tensor cores: an fp8 KV cache still halves KV memory, but is "
                   "converted in software.")
    if fit.tp > 1 and gpu.nvlink_bytes_per_s is None:
        out.append(f"{gpu.key} has no NVLink: TP {fit.tp} all-reduces over PCIe every layer, which the "
                   "roofline here does not charge for; prefer replicas of a smaller TP where it fits.")
    if inputs.num_gpus_available is not None and fit.tp > inputs.num_gpus_available:
        out.append(f"TP {fit.tp} needs {fit.tp} GPUs; the diagnosed host has {inputs.num_gpus_available}.")
    if m.kv_lora_rank is not None and fit.tp > 1:
        out.append("MLA keeps one latent KV cache that every TP rank holds in full; KV capacity does "
                   "not grow with TP (data-parallel attention is how vLLM scales it).")
    if decode_at_batch.limited_by == "compute":
        out.append(f"at batch {decode_at_batch.batch_size} decode is compute-bound on {gpu.key}: "
                   "a larger batch adds latency without adding throughput.")
    return out


def _step_parts(inputs: PlanInputs, tp: int, batch: int, context_tokens: float) -> tuple[float, float]:
    d = speed.decode_point(inputs, tp, batch, context_tokens)
    return d.memory_s / inputs.mbu, d.compute_s / inputs.mfu


def build_plan(inputs: PlanInputs) -> dict[str, Any]:
    m, gpu = inputs.model, inputs.gpu
    max_len_checked = inputs.max_model_len or inputs.context_tokens
    min_seqs = min(A.DEFAULT_MIN_CONCURRENT_SEQS, inputs.max_num_seqs)
    fits = [kv_memory.fit_for_tp(inputs, tp, min_seqs, max_len_checked) for tp in kv_memory.tp_candidates(inputs)]
    valid = [f for f in fits if f.valid]
    recommended = kv_memory.choose_tp(valid)
    if inputs.tp is not None:
        fit = next(f for f in fits if f.tp == inputs.tp)
    else:
        fit = recommended or valid[-1]
    max_model_len = kv_memory.suggested_max_model_len(inputs, fit)

    batch = max(1, min(fit.kv_capacity_seqs, inputs.max_num_seqs))
    decode_ctx = inputs.input_len + inputs.output_len / 2
    bs1 = speed.decode_point(inputs, fit.tp, 1, decode_ctx)
    at_batch = speed.decode_point(inputs, fit.tp, batch, decode_ctx)
    prefill = speed.prefill_point(inputs, fit.tp)
    # Fleet, cost and a command only for a configuration vLLM would start; the speed bounds stand anyway.
    fleet = cost = command = None
    flags: list[str] = []
    if fit.can_start:
        sized = size_fleet(prefill, at_batch, inputs.output_len, fit.tp, inputs.qps, inputs.concurrency,
                           inputs.mbu, inputs.mfu, lambda b: _step_parts(inputs, fit.tp, b, decode_ctx))
        fleet = sized.as_dict()
        if inputs.price_per_gpu_hour is not None:
            bs1_tok_s = inputs.output_len / (prefill.expected_ttft_ms / 1e3
                                             + inputs.output_len * bs1.step_s_expected)
            cost = cost_of(sized, bs1_tok_s, inputs.output_len, inputs.price_per_gpu_hour,
                           inputs.api_price_per_mtok).as_dict()
        max_num_seqs = F.suggested_max_num_seqs(fit.kv_capacity_seqs, inputs.max_num_seqs)
        flags = F.vllm_flags(inputs, fit.tp, max_model_len, max_num_seqs)
        command = F.vllm_command(m.hf_id or m.name, flags)
    flops = specs.tensor_flops_per_s(gpu, speed.compute_dtype(inputs.dtype))
    # The formula, stated on its own terms: B x BW / (W + B x ctx x kv) for the whole group.
    formula_bs1 = roofline.decode_tokens_per_s_bound(
        1, gpu.hbm_bandwidth_bytes_per_s * fit.tp, speed.weight_bytes_read(m, inputs.dtype, 1), decode_ctx,
        m.kv_bytes_per_token(inputs.kv_storage_dtype) * fit.tp / kv_memory.kv_shards(m, fit.tp))
    return {
        "inputs": inputs.as_dict(),
        "gpu": gpu.as_dict(),
        "model": _model_section(inputs, max_model_len),
        "memory": {
            **fit.as_dict(),
            "fits": fit.can_start,
            "kv_capacity_seqs_at_max_model_len": int(max(fit.kv_budget_bytes_per_gpu, 0) // max(
                m.kv_bytes_per_sequence(max_model_len, inputs.kv_storage_dtype) / kv_memory.kv_shards(m, fit.tp), 1)),
            "max_model_len": max_model_len,
            "min_concurrent_seqs_for_headroom": min_seqs,
        },
        "tp_options": [f.as_dict() for f in fits],
        "recommended_tp": None if recommended is None else recommended.tp,
        "speed": {
            "decode_context_tokens": decode_ctx,
            "compute_dtype": speed.compute_dtype(inputs.dtype),
            "peak_flops_per_s": flops,
            "ridge_point_flops_per_byte": roofline.ridge_point_flops_per_byte(flops, gpu.hbm_bandwidth_bytes_per_s),
            "decode_bs1": bs1.as_dict(),
            "decode_at_batch": at_batch.as_dict(),
            "decode_bs1_memory_formula_tokens_per_s": formula_bs1,
            "prefill": prefill.as_dict(),
        },
        "fleet": fleet,
        "cost": cost,
        "vllm_flags": flags,
        "vllm_command": command,
        "vllm_notes": F.flag_notes(inputs),
        "assumptions": {
            "runtime_overhead_bytes_per_gpu": A.RUNTIME_OVERHEAD_BYTES,
            "max_num_batched_tokens": A.DEFAULT_MAX_NUM_BATCHED_TOKENS,
            "fleet_headroom_frac": A.DEFAULT_FLEET_HEADROOM_FRAC,
            "mbu": inputs.mbu, "mfu": inputs.mfu,
            "spec_kind": gpu.kind,
        },
        "warnings": _warnings(inputs, fit, valid, inputs.tp is not None, max_model_len, at_batch),
        "notes": list(inputs.notes),
    }
