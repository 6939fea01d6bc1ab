"""TensorRT-LLM's `trtllm-serve`: recognised by its command line, `/version` and `tensorrt_llm:*` metrics."""
from __future__ import annotations

from triage.engines.base import Engine, Identity, Launch
from triage.engines.metrics import vllm_shaped
from triage.engines.registry import register

TRTLLM = register(Engine(
    name="trtllm", display="TensorRT-LLM trtllm-serve", aliases=("tensorrt-llm", "tensorrt_llm", "trtllm-serve"),
    metrics=vllm_shaped("tensorrt_llm:"),
    identity=Identity(metric_prefixes=("tensorrt_llm:", "trtllm_"), version_path="/version",
                      launches=(Launch("trtllm-serve"),),
                      source="NVIDIA/TensorRT-LLM docs/source/commands/trtllm-serve.rst (/health, /metrics, /version); "
                             "tensorrt_llm/serve/metrics/metrics.py (tensorrt_llm:* names)"),
))
