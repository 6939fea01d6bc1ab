"""ENG012 (partial-gpu-offload): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG012/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._log_shared import need_engine_log
from triage.rules.context import Context
from triage.rules.fmt import gib
from triage.rules.registry import rule


@rule("ENG012", "partial-gpu-offload", Severity.HIGH, ("logs",), RuleDoc(
    what="llama.cpp (llama-server, or Ollama's runner) put only some of the model's layers on the GPU: its log "
         "says 'offloaded N/M layers to GPU' with N < M while it found a CUDA device (or Ollama's offload line "
         "says layers.offload < layers.model). A build with no GPU backend is not judged.",
    why="Every token passes through every layer, so the layers left on the CPU set the decode speed: the GPU "
        "finishes its share and waits, utilisation looks low, and tokens/s fall to what host memory bandwidth "
        "allows. Two of 33 layers on the CPU already leave the GPU mostly idle.",
    example="logs.gpu_layers_offloaded = 30, logs.gpu_layers_total = 81, logs.gpu_devices = 1",
    fix="Make the whole model fit: a smaller context (its KV cache), a smaller quantization, or more GPUs; where "
        "the log shows memory to spare, ask for every layer (llama-server -ngl all).",
    references=("claim:llamacpp.log-offloaded", "claim:llamacpp.log-cuda-devices", "claim:ollama.log-offload-0.5",
                "claim:ollama.log-offload-keys-0.5", "claim:llamacpp.flag-n-gpu-layers",
                "claim:llamacpp.n-gpu-layers-auto", "claim:llamacpp.flag-ctx-size", "claim:llamacpp.flag-fit",
                "claim:ollama.options-num-ctx-num-gpu-0.5", "claim:ollama.options-num-ctx-num-gpu"),
))
def eng012(ctx: Context) -> Hit | None:
    logs = need_engine_log(ctx)
    on_gpu, total = logs.gpu_layers_offloaded, logs.gpu_layers_total
    if on_gpu is None or not total:
        raise MissingInput("the log states no layer offload (llama.cpp's and Ollama's do)")
    if on_gpu >= total:
        return None
    if on_gpu == 0 and not logs.gpu_devices and logs.offload_available_bytes is None:
        return None                     # a CPU-only build: nothing was meant for a GPU
    evidence: dict[str, Any] = {"logs.gpu_layers_offloaded": on_gpu, "logs.gpu_layers_total": total}
    for key in ("gpu_devices", "offload_available_bytes", "offload_required_bytes", "offload_kv_bytes"):
        if getattr(logs, key) is not None:
            evidence[f"logs.{key}"] = getattr(logs, key)
    return Hit(
        title="Part of the model runs on the CPU",
        message=f"Only {on_gpu} of {total} layers are on the GPU: the other {total - on_gpu} run on the CPU and "
                "set the decode speed.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.8,
        fix=Fix(_fix_text(logs, on_gpu)),
    )


def _fix_text(logs: LogsData, on_gpu: int) -> str:
    """What can make it fit, from Ollama's own estimate where the log has it: more layers are offered only when
    the memory is there."""
    need, have, kv = logs.offload_required_bytes, logs.offload_available_bytes, logs.offload_kv_bytes
    fit = "Make the whole model fit the GPU memory: a smaller context (llama-server -c N; Ollama's num_ctx), whose " \
          "KV cache grows with it, a smaller quantization of the model, or more GPUs"
    if need is not None and have is not None and need > have:
        short = need - have
        kv_note = f"; the KV cache for this context is {gib(kv)}" if kv else ""
        return (f"Every layer with this context needs {gib(need)}, the GPUs offer {gib(have)} ({gib(short)} short"
                f"{kv_note}). {fit}.")
    if need is not None and have is not None:
        return (f"Every layer needs {gib(need)} and the GPUs offer {gib(have)}: ask for all of them (llama-server "
                "-ngl all; Ollama's num_gpu option) and check that nothing else holds the GPU.")
    if on_gpu == 0:
        return ("No layer is on the GPU although the backend found one: ask for them (llama-server -ngl all, or "
                f"a number that fits; its default, auto, fits what the GPU holds). {fit}.")
    return f"{fit}; where memory is left over, raise -ngl."
