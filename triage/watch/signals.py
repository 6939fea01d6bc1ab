"""One watch cycle as Prometheus samples: findings, probe status, skipped rules and the key signals the
rules read (KV usage, queue, preemptions, TTFT p99, GPU clocks, throttle reasons, PCIe link). Pure: a
report and its snapshot in, samples out; exporter.py serves them."""
from __future__ import annotations

from dataclasses import dataclass, field

from triage.core.probe_data import GpuData, ServerMetricsData
from triage.core.report import Report
from triage.core.snapshot import ProbeStatus, Snapshot

# triage_probe_status values (docs/WATCH.md).
PROBE_OK, PROBE_FAILED, PROBE_NOT_APPLICABLE = 1.0, 0.0, -1.0
_NOT_APPLICABLE = {ProbeStatus.UNSUPPORTED}


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family: name, help, type ('gauge'), label names and (label values, value) samples."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    samples: tuple[tuple[tuple[str, ...], float], ...] = field(default_factory=tuple)


# The key signals: (metric name, help, payload attribute) for the server's /metrics window.
SERVER_SIGNALS = (
    ("triage_kv_cache_usage_ratio", "KV cache usage at the end of the window, 0..1", "kv_cache_usage_frac"),
    ("triage_requests_running", "Requests the engine is running", "num_requests_running"),
    ("triage_requests_waiting", "Requests waiting in the engine's queue", "num_requests_waiting"),
    ("triage_preemptions_per_second", "Preemptions (SGLang: retractions) per second over the window",
     "preemptions_per_s"),
)
# Per-GPU signals: (metric name, help, GpuDevice attribute).
GPU_SIGNALS = (
    ("triage_gpu_sm_clock_mhz", "SM clock", "sm_clock_mhz"),
    ("triage_gpu_sm_clock_max_mhz", "Maximum SM clock", "sm_clock_max_mhz"),
    ("triage_gpu_clock_event_reasons", "NVML clock event (throttle) reasons bitmask", "clock_event_reasons_bitmask"),
    ("triage_gpu_power_watts", "Power draw", "power_usage_w"),
    ("triage_gpu_temperature_celsius", "GPU temperature", "temperature_c"),
    ("triage_gpu_pcie_link_gen", "Current PCIe link generation", "pcie_link_gen_current"),
    ("triage_gpu_pcie_link_gen_max", "Maximum PCIe link generation", "pcie_link_gen_max"),
    ("triage_gpu_pcie_link_width", "Current PCIe link width (lanes)", "pcie_link_width_current"),
    ("triage_gpu_pcie_link_width_max", "Maximum PCIe link width (lanes)", "pcie_link_width_max"),
)


def findings_family(report: Report) -> Family:
    engine = report.target.engine or ""
    model = report.target.model or ""
    samples = tuple(((f.code, f.severity.value, f.certainty.value, engine, model), 1.0) for f in report.findings)
    return Family("triage_finding", "1 while triage's rule CODE fires on the watched server",
                  ("code", "severity", "certainty", "engine", "model"), samples)


def probe_status_family(snapshot: Snapshot) -> Family:
    def value(status: ProbeStatus) -> float:
        if status is ProbeStatus.OK:
            return PROBE_OK
        return PROBE_NOT_APPLICABLE if status in _NOT_APPLICABLE else PROBE_FAILED

    return Family("triage_probe_status", "1 the probe ran, 0 it failed (error, timeout, permission), "
                  "-1 it does not apply here", ("probe",),
                  tuple(((p.name,), value(p.status)) for p in snapshot.probes))


def skipped_family(report: Report) -> Family:
    return Family("triage_rule_skipped", "1 when a rule could not run for lack of input (reason in the report)",
                  ("code",), tuple(((s.code,), 1.0) for s in report.skipped_rules))


def server_families(snapshot: Snapshot) -> list[Family]:
    metrics = snapshot.payload(ServerMetricsData)
    if metrics is None:
        return []
    out = []
    for name, help_text, attr in SERVER_SIGNALS:
        value = getattr(metrics, attr)
        if value is not None:
            out.append(Family(name, help_text, (), (((), float(value)),)))
    ttft = metrics.histograms.ttft_s if metrics.histograms is not None else None
    if ttft is not None and ttft.p99_s is not None:
        out.append(Family("triage_ttft_p99_seconds", "TTFT p99 from the server's histogram over the window", (),
                          (((), float(ttft.p99_s)),)))
    return out


def gpu_families(snapshot: Snapshot) -> list[Family]:
    data = snapshot.payload(GpuData)
    if data is None:
        return []
    out = []
    for name, help_text, attr in GPU_SIGNALS:
        samples = tuple(((str(g.index), g.uuid or ""), float(getattr(g, attr))) for g in data.gpus
                        if g.index is not None and getattr(g, attr) is not None)
        if samples:
            out.append(Family(name, help_text, ("gpu", "uuid"), samples))
    return out


def cycle_families(report: Report, snapshot: Snapshot) -> list[Family]:
    """Everything one cycle exports, in a stable order."""
    return [findings_family(report), probe_status_family(snapshot), skipped_family(report),
            *server_families(snapshot), *gpu_families(snapshot)]
