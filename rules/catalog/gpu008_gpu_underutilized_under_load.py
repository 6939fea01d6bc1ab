"""GPU008 (gpu-underutilized-under-load): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU008/."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.core.bench_data import LevelGpu, LevelServer
from triage.core.probe_data import (
    ServerConfigData,
    ServerMetricsData,
)
from triage.core.report import BenchLevel, Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("GPU008", "gpu-underutilized-under-load", Severity.HIGH, ("gpu|bench",), RuleDoc(
    what="GPU utilization stays below 40% while at least 4 requests are in flight.",
    why="With several requests in flight, a batching engine keeps the GPU at 80-95%. A low figure means the "
        "requests are served one at a time (static or no batching), or something upstream (the client, the "
        "tokenizer, a proxy) starves the GPU ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Single-Request Serving Instead of Continuous Batching').",
    example="bench.c16.gpu.utilization_gpu_pct_mean = 28, bench.c16.server.num_requests_running_mean = 1.0",
    fix="Serve with continuous batching (vLLM, SGLang, TGI); raise `--max-num-seqs`; check for a client, CPU "
        "or single-request proxy bottleneck.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Single-Request Serving Instead of Continuous Batching' and the 'Quick Reference: If You See X, Try Y' table (GPU util <40% under concurrent load)",
                "claim:vllm.max-num-seqs-meaning"),
), thresholds=("GPU008.low_util_pct", "GPU008.min_in_flight"))
def gpu008(ctx: Context) -> Hit | None:
    load = _Load()
    if ctx.bench is not None:
        _bench_load(ctx, load)
    _live_load(ctx, load)
    if not load.loaded:
        raise MissingInput(f"never saw >= {ctx.th('GPU008.min_in_flight'):.0f} requests in flight together with GPU "
                           "utilization (run `triage bench --concurrency 1,4,16`)" + ctx.probe_note("gpu"))
    if not load.evidence:
        return None
    text, cmds, note = _fix(ctx, load.running_max)
    return Hit(
        title="The GPU idles while requests are in flight",
        message="GPU utilization stays low although several requests are in flight: they are not being batched "
                "together, or something upstream starves the GPU.",
        evidence=load.evidence, certainty=Certainty.LIKELY, impact=0.8,
        fix=Fix(text + "or an engine without continuous batching (use vLLM, SGLang or TGI)." + note, cmds),
    )


@dataclass(slots=True)
class _Load:
    """What GPU008 gathers: whether enough requests were ever in flight, the evidence of a low GPU
    utilization then, and how many requests ran at once."""
    loaded: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    running_max: float | None = None


def _bench_load(ctx: Context, load: _Load) -> None:
    """The bench levels with enough requests in flight, and their GPU utilization."""
    low, min_load = ctx.th("GPU008.low_util_pct"), ctx.th("GPU008.min_in_flight")
    for lv in ctx.levels():
        gpu, server = lv.gpu or LevelGpu(), lv.server or LevelServer()
        util = gpu.utilization_gpu_pct_mean
        in_flight = lv.client.achieved_concurrency or lv.concurrency
        if util is None or in_flight is None or in_flight < min_load:
            continue
        load.loaded = True
        if util < low:
            _idle_level(lv, util, in_flight, server, load)


def _idle_level(lv: BenchLevel, util: float, in_flight: float, server: LevelServer, load: _Load) -> None:
    p = level_label(lv)
    load.evidence[f"{p}.gpu.utilization_gpu_pct_mean"] = util
    load.evidence[f"{p}.client.achieved_concurrency"] = in_flight
    if server.num_requests_running_mean is not None:
        load.evidence[f"{p}.server.num_requests_running_mean"] = server.num_requests_running_mean
    if server.num_requests_running_max is not None:
        load.running_max = server.num_requests_running_max


def _live_load(ctx: Context, load: _Load) -> None:
    """The live /metrics queue together with the serving GPUs' utilization."""
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if not ctx.has("gpu") or metrics is None or metrics.num_requests_running is None:
        return
    running, waiting = metrics.num_requests_running, metrics.num_requests_waiting
    in_flight = running + (waiting or 0)
    utils = [g.utilization_gpu_pct for g in ctx.serving_gpus() if g.utilization_gpu_pct is not None]
    if not (utils and in_flight >= ctx.th("GPU008.min_in_flight")):
        return
    load.loaded = True
    if max(utils) < ctx.th("GPU008.low_util_pct"):
        load.evidence["gpu.utilization_gpu_pct_max_over_serving_gpus"] = max(utils)
        load.evidence["server_metrics.num_requests_running"] = running
        load.evidence["server_metrics.num_requests_waiting"] = waiting
        load.running_max = running


def _fix(ctx: Context, running_max: float | None) -> tuple[str, tuple[str, ...], str]:
    """The fix's text, commands and note: raise max_num_seqs when the batch ran at its cap."""
    engine = ctx.engine()
    cfg_seqs = ctx.seen(ServerConfigData).max_num_seqs
    knobs = {}
    text = "Check the path from client to GPU: a single-request proxy, a client or tokenizer bottleneck (CPU003), "
    if engine.module is not None and engine.module.launcher and cfg_seqs is not None and running_max is not None \
            and running_max >= cfg_seqs:
        knobs.update(max_num_seqs=max(256, int(cfg_seqs) * 2))
        text = f"The batch is capped at max_num_seqs={cfg_seqs}: raise it. Then check " + text[len("Check "):]
    cmds, note = engine_flags(knobs, engine) if knobs else ((), "")
    return text, cmds, note
