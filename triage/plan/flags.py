"""The `vllm serve` command line the plan suggests starting from."""
from __future__ import annotations

import shlex

from triage.plan import assumptions as A
from triage.plan.inputs import PlanInputs

_VLLM_DTYPE = {"fp16": "float16"}


def suggested_max_num_seqs(kv_capacity_seqs: int, cap: int) -> int:
    """As many sequences as the KV cache holds at the planned length, at most `cap`; a multiple of 8
    above 8, matching vLLM's CUDA-graph batch sizes."""
    n = max(1, min(kv_capacity_seqs, cap))
    return n if n < 8 else n // 8 * 8


def vllm_flags(inputs: PlanInputs, tp: int, max_model_len: int, max_num_seqs: int) -> list[str]:
    flags = [
        "--tensor-parallel-size", str(tp),
        "--dtype", _VLLM_DTYPE.get(inputs.dtype, "bfloat16"),
    ]
    if inputs.dtype == "fp8":
        flags += ["--quantization", "fp8"]
    if inputs.kv_cache_dtype != "auto":
        flags += ["--kv-cache-dtype", inputs.kv_cache_dtype]
    flags += [
        "--max-model-len", str(max_model_len),
        "--gpu-memory-utilization", f"{inputs.gpu_memory_utilization:g}",
        "--max-num-seqs", str(max_num_seqs),
        "--max-num-batched-tokens", str(A.DEFAULT_MAX_NUM_BATCHED_TOKENS),
    ]
    # Prefix caching and chunked prefill are on by default since vLLM 0.8 (the V1 engine): the command
    # does not repeat defaults; flag_notes() names them for older versions.
    return flags


def flag_notes(inputs: PlanInputs) -> list[str]:
    notes = ["Prefix caching and chunked prefill are on by default in vLLM >= 0.8; on an older vLLM add "
             "--enable-prefix-caching --enable-chunked-prefill."]
    if inputs.dtype == "int4":
        notes.append("int4: serve an AWQ or GPTQ 4-bit checkpoint of this model; vLLM reads the "
                     "quantization method from its config (no --quantization flag needed).")
    if inputs.dtype == "int8":
        notes.append("int8: serve a W8A8 (compressed-tensors) checkpoint of this model; vLLM reads "
                     "the quantization method from its config.")
    if inputs.dtype == "fp8":
        notes.append("fp8: --quantization fp8 quantizes a bf16 checkpoint at load time; a pre-quantized "
                     "FP8 checkpoint also works without the flag.")
    return notes


def vllm_command(model_id: str, flags: list[str]) -> str:
    parts = ["vllm", "serve", model_id, *flags]
    return " ".join(shlex.quote(p) for p in parts)
