"""SCHED006 (ttft-superlinear-in-context): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED006/."""
from __future__ import annotations

import math

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.fmt import ms
from triage.rules.registry import rule


@rule("SCHED006", "ttft-superlinear-in-context", Severity.MEDIUM, ("bench",), RuleDoc(
    what="At batch 1, TTFT grows faster than linearly with prompt length beyond 8K tokens (TTFT ~ len^k with "
         "k >= 1.5), the mark of naive O(N^2) attention or an old engine.",
    why="Attention that materializes the N x N score matrix makes prefill quadratic in memory traffic; "
        "FlashAttention keeps it in SRAM (seed 000 §5: 2.2x TTFT at 32K).",
    example="bench.c1 (prompt 2048) ttft_ms.p50 = 180, bench.c1 (prompt 16384) ttft_ms.p50 = 4900",
    fix="Use a FlashAttention backend; upgrade the engine (vLLM >= 0.17 picks FA3/FA4 on Hopper/Blackwell).",
    references=("seed 000 §5 (TTFT slow at 32K+, fast at 2K: no FlashAttention)", "seed 004 §6"),
), thresholds=("SCHED006.min_context_tokens", "SCHED006.superlinear_exponent"))
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
    if exponent < ctx.th("SCHED006.superlinear_exponent"):
        return None
    engine = ctx.engine()
    upgrade = "upgrade to vLLM >= 0.17, which selects FlashAttention 3/4 automatically" if engine.name == "vllm" \
        else "use an engine with a FlashAttention backend (vLLM >= 0.17, SGLang, TGI)"
    return Hit(
        title="TTFT grows faster than linearly with prompt length",
        message=f"At batch 1, TTFT grows as prompt_len^{exponent:.2f} from {short_len:.0f} to {long_len:.0f} "
                f"tokens ({ms(short_ttft)} -> {ms(long_ttft)}): attention is not using a flash kernel.",
        evidence={"derived.short_prompt_tokens": short_len, "derived.short_ttft_ms_p50": short_ttft,
                  "derived.long_prompt_tokens": long_len, "derived.long_ttft_ms_p50": long_ttft,
                  "derived.ttft_growth_exponent": round(exponent, 2), "derived.engine": engine.label},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix(f"Use a FlashAttention backend: {upgrade}.", ("python -c 'import vllm; print(vllm.__version__)'",)
                if engine.name == "vllm" else ()),
    )
