"""GPU002 (clock-throttling): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU002/."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.core.bench_data import LevelGpu
from triage.core.probe_data import GpuData, GpuDevice
from triage.core.report import BenchLevel, Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context, level_label
from triage.rules.fmt import pct
from triage.rules.registry import rule

_BAD_REASONS = {"hw_slowdown": Severity.HIGH, "hw_thermal_slowdown": Severity.HIGH,
                "hw_power_brake_slowdown": Severity.HIGH, "sw_thermal_slowdown": Severity.MEDIUM}


@rule("GPU002", "clock-throttling", Severity.HIGH, ("gpu|bench",), RuleDoc(
    what="While the GPU is busy, a hardware slowdown, hardware thermal slowdown, power-brake or software "
         "thermal clock event is active, or NVML's thermal/board/reliability throttle-time counters grew "
         "during the window. Software power capping at full load is normal and not counted.",
    why="A throttled GPU runs its SMs and often its memory at a fraction of their clocks: every kernel, so "
        "TTFT and TPOT, slows in proportion, and intermittently, so p99 suffers most.",
    example="gpu.gpus[0].clock_event_reasons = ['hw_thermal_slowdown'], gpu.gpus[0].utilization_gpu_pct = 97, "
            "gpu.gpus[0].sm_clock_mhz = 1005, gpu.gpus[0].sm_clock_max_mhz = 1980",
    fix="Fix cooling and airflow (fans, blanking panels, inlet temperature), power delivery (PSU, cables) and "
        "check the BMC/IPMI event log for power-brake assertions.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'GPU Layer' (HW Thermal Slowdown, HW Power Brake)", "NVML clocks event reasons / DCGM health"),
), thresholds=("common.gpu_busy_util_pct", "GPU002.throttle_time_frac"))
def gpu002(ctx: Context) -> Hit | None:
    found = _Throttling()
    if ctx.has("gpu"):
        window = ctx.seen(GpuData).window_s
        for g in ctx.serving_gpus():
            _gpu_clock_events(ctx, g, found)
            _gpu_throttle_time(ctx, g, window, found)
    if ctx.bench is not None:
        for lv in ctx.bench.levels:
            _level_clock_events(ctx, lv, found)
    if not found.seen:
        raise MissingInput("no clock event reasons or throttle-time counters were measured" + ctx.probe_note("gpu"))
    if not found.evidence:
        return None
    return Hit(
        title="The GPU is throttling its clocks under load",
        message=f"The GPU slowed its clocks while serving{_detail(found.evidence)}: every kernel runs slower for "
                "as long as it lasts.",
        evidence=found.evidence, severity=found.severity, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix("Check cooling (fans, airflow, inlet temperature), power delivery (PSU, cables) and the BMC event "
                "log; watch the reasons live with the command below.",
                ("nvidia-smi -q -d PERFORMANCE", "nvidia-smi dmon -s pucvmet -d 1")),
    )


@dataclass(slots=True)
class _Throttling:
    """What GPU002 gathers: whether anything was measured, the evidence of throttling, and its severity."""
    seen: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    severity: Severity | None = None

    def reasons(self, bad: list[str]) -> None:
        """Clock event reasons: the most severe one counts."""
        for r in bad:
            if self.severity is None or _BAD_REASONS[r].rank < self.severity.rank:
                self.severity = _BAD_REASONS[r]

    def counted(self) -> None:
        """Throttle-time counters: HIGH, unless a clock event reason already set the severity."""
        self.severity = self.severity or Severity.HIGH


def _busy_bad_reasons(ctx: Context, reasons: Any, util: float) -> list[str]:
    """The throttling reasons among `reasons`, when the GPU was busy; [] otherwise."""
    bad = [r for r in reasons if r in _BAD_REASONS]
    return bad if bad and util >= ctx.th("common.gpu_busy_util_pct") else []


def _gpu_clock_events(ctx: Context, g: GpuDevice, found: _Throttling) -> None:
    reasons, util = g.clock_event_reasons, g.utilization_gpu_pct
    if reasons is None or util is None:
        return
    found.seen = True
    bad = _busy_bad_reasons(ctx, reasons, util)
    if not bad:
        return
    found.evidence[f"{gpu_key(g)}.clock_event_reasons"] = bad
    found.evidence[f"{gpu_key(g)}.utilization_gpu_pct"] = util
    if g.sm_clock_mhz is not None:
        found.evidence[f"{gpu_key(g)}.sm_clock_mhz"] = g.sm_clock_mhz
        found.evidence[f"{gpu_key(g)}.sm_clock_max_mhz"] = g.sm_clock_max_mhz
    found.reasons(bad)


def _gpu_throttle_time(ctx: Context, g: GpuDevice, window: float | None, found: _Throttling) -> None:
    """NVML's thermal/board/reliability throttle time: as a fraction of the window, else as counter deltas."""
    fracs, deltas = g.throttle_time_frac, g.throttle_time_delta_us
    if fracs and any(v is not None for v in (fracs.thermal, fracs.board_limit, fracs.reliability)):
        found.seen = True
        frac = sum(v or 0 for v in (fracs.thermal, fracs.board_limit, fracs.reliability))
        if frac >= ctx.th("GPU002.throttle_time_frac"):
            found.evidence[f"{gpu_key(g)}.throttle_time_frac.thermal+board_limit+reliability"] = round(frac, 4)
            found.counted()
    elif deltas and window and any(v is not None for v in (deltas.thermal, deltas.board_limit, deltas.reliability)):
        found.seen = True
        throttled_us = sum(v or 0 for v in (deltas.thermal, deltas.board_limit, deltas.reliability))
        if throttled_us / (window * 1e6) >= ctx.th("GPU002.throttle_time_frac"):
            found.evidence[f"{gpu_key(g)}.throttle_time_delta_us.thermal+board_limit+reliability"] = throttled_us
            found.evidence["gpu.window_s"] = window
            found.counted()


def _level_clock_events(ctx: Context, lv: BenchLevel, found: _Throttling) -> None:
    gpu = lv.gpu or LevelGpu()
    reasons, util = gpu.clock_event_reasons_seen, gpu.utilization_gpu_pct_mean
    if reasons is None or util is None:
        return
    found.seen = True
    bad = _busy_bad_reasons(ctx, reasons, util)
    if bad:
        found.evidence[f"{level_label(lv)}.gpu.clock_event_reasons_seen"] = bad
        found.evidence[f"{level_label(lv)}.gpu.utilization_gpu_pct_mean"] = util
        found.reasons(bad)


def _detail(evidence: dict[str, Any]) -> str:
    """' (the reasons)' or ' (the throttle time)', and the SM clock where measured: for the message."""
    reasons = sorted({r for k, v in evidence.items() if k.endswith(("clock_event_reasons", "reasons_seen")) for r in v})
    clocks = [(evidence[k], evidence.get(k.replace("sm_clock_mhz", "sm_clock_max_mhz")))
              for k in evidence if k.endswith(".sm_clock_mhz")]
    fracs = [v for k, v in evidence.items() if ".throttle_time_frac." in k]
    counted = f"thermal/board/reliability throttling for {pct(max(fracs))} of the window" if fracs else \
        "the thermal/board/reliability throttle-time counters grew"
    return (f" ({', '.join(reasons)})" if reasons else f" ({counted})") + (
        f"; SM clock {clocks[0][0]:.0f} of {clocks[0][1]:.0f} MHz" if clocks and clocks[0][1] else "")
