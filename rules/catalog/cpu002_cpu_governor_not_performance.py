"""CPU002 (cpu-governor-not-performance): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/CPU002/."""
from __future__ import annotations

from triage.core.probe_data import CpuData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule

_SLOW_GOVERNORS = frozenset({"powersave", "ondemand", "conservative"})


@rule("CPU002", "cpu-governor-not-performance", Severity.MEDIUM, ("cpu",), RuleDoc(
    what="The CPU frequency scaling governor is powersave, ondemand or conservative on a serving host.",
    why="The front end (HTTP, tokenizer, scheduler) runs in bursts; a governor that ramps clocks slowly adds "
        "to every request's CPU path and inflates client-side TTFT. (On intel_pstate with HWP, 'powersave' "
        "is less harmful than the name says, but 'performance' is still the serving choice.)",
    example="cpu.governor = 'powersave', cpu.governors = {powersave: 64}",
    fix="`sudo cpupower frequency-set -g performance` (persist it with tuned or your provisioning).",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'CPU Layer'", "cpupower(1)"),
))
def cpu002(ctx: Context) -> Hit | None:
    governors = ctx.seen(CpuData).governors or {}
    main = ctx.seen(CpuData).governor
    if main is None and not governors:
        raise MissingInput("cpu.governor was not measured (no cpufreq in /sys, e.g. in many VMs)")
    slow = {g: n for g, n in governors.items() if g in _SLOW_GOVERNORS}
    if main in _SLOW_GOVERNORS and main not in slow:
        slow[main] = None
    if not slow:
        return None
    return Hit(
        title="The CPU frequency governor is not 'performance'",
        message=f"The CPU runs under the {', '.join(sorted(slow))} governor, which ramps clocks slowly for the "
                "bursty front-end work.",
        evidence={"cpu.governor": main, "cpu.governors": governors or None},
        certainty=Certainty.CONFIRMED, impact=0.15,
        fix=Fix("Switch the governor to performance.", ("sudo cpupower frequency-set -g performance",)),
    )
