"""SCHED004 (throughput-not-scaling): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED004/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import seqs_at_least
from triage.rules.registry import rule


@rule("SCHED004", "throughput-not-scaling", Severity.HIGH, ("bench",), RuleDoc(
    what="Output tokens/s grows less than 2x from concurrency 1 to 16 (a batching engine gives far more than "
         "2x, as decode is memory-bound and batching amortizes the weight reads).",
    why="Flat throughput under concurrency means requests are processed one (or a few) at a time: a "
        "non-batching engine, a tiny `--max-num-seqs`, or a single-request proxy in front ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Single-Request Serving Instead of Continuous Batching').",
    example="bench.c1.output_tokens_per_s = 41, bench.c16.output_tokens_per_s = 55",
    fix="Use a continuous-batching engine (vLLM, SGLang, TGI); check `--max-num-seqs`; remove any "
        "one-at-a-time proxy or worker pool in front of the engine.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Single-Request Serving Instead of Continuous Batching' (throughput doesn't scale with concurrency)", "'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Quick Reference: If You See X, Try Y'",
                "an explainer of inference as a memory-bound problem, 'what inference actually is' (batch=1 vs batch=128 tokens/s)", "claim:vllm.max-num-seqs-meaning",
                "claim:sglang.max-running-requests"),
), thresholds=("SCHED004.min_scaling_x", "SCHED004.high_concurrency"))
def sched004(ctx: Context) -> Hit | None:
    by_c = {lv.concurrency: lv for lv in ctx.levels() if lv.concurrency and lv.output_tokens_per_s}
    if 1 not in by_c:
        raise MissingInput("no valid bench level at concurrency 1 with a throughput")
    high = ctx.th("SCHED004.high_concurrency")
    candidates = [c for c in by_c if c >= high]
    if not candidates:
        raise MissingInput(f"no valid bench level at concurrency >= {high:.0f}")
    c_hi = min(candidates)
    lo, hi = by_c[1], by_c[c_hi]
    ratio = hi.output_tokens_per_s / lo.output_tokens_per_s
    if ratio >= ctx.th("SCHED004.min_scaling_x"):
        return None
    engine = ctx.engine()
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    cmds: tuple[str, ...] = ()
    text = ("Serve with a continuous-batching engine (vLLM, SGLang, TGI), and remove any proxy or worker pool "
            "that forwards one request at a time.")
    if seqs is not None and seqs < c_hi:
        cmds, note = engine_flags({"max_num_seqs": seqs_at_least(max(c_hi, seqs * 2))}, engine)
        text = f"max_num_seqs={seqs} caps the batch below the offered concurrency: raise it." + note
    return Hit(
        title="Throughput does not scale with concurrency",
        message=f"Output throughput grows only {ratio:.1f}x from concurrency 1 to {c_hi} "
                f"({lo.output_tokens_per_s:.0f} -> {hi.output_tokens_per_s:.0f} tok/s): requests are not batched.",
        evidence={f"{level_label(lo)}.output_tokens_per_s": lo.output_tokens_per_s,
                  f"{level_label(hi)}.output_tokens_per_s": hi.output_tokens_per_s,
                  "derived.scaling_x": round(ratio, 2)},
        certainty=Certainty.CONFIRMED, impact=0.9, fix=Fix(text, cmds),
    )
