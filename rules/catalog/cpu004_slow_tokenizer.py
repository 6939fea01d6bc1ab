"""CPU004 (slow-tokenizer): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/CPU004/."""
from __future__ import annotations

from triage.core.probe_data import LogsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("CPU004", "slow-tokenizer", Severity.MEDIUM, ("logs",), RuleDoc(
    what="The server log says 'Using a slow tokenizer' (the model has no fast tokenizer.json, or the slow one "
         "was forced).",
    why="The Python tokenizer is 10-100x slower than the Rust one and holds the GIL: with long prompts it "
        "adds to every TTFT and caps the request rate of the front end.",
    example="logs.slow_tokenizer = true",
    fix="Provide a fast tokenizer (tokenizer.json; convert with transformers' AutoTokenizer(use_fast=True) "
        "and save_pretrained) and use `--tokenizer-mode auto`.",
    references=("claim:vllm.slow-tokenizer-warning", "claim:vllm.tokenizer-mode-auto",
                "claim:sglang.tokenizer-mode-auto"),
))
def cpu004(ctx: Context) -> Hit | None:
    slow = ctx.measured(ctx.need(LogsData).slow_tokenizer, "logs.slow_tokenizer")
    if not slow:
        return None
    cmds, note = engine_flags({"tokenizer_mode_auto": None}, ctx.engine())
    return Hit(
        title="The server uses a slow (Python) tokenizer",
        message="The server log reports a slow tokenizer: tokenization runs in Python under the GIL.",
        evidence={"logs.slow_tokenizer": True, "logs.path": ctx.seen(LogsData).path},
        certainty=Certainty.CONFIRMED, impact=0.3,
        fix=Fix("Ship a fast tokenizer.json with the model (load it with AutoTokenizer(use_fast=True) and "
                "save_pretrained), and do not force the slow mode." + note, cmds),
    )
