"""KV005 (prefix-cache-ineffective): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV005/."""
from __future__ import annotations

from typing import Any

from triage.core.report import BenchLevel, Certainty, Fix, Severity
from triage.engines import Feature
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engine_info import DISABLING_FLAGS, EngineInfo, engine_flags
from triage.rules.fmt import pct
from triage.rules.registry import rule

_PER_MODEL = ("vLLM 0.12 and later decide the default per model at startup (off for attention-free, "
              "encoder-decoder and some pooling models: its enable_prefix_caching setting is None until the model is "
              "known)")


@rule("KV005", "prefix-cache-ineffective", Severity.MEDIUM, ("server_config|server_metrics|bench",), RuleDoc(
    what="Prefix caching is disabled, or its hit rate is < 10% while the prompts share a prefix of >= 256 "
         "tokens. Version-aware: on engines that enable it by default (vLLM V1 >= 0.8, SGLang, TGI >= 2.3) the "
         "advice is to remove the flag that turned it off, never to 'enable' it.",
    why="Without reuse every request recomputes the shared system prompt's KV: thousands of tokens of "
        "duplicate prefill on each TTFT (the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM): ~80 ms saved per request with a 400-token prompt).",
    example="bench.config.shared_prefix_len = 1024, bench.c8.server.prefix_cache_hit_rate = 0.02",
    fix="Turn prefix caching on (or stop turning it off), and put the shared system prompt first, "
        "byte-identical across requests.",
    references=("a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Step 2: KV Cache Optimization and PagedAttention' (prefix caching is critical for shared system prompts)",
                "claim:vllm.v1-prefix-caching-0.8", "claim:vllm.prefix-caching-unset",
                "claim:vllm.defaults-from-model-0.12", "claim:vllm.prefix-caching-per-model",
                "claim:vllm.prefix-caching-model-kinds", "claim:vllm.cache-config-info",
                "claim:vllm.cache-config-info-gauge", "claim:sglang.disable-radix-cache",
                "claim:tgi.prefix-caching-default-on-2.3", "claim:tgi.prefix-caching-default-on",
                "vLLM docs, 'Automatic Prefix Caching'"),
), thresholds=("KV005.min_hit_rate_frac", "KV005.min_shared_prefix_tokens"))
def kv005(ctx: Context) -> Hit | None:
    engine = ctx.engine()
    enabled, where = _prefix_caching(ctx, engine)
    shared = ctx.bench_config().shared_prefix_len
    evidence: dict[str, Any] = {}
    if shared is not None:
        evidence["bench.config.shared_prefix_len"] = shared
    if enabled is False:
        evidence[where] = False
        return _turned_off(ctx, engine, shared, evidence)
    # Prefix caching is on (or unknown): judge its hit rate where the traffic shares a prefix.
    if shared is None:
        raise MissingInput("prefix caching is not off, and whether the prompts share a prefix is unknown "
                           "(bench.config.shared_prefix_len)")
    if shared < ctx.th("KV005.min_shared_prefix_tokens"):
        return None
    low = _low_hit_rates(ctx)
    if not low:
        return None
    for lv, r in low:
        evidence[f"{level_label(lv)}.server.prefix_cache_hit_rate"] = r
    assumed = where is None or where.startswith("default")
    return _rarely_hits(engine, shared, min(r for _, r in low), evidence, assumed)


def _per_model(engine: EngineInfo) -> bool:
    """Does the engine decide prefix caching per model (vLLM 0.12 and later)?"""
    return engine.module is not None and engine.module.prefix_caching_per_model


def _prefix_caching(ctx: Context, engine: EngineInfo) -> tuple[Any, str | None]:
    """Whether prefix caching is on, and where that was read: the server's setting, else the engine's
    version-aware default when it was not told."""
    enabled, where = ctx.setting("enable_prefix_caching", "enable_prefix_caching")
    if enabled is None or ctx.cfg_source("enable_prefix_caching") == "default":
        default = engine.default_on("prefix_caching")  # version-aware: what this engine does when not told
        if default is not None:
            enabled, where = default, f"default for {engine.label}"
    return enabled, where


def _low_hit_rates(ctx: Context) -> list[tuple[BenchLevel, float]]:
    """The bench levels whose prefix cache hit rate is low; MissingInput when no level measured it."""
    rates = [(lv, s.prefix_cache_hit_rate) for lv, s in ctx.level_server() if s.prefix_cache_hit_rate is not None]
    if not rates:
        raise MissingInput("the prefix cache hit rate was not measured during the bench")
    return [(lv, r) for lv, r in rates if r < ctx.th("KV005.min_hit_rate_frac")]


def _turned_off(ctx: Context, engine: EngineInfo, shared: Any, evidence: dict[str, Any]) -> Hit:
    default_on = engine.default_on("prefix_caching")
    off_flag = DISABLING_FLAGS[Feature.PREFIX_CACHING].get(engine.name or "")
    if default_on and off_flag:
        text = f"Remove `{off_flag}`: {engine.label} caches prefixes by default" + (
            f" for attention models ({_PER_MODEL})."
            if _per_model(engine) else ".")
        cmds: tuple[str, ...] = ()
    else:
        cmds, note = engine_flags({"enable_prefix_caching": None}, engine)
        text = "Enable automatic prefix caching." + note
    matters = shared is not None and shared >= ctx.th("KV005.min_shared_prefix_tokens")
    return Hit(
        title="Prefix caching is turned off",
        message="Prefix caching is disabled, so every request recomputes any prefix it shares with others"
                + (f" (this traffic shares {shared} tokens)." if matters else "."),
        evidence=evidence, severity=Severity.MEDIUM if matters else Severity.LOW,
        certainty=Certainty.CONFIRMED if matters else Certainty.POSSIBLE, impact=0.4 if matters else 0.1,
        fix=Fix(text + " Put the shared system prompt first, identical across requests.", cmds),
    )


def _rarely_hits(engine: EngineInfo, shared: Any, lowest: float, evidence: dict[str, Any], assumed: bool) -> Hit:
    """`assumed`: only the engine's default says prefix caching is on."""
    if assumed and _per_model(engine):
        # Only the default says it is on, and vLLM's default depends on the model: do not claim it is on.
        return Hit(
            title="The prefix cache rarely hits although prompts share a prefix",
            message=f"Prompts share a {shared}-token prefix but the prefix cache hit rate stays at "
                    f"{pct(lowest)}. Whether prefix caching is on was not seen: {engine.label} "
                    f"turns it on by default for attention models, but {_PER_MODEL}.",
            evidence={**evidence, "derived.prefix_caching_state": "assumed default"},
            certainty=Certainty.POSSIBLE, impact=0.4,
            fix=Fix("Check the enable_prefix_caching label of `vllm:cache_config_info` in /metrics (or the startup "
                    "args). Off with no flag saying so means vLLM's per-model default turned it off for this "
                    "architecture. On means something before the shared part differs: put the shared system prompt "
                    "first, byte-identical across requests.", ()),
        )
    return Hit(
        title="The prefix cache rarely hits although prompts share a prefix",
        message=f"Prompts share a {shared}-token prefix but the prefix cache hit rate stays at "
                f"{pct(lowest)}: something before the shared part differs between requests.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.4,
        fix=Fix("Put the shared system prompt (and few-shot examples) first, byte-identical across requests; move "
                "anything that varies (timestamps, user ids, request ids) after it. Check that the cache is not "
                "evicted by KV pressure (KV001).", ()),
    )
