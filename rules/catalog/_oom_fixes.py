"""ENG010's fixes, one per start-up phase: the knobs that free the memory that phase needed, with values from
the log's own numbers and settings. A knob whose value cannot be derived is named in words, never given a guessed
number; a fix that cannot fit (a memory share above KV007.max_gpu_memory_utilization) is not offered."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogEvent, LogsData
from triage.rules.base import MissingInput
from triage.rules.catalog._log_shared import configured
from triage.rules.context import Context

PHASE_WHY = {
    "weight_load": "the weights alone did not fit the GPU",
    "compile": "the profiling run (torch.compile over a full-size batch) did not fit after the weights",
    "kv_alloc": "after the weights and the profiling run, too little memory was left for the KV cache",
    "cuda_graph": "capturing CUDA graphs needed memory that the KV cache had already taken",
    "warmup": "the warm-up batch (vLLM's sampler over max_num_seqs requests, TGI's largest prefill) did not fit",
    "serving": "a batch outgrew the memory left beside the KV cache while serving",
    "process": "it struck before the first start-up phase the log shows",
}


def _half(value: Any) -> int | None:
    return max(1, int(value) // 2) if isinstance(value, (int, float)) and value > 1 else None


def _share(ctx: Context, logs: LogsData, step: float) -> tuple[float | None, Any]:
    """(the memory share moved by `step`, kept within (0.5, KV007.max_gpu_memory_utilization]), the current)."""
    current = configured(ctx, logs, "gpu_memory_utilization")
    if not isinstance(current, (int, float)):
        return None, None
    target = round(float(current) + step, 2)
    return (target if 0.5 <= target <= ctx.th("KV007.max_gpu_memory_utilization") else None), current


def _share_flag(ctx: Context) -> str:
    """The engine's memory-share flag at its version, named even where no value can be proposed."""
    engine = ctx.engine()
    module = engine.module
    spec = module.knob("gpu_memory_utilization", engine.version) if module is not None else None
    return getattr(spec, "flag", None) or "its memory-share setting"


def _gpu_count(ctx: Context) -> int | None:
    try:
        return len(ctx.gpus())
    except MissingInput:
        return None


def _weights(ctx: Context, logs: LogsData, knobs: dict[str, object], why: list[str]) -> None:
    """More GPUs, where the host has them (a log alone does not say: then it is conditional), or fewer bytes per
    weight from a checkpoint quantized ahead of time; online quantization only where the engine's version applies
    it while loading (its knob `quantization_fp8_online` says per version)."""
    tp = int(configured(ctx, logs, "tensor_parallel_size") or 1)
    gpus = _gpu_count(ctx)
    if gpus is None or gpus >= 2 * tp:
        knobs.update(tensor_parallel_size=2 * tp)
        why.append(f"split the weights over {2 * tp} GPUs" + (" (if the host has them)" if gpus is None else ""))
    else:
        why.append(f"this host has {gpus} GPU(s), too few to split the weights {2 * tp} ways")
    knobs.update(quantization_fp8_online=None)   # per version: a working command, or why not (vllm.py)
    why.append("serve a checkpoint quantized ahead of time (FP8, AWQ, GPTQ)")


def _batch(ctx: Context, logs: LogsData, knobs: dict[str, object], why: list[str], keys: tuple[str, ...]) -> None:
    for key in keys:
        value = _half(configured(ctx, logs, key))
        if value is not None:
            knobs.update({key: value})
            why.append(f"halve {key} to {value}")
        else:
            why.append(f"lower {key} (its value is not in the log)")


def _llamacpp(phase: str) -> list[str]:
    """llama.cpp and Ollama (whose runner is llama.cpp): no flag table, so the fix is said in words (claims
    llamacpp.flag-n-gpu-layers, llamacpp.n-gpu-layers-auto, llamacpp.flag-ctx-size)."""
    layers = ("keep fewer layers on the GPU (llama-server -ngl N; its default, auto, fits what the GPU holds) or "
              "use a smaller quantization of the model")
    ctx = "shrink the context (llama-server -c N): its KV cache grows with it"
    return [layers] if phase == "weight_load" else [ctx, layers]


def _more_share(ctx: Context, logs: LogsData, event: LogEvent, knobs: dict[str, object], why: list[str],
                evidence: dict[str, Any]) -> None:
    share, now = _share(ctx, logs, +0.05)
    if share is not None:
        knobs.update(gpu_memory_utilization=f"{share:.2f}")
        evidence["derived.memory_share_now"] = now
    why.append(f"give the KV cache more of the GPU ({_share_flag(ctx)})" + ("" if share is not None else
               ", by how much the log does not say: its current value is not in it, or a step up would pass "
               f"{ctx.th('KV007.max_gpu_memory_utilization'):.2f}") + "; or free memory: fewer bytes per weight "
               "or more GPUs")


def _graphs(ctx: Context, logs: LogsData, event: LogEvent, knobs: dict[str, object], why: list[str],
            evidence: dict[str, Any]) -> None:
    share, now = _share(ctx, logs, -0.05)
    if share is not None:
        knobs.update(gpu_memory_utilization=f"{share:.2f}")
        evidence["derived.memory_share_now"] = now
    knobs.update(eager_mode=None)
    why.append("leave room for the graphs with a lower memory share, or start without CUDA graphs (slower "
               "decode, faster start)")


def _warmup(ctx: Context, logs: LogsData, event: LogEvent, knobs: dict[str, object], why: list[str],
            evidence: dict[str, Any]) -> None:
    if event.batch_tokens:
        knobs.update(max_num_batched_tokens=event.batch_tokens // 2)
        why.append(f"halve the largest prefill to {event.batch_tokens // 2} tokens")
    elif event.sequences and event.sequences > 1:
        knobs.update(max_num_seqs=event.sequences // 2)
        why.append(f"halve the sequences run at once to {event.sequences // 2} (the sampler warmed up "
                   f"{event.sequences} dummy requests)")
    else:
        _batch(ctx, logs, knobs, why, ("max_num_seqs",))


def _by_phase(phase: str, event: LogEvent):
    """The fix builder for the phase the memory ran out in (an engine's own 'no memory for the KV cache' error
    asks for more of the GPU whatever the phase)."""
    if event.fact == "no_cache_memory" or (event.fact == "startup_failure" and phase == "kv_alloc"):
        return _more_share
    if phase == "weight_load":
        return lambda ctx, logs, event, knobs, why, evidence: _weights(ctx, logs, knobs, why)
    if phase == "cuda_graph":
        return _graphs
    if phase == "warmup":
        return _warmup
    keys = ("max_num_batched_tokens",) if phase in ("compile", "kv_alloc") else ("max_num_seqs", "max_model_len")
    return lambda ctx, logs, event, knobs, why, evidence: _batch(ctx, logs, knobs, why, keys)


def oom_relief(ctx: Context, logs: LogsData, event: LogEvent, phase: str,
               evidence: dict[str, Any]) -> tuple[dict[str, object], list[str]]:
    knobs: dict[str, object] = {}
    why: list[str] = []
    module = ctx.engine().module
    if module is not None and module.launcher is None:
        return knobs, _llamacpp(phase)
    _by_phase(phase, event)(ctx, logs, event, knobs, why, evidence)
    return knobs, why
