"""The PromQL `diagnose --prometheus` runs, per engine. Every engine metric name comes from that engine's
source: vLLM, SGLang and TGI through the engine-truth tables (tests/test_history_queries.py checks each
name against them), llama.cpp from tools/server/server.cpp (its module in triage/engines/), and the GPU from
dcgm-exporter's DCGM fields (DCGM_FI_DEV_CLOCKS_EVENT_REASONS is field 112, the DCGM >= 3.3 name of
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS; both are tried).

Templates take `{sel}` (the label matcher, e.g. `{instance="10.0.0.5:8000"}` or empty) and `{w}` (the
window, e.g. `1h`). Each query returns one number for the window.
"""
from __future__ import annotations

from triage.engines import engines
from triage.engines import promql as pq

# Which engine a Prometheus holds, by a metric only that engine exports (checked in registry order), and
# signal -> PromQL per engine: each engine module declares both (triage/engines/).
ENGINE_MARKERS = tuple((e.name, (e.history_marker,)) for e in engines() if e.history_marker)
ENGINE_QUERIES: dict[str, dict[str, str]] = {e.name: dict(e.history_queries) for e in engines() if e.history_queries}

GPU_QUERIES = {   # dcgm-exporter; {sel} here is the --gpu-selector
    "gpu_sm_clock_mhz_mean": pq.mean_of("DCGM_FI_DEV_SM_CLOCK"),
    "gpu_sm_clock_mhz_min": "min(" + "min_over_time(DCGM_FI_DEV_SM_CLOCK{sel}[{w}])" + ")",
    "gpu_power_w_mean": pq.mean_of("DCGM_FI_DEV_POWER_USAGE"),
    "gpu_temp_c_max": pq.peak("DCGM_FI_DEV_GPU_TEMP"),
    "gpu_clock_event_reasons_max": pq.peak("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
}


def render(template: str, selector: str, window: str) -> str:
    sel = "{" + selector.strip().strip("{}") + "}" if selector and selector.strip().strip("{}") else ""
    return template.replace("{sel}", sel).replace("{w}", window)
