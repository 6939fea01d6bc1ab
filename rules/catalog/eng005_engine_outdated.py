"""ENG005 (engine-outdated): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG005/.

What each vLLM version turns on comes from the engine-truth tables (triage/core/engine_truth), read from
vLLM's own source: the V1 engine default (0.8), FlashAttention 3 on Hopper (SM90, `get_flash_attn_version`)
and FlashAttention 4 on SM100 only (`flash_attn_4_on_sm100`). Seed 000 says "vLLM >= 0.17 picks FA3/FA4";
the source says FA3 came much earlier on Hopper and FA4 is automatic on SM100 only, so triage follows it.
"""
from __future__ import annotations

import triage.core.engine_truth as truth
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule

# The GPU generation -> the truth-table default that says vLLM picks its best FlashAttention there.
_FLASH_BY_MAJOR = {9: ("flash_attn_3_on_sm90", "FlashAttention 3 on Hopper (SM90)"),
                   10: ("flash_attn_4_on_sm100", "FlashAttention 4 on Blackwell SM100")}


@rule("ENG005", "engine-outdated", Severity.LOW, ("server_config",), RuleDoc(
    what="The engine version predates a default this GPU would use: vLLM still on the V0 engine (< 0.8), or "
         "a vLLM that does not yet pick FlashAttention 3 on Hopper / FlashAttention 4 on SM100 (per the "
         "engine-truth tables); TGI < 3.0 (prefix caching and chunked prefill on by default).",
    why="Newer engines enable the big optimizations by default (V1 scheduler, chunked prefill, prefix "
        "caching, the newest FlashAttention for the GPU): an old one leaves them off or slower.",
    example="server_config.engine = 'vllm', server_config.engine_version = '0.6.3'",
    fix="Upgrade the engine to the first version with the missing default (named in the finding), then "
        "re-run `triage bench` to compare.",
    references=("vLLM source: vllm/attention/utils/fa_utils.py get_flash_attn_version (FA3 on SM90, PR #14244; "
                "FA4 on SM100, PR #32974) via triage/core/engine_truth",
                "seed 000 §5 says 'vLLM v0.17+ picks FA3/FA4': only partly right; triage follows the source",
                "vLLM 0.8.0 release notes (V1 by default)"),
))
def eng005(ctx: Context) -> Hit | None:
    engine = ctx.identified_engine()
    v = engine.version_tuple
    if engine.name in ("vllm", "tgi") and v is None:
        raise MissingInput(f"server_config.engine_version was not measured for {engine.name}")
    if engine.name == "vllm":
        return _vllm(ctx, engine)
    if engine.name == "tgi" and v < (3, 0, 0):
        return Hit(
            title="The TGI version is outdated",
            message=f"TGI {engine.version} predates 3.0, which turned on prefix caching and chunked prefill by default.",
            evidence={"server_config.engine": "tgi", "server_config.engine_version": engine.version},
            certainty=Certainty.CONFIRMED, impact=0.2,
            fix=Fix("Upgrade to TGI 3.x (ghcr.io/huggingface/text-generation-inference:3 or newer).", ()),
        )
    return None


def _vllm(ctx: Context, engine) -> Hit | None:
    table = truth.table("vllm", engine.version)
    evidence = {"server_config.engine": "vllm", "server_config.engine_version": engine.version,
                "derived.truth_table": table.label if table else None}
    if engine.v0:
        first = truth.first_with("vllm", "v1_engine_default")
        return Hit(
            title="The vLLM version is outdated",
            message=f"vLLM {engine.version} runs the V0 engine (no V1 scheduler; chunked prefill and prefix "
                    f"caching off by default). The V1 engine is the default from vLLM {first} in the tables.",
            evidence={**evidence, "derived.v0_engine": True},
            severity=Severity.MEDIUM, certainty=Certainty.CONFIRMED, impact=0.4,
            fix=Fix("Upgrade vLLM, then re-run `triage bench` against the same traffic to confirm the gain.",
                    (f"pip install -U 'vllm>={first}'",)),
        )
    try:
        major = ctx.compute_capability()[0]
    except MissingInput:
        return None  # which FlashAttention applies depends on the GPU: nothing to say without it
    if major not in _FLASH_BY_MAJOR or table is None:
        return None
    key, what = _FLASH_BY_MAJOR[major]
    if table.defaults.get(key):
        return None
    first = truth.first_with("vllm", key)
    if first is None:
        return None
    return Hit(
        title="The vLLM version predates the FlashAttention this GPU gets by default",
        message=f"vLLM {engine.version} does not pick {what} automatically; vLLM {first} does "
                f"(checked against {table.label} and vllm {first}'s source).",
        evidence={**evidence, "gpu.compute_capability_major": major, f"derived.{key}": False},
        certainty=Certainty.CONFIRMED, impact=0.2,
        fix=Fix(f"Upgrade vLLM to {first} or newer, then re-run `triage bench` against the same traffic.",
                (f"pip install -U 'vllm>={first}'",)),
    )
