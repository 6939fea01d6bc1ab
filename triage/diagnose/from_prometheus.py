"""`triage diagnose --prometheus URL`: the rules on a window of the engine's metrics history, and what
changed against the same window `--against` earlier (probes/prometheus_history.py reads it)."""
from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from triage.core.errors import UsageError
from triage.core.probe_data import PromHistoryData
from triage.core.report import ReportKind, Target, new_report
from triage.core.snapshot import Snapshot
from triage.diagnose.pipeline import DiagnoseResult, Discovery, run_rules
from triage.probes.host import host_info
from triage.probes.prometheus_history import probe_history
from triage.rules import RulesConfig

# The signals the "what changed" table shows, in order, with their unit for display.
CHANGE_ROWS = (
    ("ttft_p50_s", "TTFT p50", "ms"), ("ttft_p99_s", "TTFT p99", "ms"), ("tpot_p99_s", "TPOT p99", "ms"),
    ("queue_time_p99_s", "queue time p99", "ms"), ("e2e_p99_s", "end-to-end p99", "ms"),
    ("requests_per_s", "requests/s", ""), ("prompt_tokens_per_request", "prompt tokens/request", ""),
    ("generation_tokens_per_s", "output tokens/s", ""), ("requests_waiting_mean", "waiting (mean)", ""),
    ("kv_cache_usage_mean", "KV usage (mean)", "%"), ("preemptions_per_s", "preemptions/s", ""),
    ("gpu_sm_clock_mhz_mean", "GPU SM clock", "MHz"), ("gpu_power_w_mean", "GPU power", "W"),
    ("gpu_temp_c_max", "GPU temperature (max)", "C"), ("gpu_clock_event_reasons_max", "GPU clock-event bits", "hex"),
)


def parse_at(text: str | None) -> float | None:
    """--at: Unix seconds or an ISO 8601 time (UTC unless it says otherwise); None -> now."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--at {text!r}: expected Unix seconds or an ISO 8601 time like 2026-11-24T10:00:00Z") from None
    if stamp.tzinfo is None:
        from datetime import timezone

        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def diagnose_history(url: str, window_s: float, against_s: float, at_epoch_s: float | None = None,
                     selector: str = "", gpu_selector: str = "", rules_config: RulesConfig | None = None,
                     query: Any = None) -> DiagnoseResult:
    probes = probe_history(url, window_s, against_s, at_epoch_s, selector, gpu_selector, query=query)
    snapshot = Snapshot(probes=tuple(probes), window_s=window_s)
    findings, skipped = run_rules(snapshot, None, rules_config)
    history = snapshot.payload(PromHistoryData)
    engine = history.engine if history else None
    report = new_report(ReportKind.DIAGNOSE, host_info(()), Target(url=history.url if history else None,
                                                                   engine=engine),
                        probes=snapshot.probes, findings=findings, skipped_rules=skipped)
    at = history.at_epoch_s if history and history.at_epoch_s else time.time()
    note = (f"from {history.url if history else url}: {engine or 'no engine'} series over the "
            f"{window_s / 3600:g} h before {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(at))}, against the "
            f"same window {against_s / 86400:g} days earlier" + (f", matching {selector}" if selector else ""))
    return DiagnoseResult(report=report, snapshot=snapshot, discovery=Discovery(url=None, how="prometheus", note=note))


def _show(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value * 1000:.0f} ms"
    if unit == "%":
        return f"{value * 100:.0f}%"
    if unit == "hex":
        return f"0x{int(value):x}"
    return f"{value:,.1f}" + (f" {unit}" if unit else "")


def change_rows(snapshot: Snapshot) -> list[dict[str, str]]:
    """The "what changed" table: each signal now, then, and the change."""
    history = snapshot.payload(PromHistoryData)
    if history is None or history.now is None:
        return []
    rows = []
    for key, label, unit in CHANGE_ROWS:
        now, then = history.now.get(key), (history.then or {}).get(key)
        if now is None and then is None:
            continue
        change = "-"
        if now is not None and then not in (None, 0) and unit != "hex":
            change = f"{(now / then - 1) * 100:+.0f}%"
        elif unit == "hex" and now is not None and then is not None and now != then:
            change = "changed"
        rows.append({"signal": label, "now": _show(now, unit), "then": _show(then, unit), "change": change})
    return rows
