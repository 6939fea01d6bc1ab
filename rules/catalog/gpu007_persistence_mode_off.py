"""GPU007 (persistence-mode-off): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU007/."""
from __future__ import annotations

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("GPU007", "persistence-mode-off", Severity.LOW, ("gpu",), RuleDoc(
    what="Persistence mode is disabled on a Linux server GPU.",
    why="Without persistence mode the driver tears the GPU state down whenever no process holds it, so the "
        "next start (or each short-lived client) pays seconds of initialization, and clocks/ECC settings "
        "can be lost between runs.",
    example="gpu.gpus[0].persistence_mode_enabled = false",
    fix="`sudo nvidia-smi -pm 1` (or run nvidia-persistenced as a service).",
    references=("DCGM diagnostic level r1 (persistence mode check)", "NVIDIA driver persistence documentation"),
))
def gpu007(ctx: Context) -> Hit | None:
    values = [(g, g.persistence_mode_enabled) for g in ctx.gpus()]
    if all(v is None for _, v in values):
        raise MissingInput("gpu.persistence_mode_enabled was not measured (not supported outside Linux)")
    off = [g for g, v in values if v is False]
    if not off:
        return None
    return Hit(
        title="GPU persistence mode is off",
        message=f"{len(off)} GPU(s) have persistence mode disabled: each time the GPU is released its driver "
                "state is torn down and rebuilt.",
        evidence={f"{gpu_key(g)}.persistence_mode_enabled": False for g in off},
        certainty=Certainty.CONFIRMED, impact=0.1,
        fix=Fix("Enable persistence mode (or run nvidia-persistenced).",
                ("sudo nvidia-smi -pm 1",)),
    )
