"""LMDeploy: recognised by its command line and `lmdeploy:*` metrics (lmdeploy/metrics/loggers.py)."""
from __future__ import annotations

from triage.engines.base import Engine, Identity, Launch
from triage.engines.metrics import vllm_shaped
from triage.engines.registry import register

LMDEPLOY = register(Engine(
    name="lmdeploy", display="LMDeploy", metrics=vllm_shaped("lmdeploy:"),
    identity=Identity(metric_prefixes=("lmdeploy:",), launches=(Launch("lmdeploy", ("serve",)),),
                      source="InternLM/lmdeploy lmdeploy/metrics/loggers.py (lmdeploy:num_requests_running, ...)"),
))
