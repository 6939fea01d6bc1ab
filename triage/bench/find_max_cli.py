"""--find-max's flags into a FindMaxSpec (with clear errors), and its progress lines on stderr."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from triage.bench.find_max import FindMaxResult, FindMaxSpec, Probe
from triage.bench.run_config import BenchConfig
from triage.core.durations import parse_duration_s
from triage.core.errors import UsageError

RATE_LIMIT_RPS = 1000.0


def find_max_spec(mode: str, cfg: BenchConfig, attainment: float, max_requests: int | None,
                  max_duration: str | None, levels_given: bool) -> FindMaxSpec:
    if not cfg.slo:
        raise UsageError("--find-max needs --slo, e.g. --slo ttft_ms=500,tpot_ms=50: the SLO defines the answer")
    if levels_given:
        raise UsageError("--find-max chooses the loads itself; drop --concurrency, --rate and --ramp")
    if cfg.trace is not None or cfg.turns > 1:
        raise UsageError("--find-max runs synthetic or --dataset prompts; it cannot be combined with --trace "
                         "or --turns")
    if cfg.repeat != 1:
        raise UsageError("--find-max runs each load once; drop --repeat")
    limit = float(cfg.max_in_flight) if mode == "concurrency" else RATE_LIMIT_RPS
    return FindMaxSpec(mode=mode, target_attainment=attainment, start=1.0, limit=limit, max_requests=max_requests,
                       max_duration_s=parse_duration_s(max_duration, "--max-duration") if max_duration else None)


def describe(probe: Probe, mode: str) -> str:
    unit = "" if mode == "concurrency" else " req/s"
    if probe.attainment is None:
        got = "no requests measured"
    else:
        low, high = probe.attainment_ci95 or (probe.attainment, probe.attainment)
        got = f"SLO met by {probe.attainment:.1%} of {probe.num_measured} (95% CI {low:.1%}-{high:.1%})"
    return f"{mode} {probe.load:g}{unit}: {got}: {'pass' if probe.passed else 'fail'}" + \
        (f" ({probe.note})" if probe.note else "")


def progress_printer(err: Any) -> Callable[[Probe, FindMaxResult], None]:
    def show(probe: Probe, result: FindMaxResult) -> None:
        err.print(f"find-max: {describe(probe, result.mode)}", markup=False)

    return show
