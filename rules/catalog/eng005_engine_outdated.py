"""ENG005 (engine-outdated): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG005/.

Each engine module lists its milestones (triage/engines/<engine>.py): the release from which it does something
better by default, read from the engine's own source. vLLM: the V1 engine (0.8), FlashAttention 3 on Hopper
(SM90, from 0.7: claim vllm.fa3-on-sm90-0.7; the truth tables' flag starts at 0.8.5) and FlashAttention 4 on SM100, which matters only where FlashAttention was chosen:
SM100's default backend is FlashInfer (claims vllm.sm100-defaults-to-flashinfer, vllm.fa4-on-sm100). TGI:
prefix caching on by default from 2.3, prefill chunking from 3.0. Seed 000's "vLLM >= 0.17 picks FA3/FA4" is
only partly right; triage follows the source.
"""
from __future__ import annotations

from triage.core.probe_data import LogsData, ServerProcessData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.engines.base import Milestone
from triage.engines.truth import version_key
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("ENG005", "engine-outdated", Severity.LOW, ("server_config",), RuleDoc(
    what="The engine version predates a default this GPU would use: vLLM still on the V0 engine (< 0.8), a vLLM "
         "that does not yet pick FlashAttention 3 on Hopper (or FlashAttention 4 on SM100 where FlashAttention "
         "was chosen); TGI before 2.3 (prefix caching) or 3.0 (prefill chunking on by default). Medium for a whole "
         "engine generation (vLLM V0) when the deployment shows KV pressure or preempts; an opportunity otherwise.",
    why="Newer engines enable the big optimizations by default (V1 scheduler, chunked prefill, prefix "
        "caching, the newest FlashAttention for the GPU): an old one leaves them off or slower.",
    example="server_config.engine = 'vllm', server_config.engine_version = '0.6.3'",
    fix="Upgrade the engine to the first version with the missing default (named in the finding), then "
        "re-run `triage bench` to compare.",
    references=("claim:vllm.v1-default-0.8", "claim:vllm.v1-chunked-prefill-0.8", "claim:vllm.v1-prefix-caching-0.8",
                "claim:vllm.fa3-on-sm90-0.7", "claim:vllm.fa3-on-sm90",
                "claim:vllm.sm100-defaults-to-flashinfer", "claim:vllm.fa4-on-sm100",
                "claim:tgi.prefix-caching-default-on-2.3", "claim:tgi.prefill-chunking-default-on",
                "'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Unoptimized Attention Implementation (FlashAttention)', says 'vLLM v0.17+ picks FA3/FA4': only partly right; triage follows the source",
                "vLLM 0.8.0 release notes (V1 by default)", "claim:tgi.prefill-chunking-default-off-2.4"),
))
def eng005(ctx: Context) -> Hit | None:
    engine = ctx.identified_engine()
    module = engine.module
    if module is None or not module.milestones:
        return None
    v = engine.version_tuple
    if v is None:
        raise MissingInput(f"server_config.engine_version was not measured for {engine.name}")
    missing = [m for m in module.milestones if v < (version_key(m.version) or (0, 0, 0)) and _applies(ctx, m, engine)]
    if engine.v0 and not any(m.major_change for m in missing):
        missing = [m for m in module.milestones if m.major_change] + missing
    if not missing:
        return None
    first = max((version_key(m.version) or (0, 0, 0), m.version) for m in missing)[1]
    whats = "; ".join(f"{m.what} from {module.display} {m.version}" for m in missing)
    evidence = {"server_config.engine": engine.name, "server_config.engine_version": engine.version}
    major = any(m.major_change for m in missing)
    symptom = _kv_symptom(ctx, evidence) if major else False
    return Hit(
        title=f"The {module.display} version is outdated",
        message=f"{module.display} {engine.version} predates what newer releases do by default: {whats}.",
        evidence=evidence, severity=Severity.MEDIUM if symptom else None, certainty=Certainty.CONFIRMED,
        kind=FindingKind.PROBLEM if symptom else FindingKind.OPPORTUNITY,
        impact=0.4 if major else 0.2,
        fix=Fix(f"Upgrade {module.display} to {first} or newer, then re-run `triage bench` against the same "
                "traffic to confirm the gain.",
                (module.upgrade.format(v=first),) if module.upgrade else ()),
    )


def _applies(ctx: Context, m: Milestone, engine) -> bool:
    """A GPU-specific milestone needs that GPU generation (and nothing to say without the GPU); one that
    matters only when the server chose something needs that choice on its command line or environment."""
    if m.gpu_major is not None:
        try:
            if ctx.compute_capability()[0] != m.gpu_major:
                return False
        except MissingInput:
            return False
    if m.needs_choice is not None:
        proc = ctx.seen(ServerProcessData)
        said = " ".join(proc.cmdline or ()) + " " + " ".join(f"{k}={v}" for k, v in (proc.debug_env or {}).items())
        return m.needs_choice in said
    return True


def _kv_symptom(ctx: Context, evidence: dict) -> bool:
    """A symptom the newer engine generation's scheduler addresses: KV pressure now (queueing or preemptions), or
    preemptions in the server's log. Without one, an old engine is an opportunity (docs/RULES.md)."""
    try:
        limited, kv_evidence = ctx.kv_pressure()
    except MissingInput:
        limited, kv_evidence = False, {}
    preempted = ctx.seen(LogsData).preemptions_total
    if preempted:
        kv_evidence["logs.preemptions_total"] = preempted
    evidence.update(kv_evidence if limited or preempted else {})
    return bool(limited or preempted)
