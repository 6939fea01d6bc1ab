"""Helpers shared by the KV cache and scheduling rules."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerConfigData
from triage.rules.base import MissingInput
from triage.rules.context import Context
from triage.rules.engine_info import EngineInfo
from triage.rules.fmt import round_up


def kv003_context_cap(ctx: Context, observed_tokens: float) -> int:
    """KV003's proposed max_model_len: the longest observed prompt+output with headroom, to a multiple of 256."""
    return round_up(observed_tokens * ctx.th("KV003.headroom_ratio"), 256)


def kv_relief(ctx: Context, engine: EngineInfo,
               evidence: dict[str, Any] | None = None) -> tuple[dict[str, object], list[str]]:
    """The knobs that give the KV cache more room, with values from the evidence, and why each.
    The settings the values were computed from are added to `evidence`."""
    knobs: dict[str, object] = {}
    why: list[str] = []
    evidence = evidence if evidence is not None else {}
    target = ctx.th("KV001.gpu_memory_utilization_target")
    pinned, pinned_src = ctx.setting(None, "num_gpu_blocks_override")
    if pinned is not None and pinned_src is not None:
        # The block count is fixed by hand: the memory share and the KV dtype no longer size the cache.
        evidence[pinned_src] = pinned
        why.append(f"remove the block-count override that pins the cache at {pinned} blocks whatever the memory "
                   "share (vLLM `--num-gpu-blocks-override`, the reference engine's `--num-kv-blocks`), or raise it")
    util, util_src = ctx.setting("gpu_memory_utilization", "gpu_memory_utilization")
    if util_src is not None:
        evidence[util_src] = util
    module = engine.module
    if pinned is None and module is not None:
        # Each engine's own meaning: vLLM's share is all it may take (0.92), SGLang's excludes its activation
        # reserve (claim sglang.mem-fraction-static-meaning), TGI's is the whole GPU by default.
        proposed, reason = module.memory_share_target(util, ctx.vram_bytes(), target)
        if proposed is not None:
            knobs.update(gpu_memory_utilization=f"{proposed:.2f}")
        if proposed is not None or module.memory_share == "static":
            why.append(reason)
    elif pinned is None and (util is None or util < target):
        knobs.update(gpu_memory_utilization=f"{target:.2f}")
        why.append(f"raise the memory share for KV to {target:.2f}" + (f" (now {util})" if util is not None else ""))
    max_len = ctx.seen(ServerConfigData).max_model_len
    try:
        observed, where = ctx.observed_max_total_tokens()
    except MissingInput:
        observed = None
    if max_len is not None and observed is not None:
        proposed = kv003_context_cap(ctx, observed)
        if proposed < max_len:
            evidence["server_config.max_model_len"] = max_len
            evidence[where] = observed
            knobs.update(max_model_len=proposed)
            why.append(f"cap the context at {proposed} tokens (the bench's longest prompt+output, {observed:.0f}, "
                       f"x {ctx.th('KV003.headroom_ratio')}; check that production's p99 is no longer), "
                       f"down from {max_len}")
    dtype, dtype_src = ctx.setting("kv_cache_dtype", "cache_dtype")
    try:
        native, cc = ctx.fp8_native()
    except MissingInput:
        native, cc = False, None
    if pinned is None and cc is not None and native and str(dtype or "auto").lower() in SIXTEEN_BIT_KV:
        evidence[dtype_src or "server_config.kv_cache_dtype"] = dtype
        evidence["gpu.compute_capability"] = list(cc)
        knobs.update(kv_cache_dtype_fp8=None)
        why.append("store the KV cache in FP8 (half the bytes per token)")
    return knobs, why


SIXTEEN_BIT_KV = frozenset({"auto", "fp16", "bf16", "float16", "bfloat16", "half"})
