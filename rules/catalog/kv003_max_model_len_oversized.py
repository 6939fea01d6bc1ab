"""KV003 (max-model-len-oversized): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV003/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.catalog._kv_sched_shared import kv003_context_cap
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("KV003", "max-model-len-oversized", Severity.MEDIUM, ("server_config", "bench"), RuleDoc(
    what="`max_model_len` is >= 4x the longest observed prompt+output while the server is KV-limited.",
    why="With paged KV (vLLM, SGLang) an oversized limit costs nothing by itself; it costs when it admits a "
        "few very long requests, each holding thousands of KV blocks while dozens of normal ones queue or are "
        "preempted. TGI reserves KV for a request's prompt plus its max_new_tokens when it admits it (a request "
        "that sets none gets --max-total-tokens minus its prompt); from 3.0 a request without max_new_tokens "
        "reserves at most 1024 new tokens at a time, and from 3.1.1 one that sets it does too (3.0 and 3.1.0 "
        "reserve all of an explicit max_new_tokens). A limit sized to the traffic bounds both ('Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)').",
    example="server_config.max_model_len = 32768, bench.c16.input_tokens_mean+output_tokens_mean = 4096, "
            "server_metrics.kv_cache_usage_frac_max = 0.98",
    fix="`--max-model-len <observed p99 x 1.25>`, rounded up to 256 (e.g. 5120 for 4096-token requests).",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'No KV Cache Optimization (PagedAttention)' (reduce --max-model-len if contexts are shorter)",
                "'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Quick Reference: If You See X, Try Y' (requests queuing: reduce --max-model-len)",
                "claim:vllm.max-model-len-meaning", "claim:vllm.kv-blocks-on-demand", "claim:sglang.context-length",
                "claim:tgi.max-total-tokens-meaning",
                "claim:tgi.reserves-prompt-plus-new-tokens", "claim:tgi.max-new-tokens-default-2.4",
                "claim:tgi.generation-chunk-1024", "claim:tgi.generation-chunk-1024-3.0",
                "claim:tgi.generation-reserve-explicit-max-new-tokens",
                "claim:tgi.default-generation-length"),
), thresholds=("KV003.oversize_ratio", "KV003.headroom_ratio", "common.kv_limited_usage_frac"))
def kv003(ctx: Context) -> Hit | None:
    max_len = ctx.measured(ctx.need(ServerConfigData).max_model_len, "server_config.max_model_len")
    observed, where = ctx.observed_max_total_tokens()
    if max_len < ctx.th("KV003.oversize_ratio") * observed:
        return None
    limited, kv_evidence = ctx.kv_pressure()
    if not limited:
        return None
    proposed = kv003_context_cap(ctx, observed)
    cmds, note = engine_flags({"max_model_len": proposed}, ctx.engine())
    return Hit(
        title="max_model_len is far larger than the traffic needs",
        message=f"max_model_len is {max_len} tokens, {max_len / observed:.0f}x the longest observed request "
                f"({observed:.0f} tokens), while the KV cache is the limit.",
        evidence={"server_config.max_model_len": max_len, where: observed, **kv_evidence,
                  "derived.proposed_max_model_len_tokens": proposed},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix(f"Cap the context at {proposed} tokens (observed {observed:.0f} x {ctx.th('KV003.headroom_ratio')}, "
                "rounded up to 256); requests longer than that will be rejected, so check your real p99 first."
                + note, cmds),
    )
