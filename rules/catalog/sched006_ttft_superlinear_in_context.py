"""SCHED006 (ttft-superlinear-in-context): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED006/.

Attention stays O(N^2) in FLOPs with FlashAttention; what a flash kernel removes is the N x N score matrix
in memory. Per layer, a causal prefill of N tokens costs about 24*d^2*N FLOPs in the linear layers and
2*d*N^2 in attention (d = model width), so attention overtakes the linear layers at N* = 12*d tokens. A
healthy prefill therefore grows as N*(1 + N/N*), and a small model at 32K grows faster than len^1.5 with
no fault at all. The rule fires only when TTFT grows clearly faster than that curve.
"""
from __future__ import annotations

import math

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.fmt import ms
from triage.rules.registry import rule


def flash_exponent(short_tokens: float, long_tokens: float, hidden_size: float) -> float:
    """The TTFT ~ len^k exponent a compute-bound FlashAttention prefill shows between the two lengths."""
    crossover = 12.0 * hidden_size

    def cost(n: float) -> float:
        return n * (1.0 + n / crossover)

    return math.log(cost(long_tokens) / cost(short_tokens)) / math.log(long_tokens / short_tokens)


@rule("SCHED006", "ttft-superlinear-in-context", Severity.MEDIUM, ("bench",), RuleDoc(
    what="At batch 1, TTFT grows with prompt length clearly faster than a FlashAttention prefill would at those "
         "lengths (attention FLOPs are O(N^2) in every kernel; a naive kernel also moves the N x N scores "
         "through memory), beyond 8K tokens.",
    why="Attention that materializes the N x N score matrix makes prefill quadratic in memory traffic, not "
        "just in FLOPs; FlashAttention keeps the scores on chip ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Unoptimized Attention Implementation (FlashAttention)': 2.2x TTFT at 32K).",
    example="bench.c1 (prompt 2048) ttft_ms.p50 = 180, bench.c1 (prompt 16384) ttft_ms.p50 = 4900",
    fix="Use a FlashAttention backend: check the server log's attention-backend line, and upgrade an engine "
        "that has none for this GPU.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Unoptimized Attention Implementation (FlashAttention)' (TTFT slow at 32K+, fast at 2K: no FlashAttention)", "an explainer of inference as a memory-bound problem, 'FlashAttention'",
                "FlashAttention (Dao et al., 2022): exact attention, O(N^2) FLOPs, O(N) memory",
                "'Why Your LLM Inference Is Slow (And How to Fix It)''s 'superlinear means no flash kernel' ignores the O(N^2) FLOPs; triage compares with "
                "the FLOP curve instead", "claim:vllm.attention-backend-log", "claim:vllm.attention-backend-flag",
                "claim:vllm.attention-backend-env-0.14"),
), thresholds=("SCHED006.min_context_tokens", "SCHED006.excess_exponent", "SCHED006.assumed_hidden_size"))
def sched006(ctx: Context) -> Hit | None:
    points = sorted(((lv.input_tokens_mean, lv.ttft_ms.p50, lv) for lv in ctx.levels()
                     if lv.concurrency == 1 and lv.input_tokens_mean and lv.ttft_ms.p50),
                    key=lambda t: t[0])
    lengths = {round(p[0]) for p in points}
    if len(lengths) < 2 or points[-1][0] < ctx.th("SCHED006.min_context_tokens"):
        raise MissingInput("needs batch-1 bench levels at two or more prompt lengths, the longest >= "
                           f"{ctx.th('SCHED006.min_context_tokens'):.0f} tokens (a context sweep)")
    long_len, long_ttft, _ = points[-1]
    base = [p for p in points if p[0] <= long_len / 2]
    if not base:
        raise MissingInput("the prompt lengths in the sweep are too close together to fit a growth exponent")
    short_len, short_ttft, _ = base[-1]
    exponent = math.log(long_ttft / short_ttft) / math.log(long_len / short_len)
    hidden = ctx.th("SCHED006.assumed_hidden_size")
    expected = flash_exponent(short_len, long_len, hidden)
    if exponent < expected + ctx.th("SCHED006.excess_exponent"):
        return None
    engine = ctx.engine()
    module = engine.module
    known = module.notes.get("attention_backend") if module is not None else None
    where = known[0][:1].lower() + known[0][1:].rstrip(".") if known else \
        "check which attention kernel the engine uses on this GPU"
    return Hit(
        title="TTFT grows faster than a FlashAttention prefill would",
        message=f"At batch 1, TTFT grows as prompt_len^{exponent:.2f} from {short_len:.0f} to {long_len:.0f} "
                f"tokens ({ms(short_ttft)} -> {ms(long_ttft)}); a FlashAttention prefill grows as "
                f"prompt_len^{expected:.2f} there even for a {hidden:.0f}-wide model. Attention is likely not "
                "using a flash kernel.",
        evidence={"derived.short_prompt_tokens": short_len, "derived.short_ttft_ms_p50": short_ttft,
                  "derived.long_prompt_tokens": long_len, "derived.long_ttft_ms_p50": long_ttft,
                  "derived.ttft_growth_exponent": round(exponent, 2),
                  "derived.flash_attention_exponent": round(expected, 2), "derived.engine": engine.label},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix(f"Use a FlashAttention backend: {where}.", ()),
    )
