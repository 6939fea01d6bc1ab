"""SCHED001 (chunked-prefill-off): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED001/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerConfigData
from triage.core.report import BenchLevel, Certainty, FindingKind, Fix, Severity
from triage.engines import Feature
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engine_info import DISABLING_FLAGS, EngineInfo, engine_flags
from triage.rules.registry import rule


def _long_prompt_levels(ctx: Context) -> list[BenchLevel]:
    long_tokens = ctx.th("SCHED001.long_prompt_tokens")
    return [lv for lv in ctx.levels() if (lv.input_tokens_mean or 0) >= long_tokens]


def _spikes(ctx: Context) -> list[BenchLevel]:
    """The long-prompt levels whose TPOT p99 is far above its p50."""
    ratio = ctx.th("SCHED001.tpot_spike_ratio")
    return [lv for lv in _long_prompt_levels(ctx)
            if lv.tpot_ms.p50 and lv.tpot_ms.p99 is not None and lv.tpot_ms.p99 >= ratio * lv.tpot_ms.p50]


@rule("SCHED001", "chunked-prefill-off", Severity.MEDIUM, ("server_config|bench",), RuleDoc(
    what="Chunked prefill is disabled, or TPOT p99 spikes to >= 3x its p50 when long prompts (>= 2K tokens) "
         "arrive. Version-aware: vLLM V1 (>= 0.8), SGLang and TGI >= 3 chunk by default, so there the fix is "
         "to tune the chunk size or remove the flag that disabled it.",
    why="Without chunking, one long prefill occupies a whole engine step and every decoding request in the "
        "batch waits for it: token streams stutter (an explainer of inference as a memory-bound problem, 'chunked prefill', 'prefill piracy').",
    example="server_config.enable_chunked_prefill = false, bench.c16.tpot_ms.p99 = 180, bench.c16.tpot_ms.p50 = 32",
    fix="`--enable-chunked-prefill` on engines where it is off by default, and a smaller "
        "`--max-num-batched-tokens` (e.g. 2048) so prefill chunks interleave with decode.",
    references=("vLLM docs, 'Optimization and Tuning': chunked prefill", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Configuration Layer' (missing chunked prefill)",
                "claim:vllm.v1-chunked-prefill-0.8", "claim:vllm.chunked-prefill-per-model",
                "claim:vllm.chunked-prefill-meaning", "claim:vllm.max-num-batched-tokens-meaning",
                "claim:sglang.chunked-prefill-size", "claim:sglang.chunked-prefill-default-0.4",
                "claim:sglang.chunked-prefill-default-h100", "claim:tgi.prefill-chunking-default-off-2.4",
                "claim:tgi.prefill-chunking-default-on", "claim:tgi.max-batch-prefill-tokens-meaning"),
), thresholds=("SCHED001.tpot_spike_ratio", "SCHED001.long_prompt_tokens"))
def sched001(ctx: Context) -> Hit | None:
    engine = ctx.engine()
    enabled = _chunked_prefill(ctx, engine)
    if enabled is False:
        return _turned_off(ctx, engine)
    if ctx.bench is None:
        if enabled is None:
            raise MissingInput("whether chunked prefill is on is unknown (server_config.enable_chunked_prefill "
                               "and the engine version were not measured), and there is no bench to judge TPOT")
        raise MissingInput("chunked prefill is on; judging TPOT spikes under long prompts needs a bench report")
    spikes = _spikes(ctx)
    if not _long_prompt_levels(ctx):
        raise MissingInput(f"no bench level had prompts of >= {ctx.th('SCHED001.long_prompt_tokens'):.0f} tokens")
    if not spikes:
        return None
    return _stutter(ctx, engine, enabled, spikes)


def _chunked_prefill(ctx: Context, engine: EngineInfo) -> bool | None:
    """Whether chunked prefill is on: the server's setting, else the engine's version-aware default when it was
    not told; None when neither says."""
    enabled = ctx.seen(ServerConfigData).enable_chunked_prefill
    source = ctx.cfg_source("enable_chunked_prefill")
    if enabled is None or source == "default":
        default = engine.default_on("chunked_prefill")  # version-aware: what this engine does when not told
        if default is not None:
            enabled = default
    return enabled


def _turned_off(ctx: Context, engine: EngineInfo) -> Hit:
    evidence: dict[str, Any] = {"server_config.enable_chunked_prefill": False}
    default_on = engine.default_on("chunked_prefill")
    off_flag = DISABLING_FLAGS[Feature.CHUNKED_PREFILL].get(engine.name or "")
    if default_on and off_flag:
        text, cmds = f"Remove `{off_flag}`: {engine.label} chunks prefills by default.", ()
    else:
        cmds, note = engine_flags({"enable_chunked_prefill": None}, engine)
        text = "Enable chunked prefill so long prompts are split and interleaved with decode." + note
    spikes = _spikes(ctx) if ctx.bench is not None else []
    for lv in spikes:
        evidence[f"{level_label(lv)}.tpot_ms.p99"] = lv.tpot_ms.p99
    # Off with no stutter measured is a better configuration, not a symptom (docs/RULES.md, severity policy).
    return Hit(
        title="Chunked prefill is off",
        message="Chunked prefill is disabled: each long prompt's prefill stalls every decoding request.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4, fix=Fix(text, cmds),
        kind=FindingKind.PROBLEM if spikes else FindingKind.OPPORTUNITY,
    )


def _stutter(ctx: Context, engine: EngineInfo, enabled: bool | None, spikes: list[BenchLevel]) -> Hit:
    evidence: dict[str, Any] = {}
    for lv in spikes:
        p = level_label(lv)
        evidence[f"{p}.tpot_ms.p99"] = lv.tpot_ms.p99
        evidence[f"{p}.tpot_ms.p50"] = lv.tpot_ms.p50
        evidence[f"{p}.input_tokens_mean"] = lv.input_tokens_mean
    batched = ctx.seen(ServerConfigData).max_num_batched_tokens
    proposed = 2048 if batched is None or batched > 2048 else max(512, int(batched) // 2)
    cmds, note = engine_flags({"max_num_batched_tokens": proposed}, engine)
    if enabled:
        text = (f"Chunked prefill is already on ({engine.label}); make the chunks smaller so decode steps "
                f"interleave more often: max_num_batched_tokens {batched or 'default'} -> {proposed}.")
    else:
        cmds_on, _ = engine_flags({"enable_chunked_prefill": None}, engine)
        cmds = cmds_on + cmds
        text = "Turn chunked prefill on (if this engine version has it off) and keep the chunk small."
    worst = max(spikes, key=lambda lv: lv.tpot_ms.p99 / lv.tpot_ms.p50)
    return Hit(
        title="Long prompts make the token stream stutter",
        message=f"TPOT p99 is {worst.tpot_ms.p99 / worst.tpot_ms.p50:.1f}x its p50 at {level_label(worst)} with "
                f"{worst.input_tokens_mean:.0f}-token prompts: prefills stall the decoding requests.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.4, fix=Fix(text + note, cmds),
    )
