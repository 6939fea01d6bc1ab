"""CPU003 (single-core-saturated): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/CPU003/."""
from __future__ import annotations

from triage.core.probe_data import (
    ServerConfigData,
    ServerProcessData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.engines import Knob
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("CPU003", "single-core-saturated", Severity.HIGH, ("server_process", "gpu"), RuleDoc(
    what="One thread in the server's process tree is at >= 95% of a core while the serving GPU is below 60% "
         "busy: the front end (tokenizer, GIL-bound Python, detokenizer) is the bottleneck.",
    why="The API server and scheduler are single-threaded Python in most engines; when that thread is "
        "pegged, requests queue in front of an idle GPU.",
    example="server_process.max_thread_cpu_pct = 99, gpu.gpus[0].utilization_gpu_pct = 35",
    fix="Use the fast tokenizer, scale the front end (vLLM `--api-server-count N`, ≥ 0.10), move pre/post "
        "processing out of the server.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'CPU Layer' (mpstat -P ALL: single-thread bottlenecks)", "a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Lessons Learned and Common Pitfalls' (profile first)",
                "claim:vllm.api-server-count-0.10", "claim:vllm.tokenizer-mode-auto", "claim:sglang.tokenizer-mode-auto"),
), thresholds=("CPU003.thread_busy_pct", "CPU003.gpu_waiting_util_pct"))
def cpu003(ctx: Context) -> Hit | None:
    thread = ctx.measured(ctx.need(ServerProcessData).max_thread_cpu_pct, "server_process.max_thread_cpu_pct")
    utils = [g.utilization_gpu_pct for g in ctx.serving_gpus() if g.utilization_gpu_pct is not None]
    if not utils:
        raise MissingInput("gpu.utilization_gpu_pct was not measured")
    if thread < ctx.th("CPU003.thread_busy_pct") or max(utils) >= ctx.th("CPU003.gpu_waiting_util_pct"):
        return None
    engine = ctx.engine()
    knobs: dict[str, object] = {"tokenizer_mode_auto": None}
    module = engine.module
    if module is not None and engine.version is not None and \
            isinstance(module.knob("api_server_count", engine.version), Knob):
        current = ctx.seen(ServerConfigData).api_server_count or 1
        knobs.update(api_server_count=max(2, int(current) * 2))
    cmds, note = engine_flags(knobs, engine)
    return Hit(
        title="A pegged CPU thread starves the GPU",
        message=f"One server thread runs at {thread:.0f}% of a core while the GPU is at {max(utils):.0f}%: the "
                "CPU-side front end, not the GPU, sets the pace.",
        evidence={"server_process.max_thread_cpu_pct": thread, "gpu.utilization_gpu_pct_max": max(utils)},
        certainty=Certainty.LIKELY, impact=0.6,
        fix=Fix("Make sure the fast (Rust) tokenizer is used, run more API-server processes where the engine "
                "supports it, and move heavy pre/post-processing out of the server process." + note, cmds),
    )
