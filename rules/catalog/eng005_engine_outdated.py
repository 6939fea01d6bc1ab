"""ENG005 (engine-outdated): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG005/."""
from __future__ import annotations

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("ENG005", "engine-outdated", Severity.LOW, ("server_config",), RuleDoc(
    what="The engine version predates the defaults this catalog assumes: vLLM < 0.17 (FlashAttention 3/4 "
         "chosen automatically; < 0.8 still the V0 engine), TGI < 3.0 (prefix caching and chunked prefill "
         "on by default).",
    why="Newer engines enable the big optimizations by default (V1 scheduler, chunked prefill, prefix "
        "caching, FA3/FA4): an old one leaves them off or slower (seed 000 §5).",
    example="server_config.engine = 'vllm', server_config.engine_version = '0.6.3'",
    fix="Upgrade the engine (vLLM >= 0.17, TGI >= 3.0), then re-run `triage bench` to compare.",
    references=("seed 000 §5 (vLLM v0.17+ with FlashAttention 3/4)", "vLLM 0.8.0 release notes (V1 by default)"),
))
def eng005(ctx: Context) -> Hit | None:
    engine = ctx.identified_engine()
    v = engine.version_tuple
    if engine.name in ("vllm", "tgi") and v is None:
        raise MissingInput(f"server_config.engine_version was not measured for {engine.name}")
    if engine.name == "vllm" and v < (0, 17, 0):
        old = engine.v0
        return Hit(
            title="The vLLM version is outdated",
            message=f"vLLM {engine.version}" + (" runs the V0 engine (no V1 scheduler, chunked prefill and prefix "
                                                 "caching off by default)" if old else
                                                 " predates automatic FlashAttention 3/4 (0.17)") + ".",
            evidence={"server_config.engine": "vllm", "server_config.engine_version": engine.version,
                      "derived.v0_engine": old},
            severity=Severity.MEDIUM if old else Severity.LOW, certainty=Certainty.CONFIRMED,
            impact=0.4 if old else 0.2,
            fix=Fix("Upgrade vLLM, then re-run `triage bench` against the same traffic to confirm the gain.",
                    ("pip install -U 'vllm>=0.17'",)),
        )
    if engine.name == "tgi" and v < (3, 0, 0):
        return Hit(
            title="The TGI version is outdated",
            message=f"TGI {engine.version} predates 3.0, which turned on prefix caching and chunked prefill by default.",
            evidence={"server_config.engine": "tgi", "server_config.engine_version": engine.version},
            certainty=Certainty.CONFIRMED, impact=0.2,
            fix=Fix("Upgrade to TGI 3.x (ghcr.io/huggingface/text-generation-inference:3 or newer).", ()),
        )
    return None
