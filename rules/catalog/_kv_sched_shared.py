"""Helpers shared by the KV cache and scheduling rules."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.core.probe_data import ServerConfigData
from triage.rules.base import MissingInput
from triage.rules.context import Context
from triage.rules.engine_info import EngineInfo
from triage.rules.fmt import round_up


def kv003_context_cap(ctx: Context, observed_tokens: float) -> int:
    """KV003's proposed max_model_len: the longest observed prompt+output with headroom, to a multiple of 256."""
    return round_up(observed_tokens * ctx.th("KV003.headroom_ratio"), 256)


@dataclass(slots=True)
class _Relief:
    """What kv_relief gathers: the knobs to set, why each, and the settings they were computed from."""
    evidence: dict[str, Any]
    knobs: dict[str, object] = field(default_factory=dict)
    why: list[str] = field(default_factory=list)


def kv_relief(ctx: Context, engine: EngineInfo,
              evidence: dict[str, Any] | None = None) -> tuple[dict[str, object], list[str]]:
    """The knobs that give the KV cache more room, with values from the evidence, and why each.
    The settings the values were computed from are added to `evidence`."""
    relief = _Relief(evidence if evidence is not None else {})
    pinned = _pinned_blocks(ctx, relief)
    _memory_share(ctx, engine, pinned, relief)
    _context_cap(ctx, relief)
    _fp8_kv(ctx, pinned, relief)
    return relief.knobs, relief.why


def _pinned_blocks(ctx: Context, relief: _Relief) -> Any:
    """The hand-set block count, or None. When set, the memory share and the KV dtype no longer size the cache."""
    pinned, pinned_src = ctx.setting(None, "num_gpu_blocks_override")
    if pinned is not None and pinned_src is not None:
        relief.evidence[pinned_src] = pinned
        relief.why.append(f"remove the block-count override that pins the cache at {pinned} blocks whatever the "
                          "memory share (vLLM `--num-gpu-blocks-override`, the reference engine's `--num-kv-blocks`), "
                          "or raise it")
    return pinned


def _memory_share(ctx: Context, engine: EngineInfo, pinned: Any, relief: _Relief) -> None:
    """Raise the memory share the engine gives to weights and KV, unless a block count pins the cache."""
    target = ctx.th("KV001.gpu_memory_utilization_target")
    util, util_src = ctx.setting("gpu_memory_utilization", "gpu_memory_utilization")
    if util_src is not None:
        relief.evidence[util_src] = util
    if pinned is not None:
        return
    module = engine.module
    if module is not None:
        # Each engine's own meaning: vLLM's share is all it may take (0.92), SGLang's excludes its activation
        # reserve (claim sglang.mem-fraction-static-meaning), TGI's is the whole GPU by default.
        proposed, reason = module.memory_share_target(util, ctx.vram_bytes(), target)
        if proposed is not None:
            relief.knobs.update(gpu_memory_utilization=f"{proposed:.2f}")
        if proposed is not None or module.memory_share == "static":
            relief.why.append(reason)
    elif util is None or util < target:
        relief.knobs.update(gpu_memory_utilization=f"{target:.2f}")
        relief.why.append(f"raise the memory share for KV to {target:.2f}"
                          + (f" (now {util})" if util is not None else ""))


def _observed_total_tokens(ctx: Context) -> tuple[float | None, str | None]:
    try:
        return ctx.observed_max_total_tokens()
    except MissingInput:
        return None, None


def _context_cap(ctx: Context, relief: _Relief) -> None:
    """Cap the context at the longest observed prompt+output with headroom, when that is below max_model_len."""
    max_len = ctx.seen(ServerConfigData).max_model_len
    observed, where = _observed_total_tokens(ctx)
    if max_len is None or observed is None:
        return
    proposed = kv003_context_cap(ctx, observed)
    if proposed < max_len:
        relief.evidence["server_config.max_model_len"] = max_len
        relief.evidence[where] = observed
        relief.knobs.update(max_model_len=proposed)
        relief.why.append(f"cap the context at {proposed} tokens (the bench's longest prompt+output, {observed:.0f}, "
                          f"x {ctx.th('KV003.headroom_ratio')}; check that production's p99 is no longer), "
                          f"down from {max_len}")


def _fp8_capability(ctx: Context) -> tuple[bool, tuple[int, int] | None]:
    try:
        return ctx.fp8_native()
    except MissingInput:
        return False, None


def _fp8_kv(ctx: Context, pinned: Any, relief: _Relief) -> None:
    """Store the KV cache in FP8 where the GPU runs FP8 natively and the cache is 16-bit, unless pinned."""
    dtype, dtype_src = ctx.setting("kv_cache_dtype", "cache_dtype")
    native, cc = _fp8_capability(ctx)
    if pinned is None and cc is not None and native and str(dtype or "auto").lower() in SIXTEEN_BIT_KV:
        relief.evidence[dtype_src or "server_config.kv_cache_dtype"] = dtype
        relief.evidence["gpu.compute_capability"] = list(cc)
        relief.knobs.update(kv_cache_dtype_fp8=None)
        relief.why.append("store the KV cache in FP8 (half the bytes per token)")


SIXTEEN_BIT_KV = frozenset({"auto", "fp16", "bf16", "float16", "bfloat16", "half"})
