"""KV008 (kv-cache-pinned-by-override): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV008/."""
from __future__ import annotations

import shlex

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.fix_commands import without
from triage.rules.registry import rule

# The flags that fix the KV cache's block count by hand, as each command line spells them (vLLM's, and the
# reference engine's own name beside it).
OVERRIDE_FLAGS = ("--num-gpu-blocks-override", "--num-kv-blocks")


@rule("KV008", "kv-cache-pinned-by-override", Severity.HIGH, ("server_metrics|server_config",), RuleDoc(
    what="A block-count override (vLLM `--num-gpu-blocks-override`, the reference engine's `--num-kv-blocks`) "
         "fixes the KV cache's size, and the cache is too small for the load: one max_model_len request does "
         "not fit, or the engine preempts, or the cache is full with requests waiting.",
    why="With the override the memory share no longer sizes the KV cache: vLLM allocates exactly that many "
        "blocks whatever the GPU holds. A value left from a test (or copied from another GPU) starves the cache, "
        "and every fix that raises the memory share does nothing.",
    example="server_metrics.cache_config.num_gpu_blocks_override = 40, server_config.max_model_len = 1024, "
            "server_metrics.num_preemptions_delta = 9",
    fix="Remove the override and let the memory share size the cache (`--gpu-memory-utilization`), or raise it "
        "to what the load needs.",
    references=("claim:vllm.num-gpu-blocks-override",
                "reference_engine/serve/cli.py (this repository): --num-kv-blocks, also spelled "
                "--num-gpu-blocks-override, overrides the byte budget"),
))
def kv008(ctx: Context) -> Hit | None:
    pinned, where = ctx.setting(None, "num_gpu_blocks_override")
    if pinned is None or where is None:
        return None
    evidence = {where: pinned}
    short = _too_short(ctx, evidence)
    try:
        limited, kv_evidence = ctx.kv_pressure()
    except MissingInput:
        limited, kv_evidence = False, {}
    if not short and not limited:
        return None
    evidence.update(kv_evidence)
    symptom = (f"one max_model_len request ({evidence['server_config.max_model_len']} tokens) does not fit"
               if short else "the engine is short of KV cache under this load")
    launch = ctx.launch_argv()
    unpinned = _unpinned(launch)
    return Hit(
        title="A block-count override pins the KV cache too small",
        message=f"The KV cache is fixed at {pinned} blocks by a block-count override, whatever the memory share: "
                f"{symptom}.",
        evidence=evidence, certainty=Certainty.CONFIRMED,
        severity=Severity.CRITICAL if short else None, impact=1.0,
        fix=Fix(f"Remove the block-count override ({' / '.join(OVERRIDE_FLAGS)} {pinned}) so that the memory "
                "share sizes the cache, or raise it to what the load needs; a fix that raises the memory share "
                "does nothing while it is set.", (unpinned,) if unpinned else ()))


def _too_short(ctx: Context, evidence: dict) -> bool:
    """Whether the pinned cache holds less than one max_model_len request (the figures go to `evidence`)."""
    max_len = ctx.seen(ServerConfigData).max_model_len
    try:
        capacity, where = ctx.kv_capacity_tokens()
    except MissingInput:
        return False
    if max_len is None or capacity >= max_len:
        return False
    evidence.update({"server_config.max_model_len": max_len, where: capacity})
    return True


def _unpinned(launch: tuple[str, ...] | None) -> str | None:
    """The server's own command without the override, when the command is known and carries it."""
    if not launch:
        return None
    argv = list(launch)
    for flag in OVERRIDE_FLAGS:
        argv = without(argv, flag)
    return shlex.join(argv) if len(argv) < len(launch) else None
