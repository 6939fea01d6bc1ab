"""A `curl .../metrics` dump (one scrape, or two taken some time apart) -> the `server_metrics` payload, through
each engine's metric map (probes/prom.py), as the live probe builds it (probes/metrics_window.py).

- One dump: the gauges (KV usage, running, waiting) at that moment, and the counters and histograms as totals
  since the server started; no rate, and `window_s` is None.
- Two dumps: the window between them. Its length comes from the samples' own timestamps when the exposition
  carries them, else from the caller (`diagnose --dumps-apart-s`); without either, deltas but no rates.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import fields

from triage.core.errors import ReportError
from triage.core.probe_data import ServerMetricsData
from triage.probes.metrics_window import window_delta
from triage.probes.prom import EngineMetrics, normalise, parse_metrics

_TIMESTAMP = re.compile(r"^[a-zA-Z_:][\w:]*(?:\{[^}]*\})?\s+\S+\s+(\d{10,16})\s*$", re.M)
_COUNTERS = tuple(f.name for f in fields(EngineMetrics) if f.name.endswith("_total"))


def _scrape(text: str, label: str) -> tuple[EngineMetrics, int, float | None]:
    sample = parse_metrics(text)
    metrics = normalise(sample)
    if metrics.engine is None:
        raise ReportError(f"{label}: a /metrics dump with no metric name of an engine triage knows")
    stamps = [int(m.group(1)) for m in _TIMESTAMP.finditer(text)]
    stamp_s = max(stamps) / 1000.0 if stamps else None
    return metrics, sample.num_bad_lines, stamp_s


def _since_start(after: EngineMetrics) -> EngineMetrics:
    """A scrape of the same server at its start: every counter 0 and no histogram, so the deltas are totals."""
    zeros = {name: 0.0 for name in _COUNTERS if getattr(after, name) is not None}
    return dataclasses.replace(after, histograms={}, **zeros)


def read_dumps(dumps: list[tuple[str, str]], window_s: float | None = None) -> tuple[ServerMetricsData, str]:
    """(the payload, what it is) from one or two (label, text) dumps, oldest first."""
    if not 1 <= len(dumps) <= 2:
        raise ReportError(f"give one or two /metrics dumps, not {len(dumps)}")
    scrapes = [_scrape(text, label) for label, text in dumps]
    bad = sum(b for _, b, _ in scrapes)
    if len(scrapes) == 1:
        after = scrapes[0][0]
        data = window_delta(_since_start(after), after, 0.0, num_bad_lines=bad)
        return (dataclasses.replace(data, window_s=None, num_scrapes=1),
                "one scrape: gauges now, counters and histograms since the server started, no rates")
    (before, _, t0), (after, _, t1) = scrapes
    if before.engine != after.engine:
        raise ReportError(f"the two /metrics dumps come from different engines ({before.engine}, {after.engine})")
    how = "the samples' timestamps"
    if t0 is not None and t1 is not None and t1 > t0:
        window_s = t1 - t0
    elif window_s is None:
        how = "no time between them was given (--dumps-apart-s): deltas, no rates"
    else:
        how = "the time given with --dumps-apart-s"
    data = window_delta(before, after, window_s or 0.0, num_bad_lines=bad)
    return (dataclasses.replace(data, window_s=window_s, num_scrapes=2),
            f"two scrapes {window_s:.0f} s apart ({how})" if window_s else f"two scrapes ({how})")
