"""KV007 (kv-capacity-below-max-len): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV007/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogEvent, LogsData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.catalog._log_shared import (
    configured,
    events,
    log_evidence,
    need_engine_log,
    restarts_note,
    where,
)
from triage.rules.context import Context
from triage.rules.engine_flags import engine_flags
from triage.rules.fmt import round_down
from triage.rules.registry import rule

GIB = 2**30


@rule("KV007", "kv-capacity-below-max-len", Severity.CRITICAL, ("logs",), RuleDoc(
    what="The server's log says the KV cache cannot hold one request of the configured maximum length, so the "
         "engine refused to start: vLLM V0's 'max seq len (N) is larger than the maximum number of tokens that can "
         "be stored in KV cache (M)', or V1's 'To serve at least one request with the model's max seq len (N), "
         "X GiB KV cache is needed, which is larger than the available KV cache memory (Y GiB)'. An engine that "
         "starts anyway with a cache smaller than its maximum length (SGLang's max_total_num_tokens below its "
         "context_len) is an opportunity: a request that long could never be admitted.",
    why="vLLM checks at start-up that one request of max_model_len tokens fits in the KV cache it could allocate "
        "after the weights and the profiled activations, and stops when it does not: the deployment serves "
        "nothing until the memory share or the context length changes.",
    example="logs.kv_below_max_len.max_model_len = 131072, logs.kv_below_max_len.kv_tokens = 50000",
    fix="Cap `--max-model-len` at what the cache holds (vLLM V1 logs the estimate), or give the KV cache the "
        "memory it lacks with `--gpu-memory-utilization`, only where the GPU has that memory (at most 0.95), "
        "or store the KV cache in FP8 on Ada, Hopper or Blackwell.",
    references=("claim:vllm.log-kv-too-small-0.6", "claim:vllm.log-kv-too-small-0.10", "claim:vllm.log-kv-too-small",
                "claim:vllm.log-kv-too-small-estimate-0.10", "claim:vllm.log-kv-too-small-estimate",
                "claim:vllm.gpu-memory-utilization-meaning", "claim:vllm.max-model-len-meaning",
                "claim:vllm.kv-cache-dtype-fp8", "claim:vllm.fp8-from-sm89"),
), thresholds=("KV007.max_gpu_memory_utilization",))
def kv007(ctx: Context) -> Hit | None:
    logs = need_engine_log(ctx)
    found = events(logs, "kv_below_max_len")
    if not found:
        return _started_too_small(ctx, logs)
    event = found[-1]
    max_len, fits = event.max_model_len or 0, event.kv_tokens
    evidence: dict[str, Any] = log_evidence(logs, event)
    knobs, why = _relief(ctx, logs, event, fits, evidence)
    cmds, note = engine_flags(knobs, ctx.engine())
    holds = f"holds {fits:,} tokens" if fits else "cannot hold it"
    return Hit(
        title="The KV cache cannot hold one request of max_model_len: the server did not start",
        message=f"The engine stopped at start-up ({where(logs, event)}): max_model_len is {max_len:,} tokens and "
                f"the KV cache it could allocate {holds}." + restarts_note(logs),
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=1.0,
        fix=Fix("; ".join(why) + "." + note, cmds),
    )


def _relief(ctx: Context, logs: LogsData, event: LogEvent, fits: int | None,
            evidence: dict[str, Any]) -> tuple[dict[str, object], list[str]]:
    knobs: dict[str, object] = {}
    why: list[str] = []
    if fits:
        cap = round_down(fits, 256) if fits >= 512 else fits
        knobs.update(max_model_len=cap)
        evidence["derived.proposed_max_model_len_tokens"] = cap
        why.append(f"cap the context at {cap:,} tokens (what the cache holds, down to a multiple of 256)")
    share = _share_that_fits(ctx, logs, event, evidence)
    if share is not None:
        knobs.update(gpu_memory_utilization=f"{share:.2f}")
        why.append(f"or raise the memory share to {share:.2f}, enough for {event.max_model_len:,} tokens on this GPU")
    elif event.kv_needed_gib:
        lack = event.kv_needed_gib - (event.kv_available_gib or 0.0)
        why.append(f"a larger memory share is not offered: the cache lacks {lack:.2f} GiB and "
                   + ("the GPU's size is not in the log" if ctx.vram_bytes() is None else
                      f"that would take the share above {ctx.th('KV007.max_gpu_memory_utilization'):.2f}"))
    why.append("FP8 KV (--kv-cache-dtype fp8) doubles the tokens it holds, on compute capability 8.9 or newer")
    return knobs, why


def _share_that_fits(ctx: Context, logs: LogsData, event: LogEvent, evidence: dict[str, Any]) -> float | None:
    """The memory share that gives the cache the GiB it lacks (V1 states both), when the GPU's size is known and
    the share stays at or below KV007.max_gpu_memory_utilization; else None."""
    needed, available = event.kv_needed_gib, event.kv_available_gib
    total = ctx.vram_bytes()
    current = configured(ctx, logs, "gpu_memory_utilization")
    if not needed or available is None or not total or current is None:
        return None
    share = round(float(current) + (needed - available) * GIB / total + 0.01, 2)
    evidence.update({"derived.gpu_total_gib": round(total / GIB, 2), "derived.gpu_memory_utilization_now": current,
                     "derived.gpu_memory_utilization_needed": share})
    return share if share <= ctx.th("KV007.max_gpu_memory_utilization") else None


def _started_too_small(ctx: Context, logs: LogsData) -> Hit | None:
    """An engine that starts anyway (SGLang, TGI, the reference engine) with a KV cache smaller than its maximum
    length: a request that long can never be admitted. No request failed yet, so it is an opportunity: a context cap
    at what the cache holds turns that failure into a clean rejection."""
    kv, max_len = logs.kv_cache_tokens, configured(ctx, logs, "max_model_len")
    if not kv or not isinstance(max_len, (int, float)) or kv >= max_len:
        return None
    cap = round_down(kv, 256) if kv >= 512 else kv
    cmds, note = engine_flags({"max_model_len": cap}, ctx.engine())
    return Hit(
        title="The KV cache holds less than one request of the maximum length",
        message=f"The server started with a KV cache of {kv:,} tokens and a maximum length of {int(max_len):,}: "
                "a request that long can never be admitted.",
        evidence={"logs.kv_cache_tokens": kv, "max_model_len": max_len, "derived.proposed_max_model_len_tokens": cap},
        certainty=Certainty.CONFIRMED, impact=0.3, severity=Severity.LOW, kind=FindingKind.OPPORTUNITY,
        fix=Fix(f"Cap the context at {cap:,} tokens, what the cache holds, so that longer requests are refused "
                "up front." + note, cmds),
    )
