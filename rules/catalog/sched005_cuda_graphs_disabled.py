"""SCHED005 (cuda-graphs-disabled): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED005/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.engines import DISABLING_FLAGS, engine_flags
from triage.rules.fmt import pow2_at_least
from triage.rules.registry import rule


@rule("SCHED005", "cuda-graphs-disabled", Severity.MEDIUM, ("server_config",), RuleDoc(
    what="The server runs with `--enforce-eager` (SGLang `--disable-cuda-graph`): CUDA graphs are off.",
    why="Decode steps are many small kernels; without CUDA graphs each is launched from Python, and launch "
        "overhead becomes a large share of TPOT, most of all at small batch (seed 002 lessons).",
    example="server_config.enforce_eager = true",
    fix="Remove `--enforce-eager` and keep `--max-num-seqs` a power of two so the captured graph sizes cover "
        "the batch.",
    references=("seed 002 lessons (CUDA graph capture; set max_num_seqs to a power of 2)",),
))
def sched005(ctx: Context) -> Hit | None:
    eager = ctx.measured(ctx.need(ServerConfigData).enforce_eager, "server_config.enforce_eager")
    if not eager:
        return None
    engine = ctx.engine()
    off_flag = DISABLING_FLAGS["cuda_graphs"].get(engine.name or "", "--enforce-eager")
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    extra = ""
    cmds: tuple[str, ...] = ()
    if seqs is not None and seqs & (seqs - 1):
        cmds, _ = engine_flags({"max_num_seqs": pow2_at_least(seqs)}, engine.name)
        extra = f" Also round max_num_seqs {seqs} up to {pow2_at_least(seqs)}."
    return Hit(
        title="CUDA graphs are disabled (eager mode)",
        message="The server runs in eager mode: every decode kernel is launched from Python.",
        evidence={"server_config.enforce_eager": True, "server_config.max_num_seqs": seqs},
        certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix(f"Remove `{off_flag}` from the server's command line.{extra}", cmds),
    )
