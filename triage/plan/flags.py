"""The `vllm serve` command line the plan suggests starting from."""
from __future__ import annotations

import shlex

import triage.engines.truth as engine_truth
from triage.engines import Knob
from triage.plan import assumptions as A
from triage.plan.inputs import PlanInputs

_VLLM_DTYPE = {"fp16": "float16"}
# triage's short names -> vLLM's spellings (vllm/config/cache.py CacheDType: "bf16" is rejected).
_VLLM_KV_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


def checked(flags: list[str], version: str | None = None) -> tuple[list[str], list[str]]:
    """(the flags vLLM `version` accepts, why each dropped one was dropped). Pairs: flag, value."""
    t = engine_truth.table(A.PLAN_ENGINE.name, version)
    if t is None:
        return flags, []
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(flags):
        name = flags[i]
        spec = t.flag(name)
        value = flags[i + 1] if spec is not None and spec.takes_value and i + 1 < len(flags) else None
        problem = t.check(name, value)
        if problem is None:
            kept += [name] + ([value] if value is not None else [])
        else:
            dropped.append(problem)
        i += 2 if value is not None else 1
    return kept, dropped


def suggested_max_num_seqs(kv_capacity_seqs: int, cap: int) -> int:
    """As many sequences as the KV cache holds at the planned length, at most `cap`; a multiple of 8
    above 8, matching vLLM's CUDA-graph batch sizes."""
    n = max(1, min(kv_capacity_seqs, cap))
    return n if n < 8 else n // 8 * 8


def vllm_flags(inputs: PlanInputs, tp: int, max_model_len: int, max_num_seqs: int) -> list[str]:
    flags = [
        _flag("tensor_parallel_size"), str(tp),
        _flag("dtype"), _VLLM_DTYPE.get(inputs.dtype, "bfloat16"),
    ]
    if inputs.dtype == "fp8":
        flags += _online_fp8()
    kv = _VLLM_KV_DTYPE.get(inputs.kv_cache_dtype, inputs.kv_cache_dtype)
    if kv != "auto" and kv != _VLLM_DTYPE.get(inputs.dtype, "bfloat16"):
        flags += [_flag("kv_cache_dtype_fp8"), kv]
    flags += [
        _flag("max_model_len"), str(max_model_len),
        _flag("gpu_memory_utilization"), f"{inputs.gpu_memory_utilization:g}",
        _flag("max_num_seqs"), str(max_num_seqs),
        _flag("max_num_batched_tokens"), str(A.DEFAULT_MAX_NUM_BATCHED_TOKENS),
    ]
    # Prefix caching and chunked prefill are on by default since vLLM 0.8 (the V1 engine): the command
    # does not repeat defaults; flag_notes() names them for older versions. Every flag is checked
    # against the newest tabled vLLM release (flag_notes() names it).
    return checked(flags, A.PLAN_VLLM_VERSION)[0]


def _flag(knob: str) -> str:
    """The engine's flag for `knob` at the planned release (triage/engines: the flags live with the engine)."""
    spec = A.PLAN_ENGINE.knob(knob, A.PLAN_VLLM_VERSION)
    if not isinstance(spec, Knob):
        raise LookupError(f"{A.PLAN_ENGINE.display} {A.PLAN_VLLM_VERSION} has no flag for {knob}")
    return spec.flag


def _online_fp8() -> list[str]:
    """The flag and value that quantize a 16-bit checkpoint to FP8 at load time in the planned release."""
    spec = A.PLAN_ENGINE.knob("quantization_fp8_online", A.PLAN_VLLM_VERSION)
    if isinstance(spec, Knob) and spec.value:
        return [spec.flag, spec.value]
    spec = A.PLAN_ENGINE.knob("quantization_fp8", A.PLAN_VLLM_VERSION)
    return [spec.flag, spec.value] if isinstance(spec, Knob) and spec.value else []


def flag_notes(inputs: PlanInputs) -> list[str]:
    notes = [f"Flags checked against vLLM {A.PLAN_VLLM_VERSION}'s own argument parser.",
             "Prefix caching and chunked prefill are on by default in vLLM >= 0.8 (prefix caching per model "
             "in newer releases: hybrid and pooling models differ); on an older vLLM add "
             "--enable-prefix-caching --enable-chunked-prefill."]
    if inputs.dtype == "int4":
        notes.append("int4: serve an AWQ or GPTQ 4-bit checkpoint of this model; vLLM reads the "
                     "quantization method from its config (no --quantization flag needed).")
    if inputs.dtype == "int8":
        notes.append("int8: serve a W8A8 (compressed-tensors) checkpoint of this model; vLLM reads "
                     "the quantization method from its config.")
    if inputs.dtype == "fp8":
        notes.append(f"fp8: {' '.join(_online_fp8())} quantizes a bf16 checkpoint at load time; a pre-quantized "
                     "FP8 checkpoint also works without the flag.")
    return notes


def vllm_command(model_id: str, flags: list[str]) -> str:
    parts = [*shlex.split(A.PLAN_ENGINE.launch_command(model_id) or model_id), *flags]
    return " ".join(shlex.quote(p) for p in parts)
