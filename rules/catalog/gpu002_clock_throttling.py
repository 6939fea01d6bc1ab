"""GPU002 (clock-throttling): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU002/."""
from __future__ import annotations

from typing import Any

from triage.core.bench_data import LevelGpu
from triage.core.probe_data import GpuData
from triage.core.report import Certainty, Fix, Severity
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
    busy = ctx.th("common.gpu_busy_util_pct")
    evidence: dict[str, Any] = {}
    severity = None
    seen = False
    if ctx.has("gpu"):
        window = ctx.seen(GpuData).window_s
        for g in ctx.serving_gpus():
            reasons, util = g.clock_event_reasons, g.utilization_gpu_pct
            if reasons is not None and util is not None:
                seen = True
                bad = [r for r in reasons if r in _BAD_REASONS]
                if bad and util >= busy:
                    evidence[f"{gpu_key(g)}.clock_event_reasons"] = bad
                    evidence[f"{gpu_key(g)}.utilization_gpu_pct"] = util
                    if g.sm_clock_mhz is not None:
                        evidence[f"{gpu_key(g)}.sm_clock_mhz"] = g.sm_clock_mhz
                        evidence[f"{gpu_key(g)}.sm_clock_max_mhz"] = g.sm_clock_max_mhz
                    for r in bad:
                        severity = _BAD_REASONS[r] if severity is None or _BAD_REASONS[r].rank < severity.rank else severity
            fracs, deltas = g.throttle_time_frac, g.throttle_time_delta_us
            if fracs and any(v is not None for v in (fracs.thermal, fracs.board_limit, fracs.reliability)):
                seen = True
                frac = sum(v or 0 for v in (fracs.thermal, fracs.board_limit, fracs.reliability))
                if frac >= ctx.th("GPU002.throttle_time_frac"):
                    evidence[f"{gpu_key(g)}.throttle_time_frac.thermal+board_limit+reliability"] = round(frac, 4)
                    severity = severity or Severity.HIGH
            elif deltas and window and any(v is not None for v in (deltas.thermal, deltas.board_limit,
                                                                   deltas.reliability)):
                seen = True
                throttled_us = sum(v or 0 for v in (deltas.thermal, deltas.board_limit, deltas.reliability))
                if throttled_us / (window * 1e6) >= ctx.th("GPU002.throttle_time_frac"):
                    evidence[f"{gpu_key(g)}.throttle_time_delta_us.thermal+board_limit+reliability"] = throttled_us
                    evidence["gpu.window_s"] = window
                    severity = severity or Severity.HIGH
    if ctx.bench is not None:
        for lv in ctx.bench.levels:
            gpu = lv.gpu or LevelGpu()
            reasons, util = gpu.clock_event_reasons_seen, gpu.utilization_gpu_pct_mean
            if reasons is None or util is None:
                continue
            seen = True
            bad = [r for r in reasons if r in _BAD_REASONS]
            if bad and util >= busy:
                evidence[f"{level_label(lv)}.gpu.clock_event_reasons_seen"] = bad
                evidence[f"{level_label(lv)}.gpu.utilization_gpu_pct_mean"] = util
                for r in bad:
                    severity = _BAD_REASONS[r] if severity is None or _BAD_REASONS[r].rank < severity.rank else severity
    if not seen:
        raise MissingInput("no clock event reasons or throttle-time counters were measured" + ctx.probe_note("gpu"))
    if not evidence:
        return None
    reasons = sorted({r for k, v in evidence.items() if k.endswith(("clock_event_reasons", "reasons_seen")) for r in v})
    clocks = [(evidence[k], evidence.get(k.replace("sm_clock_mhz", "sm_clock_max_mhz")))
              for k in evidence if k.endswith(".sm_clock_mhz")]
    fracs = [v for k, v in evidence.items() if ".throttle_time_frac." in k]
    counted = f"thermal/board/reliability throttling for {pct(max(fracs))} of the window" if fracs else \
        "the thermal/board/reliability throttle-time counters grew"
    detail = (f" ({', '.join(reasons)})" if reasons else f" ({counted})") + (
        f"; SM clock {clocks[0][0]:.0f} of {clocks[0][1]:.0f} MHz" if clocks and clocks[0][1] else "")
    return Hit(
        title="The GPU is throttling its clocks under load",
        message=f"The GPU slowed its clocks while serving{detail}: every kernel runs slower for as long as it "
                "lasts.",
        evidence=evidence, severity=severity, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix("Check cooling (fans, airflow, inlet temperature), power delivery (PSU, cables) and the BMC event "
                "log; watch the reasons live with the command below.",
                ("nvidia-smi -q -d PERFORMANCE", "nvidia-smi dmon -s pucvmet -d 1")),
    )
