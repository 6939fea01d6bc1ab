"""ENG009 (warmup-out-of-proportion): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG009/.

torch.compile and CUDA-graph capture buy faster steps for the rest of a replica's life. A replica that restarts
every few minutes (autoscaled, preempted, crash-looping) may spend a large share of that life warming up. The
log says how long each replica ran before the next start (its start gaps) and what the warm-up cost.
"""
from __future__ import annotations

import statistics
from typing import Any

from triage.core.probe_data import LogsData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule
from triage.rules.startup_knobs import knob_fix


@rule("ENG009", "warmup-out-of-proportion", Severity.MEDIUM, ("logs",), RuleDoc(
    what="Replicas restart often and each start spends a large share of the replica's life in torch.compile and "
         "CUDA-graph capture: compile + capture >= 10 s and >= 10% of the median time between starts in the log "
         "(a problem from 25%, an opportunity below).",
    why="The warm-up pays for itself only over a long enough life: each step it saves is milliseconds, the warm-up "
        "is tens of seconds during which the replica serves nothing. Short-lived replicas (aggressive autoscaling, "
        "preemptible nodes, crash loops) pay it over and over.",
    example="logs.startup.start_gaps_s = [240.0, 236.5], logs.startup.compile_s_each_start = [41.0, 40.2], "
            "logs.startup.cuda_graph_s_each_start = [18.0, 17.5]",
    fix="Keep replicas alive longer (scale-in delay, fix the crash), keep the compile cache (ENG008), or run "
        "short-lived replicas in eager mode (vLLM `--enforce-eager`, SGLang `--disable-cuda-graph`, TGI "
        "`--cuda-graphs 0`) and accept slower decode steps: measure both with `triage bench`.",
    references=("claim:vllm.enforce-eager-skips-compile", "claim:vllm.log-compile", "vLLM docs, 'torch.compile integration' (compile cache and CUDA-graph capture at start-up)"),
), thresholds=("ENG009.min_warmup_s", "ENG009.max_share_frac", "ENG009.problem_share_frac"))
def eng009(ctx: Context) -> Hit | None:
    startup = ctx.need(LogsData).startup
    if startup is None:
        raise MissingInput("the log shows no server start")
    gaps = list(startup.start_gaps_s)
    if not gaps:
        raise MissingInput("the log shows one start (or starts without times): how long replicas live is unknown")
    compile_s = startup.compile_s_each_start[-1] if startup.compile_s_each_start else 0.0
    graph_s = startup.cuda_graph_s_each_start[-1] if startup.cuda_graph_s_each_start else 0.0
    warmup = compile_s + graph_s
    life = statistics.median(gaps)
    if warmup < ctx.th("ENG009.min_warmup_s") or life <= 0:
        return None
    share = warmup / life
    if share < ctx.th("ENG009.max_share_frac"):
        return None
    problem = share >= ctx.th("ENG009.problem_share_frac")
    evidence: dict[str, Any] = {"logs.startup.start_gaps_s": gaps, "logs.startup.num_starts": startup.num_starts,
                                "logs.startup.compile_s_each_start": list(startup.compile_s_each_start),
                                "logs.startup.cuda_graph_s_each_start": list(startup.cuda_graph_s_each_start),
                                "derived.warmup_share_of_life": round(share, 3)}
    commands, note = knob_fix(ctx, "eager_mode", "")
    return Hit(
        title="Replicas spend much of their short life warming up",
        message=f"Replicas ran a median {life:.0f} s between starts and each start spent {warmup:.0f} s compiling "
                f"and capturing CUDA graphs ({share:.0%} of its life) before serving anything.",
        evidence=evidence, certainty=Certainty.CONFIRMED if len(gaps) >= 2 else Certainty.LIKELY,
        impact=min(0.6, share), severity=None if problem else Severity.LOW,
        kind=FindingKind.PROBLEM if problem else FindingKind.OPPORTUNITY,
        fix=Fix("Make replicas live longer (a scale-in delay, or fix whatever restarts them), keep the compile "
                "cache across starts (ENG008), or, where replicas must stay short-lived, start them in eager mode, "
                f"which skips the warm-up and gives up its faster steps ({note}); compare TPOT both ways with "
                "`triage bench` before choosing.", commands),
    )
