"""`prometheus_history` (probes/prometheus_history.py): the engine's and the GPUs' signals over a window,
read from the user's Prometheus by `triage diagnose --prometheus`, now and the same window `--against`
earlier. Signal names: probes/history_queries.py (latencies in seconds, rates per second, usage 0..1)."""
from __future__ import annotations

from triage.core.probe_data.base import Payload, payload


@payload
class PromHistoryData(Payload):
    PROBE = "prometheus_history"

    url: str | None = None                          # the Prometheus, redacted
    engine: str | None = None                       # vllm | sglang | tgi | llama.cpp, from the series present
    selector: str | None = None                     # the label matcher applied to the engine's series
    window_s: float | None = None
    against_s: float | None = None                  # how far back the comparison window lies
    at_epoch_s: float | None = None                 # the end of the current window
    now: dict[str, float | None] | None = None      # signal -> value over [at - window, at]
    then: dict[str, float | None] | None = None     # the same, `against` earlier
    missing: tuple[str, ...] = ()                   # signals with no series in either window
