"""TensorRT-LLM's `trtllm-serve`: recognised by its command line, `/version` and `trtllm_*` metrics."""
from __future__ import annotations

from triage.engines.base import Engine, Identity, Launch
from triage.engines.metrics import vllm_shaped
from triage.engines.registry import register

TRTLLM = register(Engine(
    name="trtllm", display="TensorRT-LLM trtllm-serve", aliases=("tensorrt-llm", "tensorrt_llm", "trtllm-serve"),
    # Every series is prefixed trtllm_ (claim trtllm.metric-prefix); KV usage is trtllm_kv_cache_utilization, and
    # nothing counts preemptions. The collector's docstrings say the per-request series need return_perf_metrics and
    # the gauges enable_iter_perf_stats.
    metrics=vllm_shaped("trtllm_", "kv_cache_utilization", (
        "trtllm.metric-prefix", "trtllm.metric-kv-cache-utilization", "trtllm.metric-num-requests-running-waiting",
        "trtllm.metric-prompt-generation-tokens-total", "trtllm.metric-time-to-first-token-seconds",
        "trtllm.metric-time-per-output-token-seconds", "trtllm.metric-e2e-request-latency-seconds",
        "trtllm.metric-request-queue-time-seconds", "trtllm.metric-request-prefill-time-seconds",
        "trtllm.metric-request-decode-time-seconds")),
    identity=Identity(metric_prefixes=("trtllm_", "tensorrt_llm:"), version_path="/version",
                      launches=(Launch("trtllm-serve"),),
                      source="NVIDIA/TensorRT-LLM docs/source/commands/trtllm-serve.rst (/health, /metrics, /version); "
                             "tensorrt_llm/metrics/collector.py (trtllm_* names)"),
))
