"""ENG001 (non-batching-engine-in-production): a server that does not batch concurrent requests, named from the load alone (throughput
flat under 4x the concurrency) or from its own configuration (one llama.cpp slot, Ollama with one
parallel request, `transformers serve` without continuous batching), with that engine's own knob as
the fix. Per the severity policy, a one-request-at-a-time configuration with no symptom is an
opportunity, not a problem."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import EngineIdentityData, ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.engines import cite, get, with_flag_tables
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.registry import rule
from triage.rules.scaling import flat_scaling, throughput_scaling


def _one_at_a_time(ctx: Context, engine: str | None) -> tuple[str | None, dict[str, Any]]:
    """Why this engine's own configuration serves one request at a time (None when it does not); each engine
    module knows its own knob (triage/engines/<engine>.py)."""
    module = get(engine)
    if module is None or module.one_at_a_time_fn is None:
        return None, {}
    found = module.one_at_a_time_fn(ctx.seen(EngineIdentityData))
    return found if found is not None else (None, {})


def _queueing(ctx: Context) -> dict[str, Any]:
    """Requests waiting (vLLM/SGLang/TGI) or deferred (llama.cpp) during the window or under the bench."""
    ev: dict[str, Any] = {}
    waiting = ctx.seen(ServerMetricsData).num_requests_waiting_max
    if waiting:
        ev["server_metrics.num_requests_waiting_max"] = waiting
    if ctx.bench is not None:
        for lv in ctx.bench.levels:
            w = lv.server.num_requests_waiting_max if lv.server is not None else None
            if w:
                ev[f"{level_label(lv)}.server.num_requests_waiting_max"] = w
    return ev


def _fix(engine: str | None, ctx: Context, target_slots: int) -> Fix:
    model = ctx.seen(ServerConfigData).model or "<model>"
    module = get(engine)
    if module is not None and module.batching_fix_fn is not None:
        text, cmds = module.batching_fix_fn(ctx.seen(EngineIdentityData), target_slots, model)
        knob = module.batching_knob
        cited = f" ({'; '.join(cite(knob.claims))})" if knob is not None and knob.claims else ""
        return Fix(text + cited, cmds)
    if module is not None and module.batches:
        return Fix(f"{module.display} batches by itself, so something caps it at one request: check the batch cap "
                   "(SCHED004 names it when the config was read) and any proxy or worker pool in front that "
                   "forwards one request at a time.", ())
    batching = [e for e in with_flag_tables() if e.batches]
    return Fix(f"Serve with a continuous-batching engine ({', '.join(e.display for e in batching)}); the "
               "OpenAI-compatible API stays the same, so clients do not change.",
               tuple(cmd for e in batching if (cmd := e.launch_command(model))))


@rule("ENG001", "non-batching-engine-in-production", Severity.HIGH,
      ("engine_identity|server_process|server_config|bench",), RuleDoc(
    what="The server does not batch concurrent requests: throughput stays flat (< 1.6x at its best) when the "
         "concurrency grows at least 4x (from any two valid bench levels, whatever the engine), or its own configuration serves one "
         "request at a time (llama.cpp with one `--parallel` slot, Ollama with OLLAMA_NUM_PARALLEL=1, "
         "`transformers serve` without continuous batching, a bare generate() wrapper) and requests queue.",
    why="A server that runs one request at a time leaves the GPU idle between requests: users added to it only "
        "wait, TTFT grows with the queue, and throughput stays where it was ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Single-Request Serving Instead of Continuous Batching' and 'Wrong Inference Engine for Your Workload'). Adding replicas "
        "multiplies that waste; the engine's own batching knob is the first fix.",
    example="bench.c1.output_tokens_per_s = 26.8, bench.c4.output_tokens_per_s = 24.3, engine_identity.engine = "
            "'transformers'",
    fix="That engine's own knob first (llama.cpp `--parallel N`, Ollama OLLAMA_NUM_PARALLEL, `transformers serve "
        "--continuous-batching`), else a continuous-batching engine (vLLM, SGLang, TGI, TensorRT-LLM). With no "
        "symptom (an idle one-slot server) it is an opportunity at LOW.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Single-Request Serving Instead of Continuous Batching' (throughput doesn't scale with concurrency) and 'Wrong Inference Engine for Your Workload' (wrong engine for the workload)",
                "The engine table in 'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29) says llama.cpp has no continuous batching; llama-server's source says "
                "otherwise (slots with continuous batching, -cb on by default): triage follows the source",
                "claim:llamacpp.parallel-flag", "claim:llamacpp.parallel-auto-is-4", "claim:ollama.num-parallel-default-1",
                "claim:llamacpp.cont-batching-default-on", "claim:ollama.num-parallel-default-1-0.10",
                "transformers cli/serve.py (--continuous-batching)"),
), thresholds=("ENG001.min_throughput_gain_x",))
def eng001(ctx: Context) -> Hit | None:
    engine = ctx.engine().name
    flat = flat_scaling(ctx)
    why_config, config_ev = _one_at_a_time(ctx, engine)
    if flat is None and why_config is None:
        if engine is None and (ctx.bench is None or throughput_scaling(ctx.bench.levels) is None):
            raise MissingInput("no two bench levels >= 4x apart in concurrency, and the engine was not identified")
        return None
    name = engine or "the server"
    evidence: dict[str, Any] = {"engine_identity.engine": engine, **config_ev}
    queue = _queueing(ctx)
    target = 4
    if flat is not None:
        lo, hi = flat.low, flat.high
        evidence.update({f"{level_label(lo)}.output_tokens_per_s": lo.output_tokens_per_s,
                         f"{level_label(hi)}.output_tokens_per_s": hi.output_tokens_per_s,
                         "derived.throughput_x": round(flat.throughput_x, 2),
                         "derived.concurrency_x": round(flat.concurrency_x, 2)})
        target = min(max(target, hi.concurrency or 4), 16)   # more slots split -c further; 16 is plenty to start
        message = (f"Throughput grew {flat.throughput_x:.1f}x while concurrency grew {flat.concurrency_x:.0f}x "
                   f"({lo.output_tokens_per_s:.0f} -> {hi.output_tokens_per_s:.0f} output tokens/s): {name} "
                   "serves requests one at a time." + (f" Its configuration says why: {why_config}." if why_config
                                                       else ""))
        return Hit(title=f"{name} does not batch concurrent requests", message=message, evidence=evidence,
                   severity=Severity.HIGH, certainty=Certainty.CONFIRMED, impact=0.9, fix=_fix(engine, ctx, target))
    if queue:
        evidence.update(queue)
        return Hit(title=f"{name} serves one request at a time and requests queue",
                   message=f"{why_config}, and requests were waiting for it.", evidence=evidence,
                   severity=Severity.MEDIUM, certainty=Certainty.LIKELY, impact=0.8, fix=_fix(engine, ctx, target))
    return Hit(title=f"{name} is configured to serve one request at a time",
               message=f"{why_config}. Nothing queued while triage looked, so this costs nothing yet; under "
                       "concurrent load requests would wait for each other.", evidence=evidence,
               severity=Severity.LOW, certainty=Certainty.POSSIBLE, impact=0.3, kind=FindingKind.OPPORTUNITY,
               fix=_fix(engine, ctx, target))
