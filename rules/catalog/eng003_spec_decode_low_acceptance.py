"""ENG003 (spec-decode-low-acceptance): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG003/."""
from __future__ import annotations

import json

from triage.core.probe_data import ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("ENG003", "spec-decode-low-acceptance", Severity.MEDIUM, ("server_metrics",), RuleDoc(
    what="Speculative decoding's draft acceptance rate is below 0.5.",
    why="Every rejected draft token is wasted work on both models; below ~50% acceptance speculation costs "
        "more than it saves, typically at high temperature or with a mismatched draft (the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Step 5: Speculative Decoding').",
    example="server_metrics.spec_decode_acceptance_rate = 0.31, server_config.speculative_config = "
            "{num_speculative_tokens: 5}",
    fix="Lower `num_speculative_tokens`, use a draft closer to the target (same family, fine-tuned alike), or "
        "disable speculation for high-temperature traffic.",
    references=("a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Step 5: Speculative Decoding' (speculative decoding: acceptance 75-85%; worse at high temperature)",
                "claim:vllm.spec-decode-counters", "claim:vllm.speculative-config-0.8", "claim:sglang.spec-accept-rate",
                "claim:sglang.speculative-num-draft-tokens"),
), thresholds=("ENG003.min_acceptance_frac",))
def eng003(ctx: Context) -> Hit | None:
    rate = ctx.seen(ServerMetricsData).spec_decode_acceptance_rate
    spec = ctx.seen(ServerConfigData).speculative_config
    if rate is None:
        if ctx.has("server_config") and spec is None:
            raise MissingInput("speculative decoding is not configured")
        raise MissingInput("server_metrics.spec_decode_acceptance_rate was not measured")
    if rate >= ctx.th("ENG003.min_acceptance_frac"):
        return None
    n = spec.get("num_speculative_tokens") if isinstance(spec, dict) else None
    cmds: tuple[str, ...] = ()
    if n:
        k = max(1, int(n) // 2)
        new = {**spec, "num_speculative_tokens": k}
        info = ctx.engine()
        cmds, _ = engine_flags({"speculative_config": f"'{json.dumps(new, sort_keys=True)}'",
                                "speculative_num_draft_tokens": k}, info)
    return Hit(
        title="Speculative decoding rejects most draft tokens",
        message=f"Only {pct(rate)} of draft tokens are accepted: speculation costs more than it saves.",
        evidence={"server_metrics.spec_decode_acceptance_rate": rate, "server_config.speculative_config": spec},
        certainty=Certainty.CONFIRMED, impact=0.3,
        fix=Fix("Propose fewer tokens per step" + (f" ({n} -> {max(1, int(n) // 2)})" if n else "") + ", use a draft "
                "model closer to the target, or turn speculation off for high-temperature traffic.", cmds),
    )
