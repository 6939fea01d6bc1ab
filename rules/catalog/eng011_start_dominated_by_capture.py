"""ENG011 (start-dominated-by-capture): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG011/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogsData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._log_shared import restarts_note
from triage.rules.context import Context
from triage.rules.registry import rule
from triage.rules.startup_knobs import knob_fix


@rule("ENG011", "start-dominated-by-capture", Severity.MEDIUM, ("logs",), RuleDoc(
    what="One start of the server spent most of its time in torch.compile and CUDA-graph capture: together >= "
         "ENG011.min_capture_s and >= ENG011.min_share_frac of the start (to the ready line, else the phases the log "
         "times). A problem from ENG011.problem_capture_s, an opportunity below. Repeated starts are ENG008 and "
         "ENG009.",
    why="Compile and graph capture buy faster decode steps with start-up time. When they dominate a start, every "
        "scale-out, rollout and crash recovery waits for them; a capture that runs for minutes usually captures more "
        "batch sizes than the traffic needs, or compiles without a cache.",
    example="logs.startup.cuda_graph_s_each_start = [11412.0], logs.startup.ready_s = 11630.0",
    fix="Keep the compile cache across starts (vLLM: VLLM_CACHE_ROOT on a persistent volume); capture fewer batch "
        "sizes (a lower `--max-num-seqs`: vLLM captures up to twice it); or start eager (`--enforce-eager`, "
        "`--disable-cuda-graph`, `--cuda-graphs 0`) where start time matters more than decode speed.",
    references=("claim:vllm.log-compile-0.10", "claim:vllm.log-compile", "claim:vllm.log-graphs",
                "claim:vllm.cuda-graph-sizes", "claim:vllm.cache-root", "claim:vllm.enforce-eager-skips-compile",
                "claim:sglang.log-graph", "claim:sglang.log-graph-end"),
), thresholds=("ENG011.min_capture_s", "ENG011.min_share_frac", "ENG011.problem_capture_s"))
def eng011(ctx: Context) -> Hit | None:
    logs = ctx.need(LogsData)
    startup = logs.startup
    if startup is None or not startup.phases:
        raise MissingInput("the log shows no server start")
    compile_s = startup.compile_s_each_start[-1] if startup.compile_s_each_start else 0.0
    graph_s = startup.cuda_graph_s_each_start[-1] if startup.cuda_graph_s_each_start else 0.0
    whole = startup.ready_s or startup.phases_total_s
    capture = compile_s + graph_s
    if not whole or capture < ctx.th("ENG011.min_capture_s") or capture < ctx.th("ENG011.min_share_frac") * whole:
        return None
    problem = capture >= ctx.th("ENG011.problem_capture_s")
    evidence: dict[str, Any] = {"logs.startup.compile_s_each_start": list(startup.compile_s_each_start),
                                "logs.startup.cuda_graph_s_each_start": list(startup.cuda_graph_s_each_start),
                                "logs.startup.ready_s" if startup.ready_s else "logs.startup.phases_total_s": whole,
                                "derived.capture_share_of_start": round(capture / whole, 3)}
    cache_cmds, cache_note = knob_fix(ctx, "compile_cache_dir", "/persistent/volume")
    eager_cmds, eager_note = knob_fix(ctx, "eager_mode", "")
    parts = [f"torch.compile {compile_s:.0f} s"] if compile_s else []
    parts += [f"CUDA-graph capture {graph_s:.0f} s"] if graph_s else []
    return Hit(
        title="One start spent most of its time compiling and capturing CUDA graphs",
        message=f"{' and '.join(parts)} of a {whole:.0f} s start ({capture / whole:.0%})." + restarts_note(logs),
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=min(0.5, capture / whole),
        severity=None if problem else Severity.LOW, kind=FindingKind.PROBLEM if problem else FindingKind.OPPORTUNITY,
        fix=Fix(("Keep the compile cache across starts (" + cache_note + ")" if compile_s else
                 "Capture fewer batch sizes (a lower max_num_seqs bounds them)")
                + f"; where start time matters more than decode speed, start without them ({eager_note}).",
                (cache_cmds if compile_s else ()) + eager_cmds),
    )
