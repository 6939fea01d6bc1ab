"""LMDeploy: recognised by its command line and `lmdeploy:*` metrics (lmdeploy/metrics/loggers.py)."""
from __future__ import annotations

from triage.engines.base import Engine, Identity, Launch
from triage.engines.metrics import vllm_shaped
from triage.engines.registry import register

LMDEPLOY = register(Engine(
    name="lmdeploy", display="LMDeploy",
    # From 0.9.2, opt-in (--enable-metrics) there and on by default by 0.18.0; no preemption count.
    metrics=vllm_shaped("lmdeploy:", "gpu_cache_usage_perc", (
        "lmdeploy.metric-gpu-cache-usage-perc", "lmdeploy.metric-num-requests-running-waiting",
        "lmdeploy.metric-prompt-generation-tokens-total", "lmdeploy.metric-time-to-first-token-seconds",
        "lmdeploy.metric-time-per-output-token-seconds", "lmdeploy.metric-e2e-latency-queue-time-seconds",
        "lmdeploy.metric-prefill-decode-time-seconds")),
    identity=Identity(metric_prefixes=("lmdeploy:",), launches=(Launch("lmdeploy", ("serve",)),),
                      source="InternLM/lmdeploy lmdeploy/metrics/loggers.py (lmdeploy:num_requests_running, ...)"),
))
