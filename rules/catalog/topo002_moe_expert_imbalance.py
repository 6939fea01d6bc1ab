"""TOPO002 (moe-expert-imbalance): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/TOPO002/.

Under expert parallelism each GPU holds some of a MoE model's experts, and every forward pass waits for the GPU
whose experts got the most tokens. SGLang exports the balance as a summary (mean over max load per pass), but only
when asked (the knob expert_balance_metric says how, per version); vLLM exports none to /metrics (its tables have
no such name), so the rule says it cannot see it there.
"""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


@rule("TOPO002", "moe-expert-imbalance", Severity.MEDIUM, ("server_metrics",), RuleDoc(
    what="The MoE experts' balancedness (mean load over the busiest GPU's, per forward pass, averaged over the "
         "window) is < 0.6, where the engine exports it (SGLang's sglang:eplb_balancedness, from 0.5.7 and only "
         "when asked: SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC with --enable-expert-distribution-metrics, or from "
         "0.5.18 --expert-balancedness-report-mode prometheus).",
    why="Each forward pass lasts as long as the GPU whose experts got the most tokens: at 0.5 the busiest GPU "
        "does twice the mean's work and the others wait for it, every step, for every request in the batch.",
    example="server_metrics.expert_balancedness = 0.42",
    fix="Turn on expert-parallel load balancing (`--enable-eplb`), which moves and replicates hot experts; when it "
        "is on, it rebalances every --eplb-rebalance-num-iterations forward passes.",
    references=("claim:sglang.eplb-balancedness", "claim:sglang.eplb-balancedness-env-gate",
                "claim:sglang.eplb-report-mode-prometheus", "docs/TOPOLOGIES.md"),
), thresholds=("TOPO002.min_balancedness",))
def topo002(ctx: Context) -> Hit | None:
    metrics = ctx.need(ServerMetricsData)
    if metrics.expert_balancedness is None:
        raise MissingInput(_not_exported(ctx))
    balance = metrics.expert_balancedness
    if balance >= ctx.th("TOPO002.min_balancedness"):
        return None
    cfg = ctx.seen(ServerConfigData)
    evidence: dict[str, Any] = {"server_metrics.expert_balancedness": round(balance, 3),
                                "server_config.enable_eplb": cfg.enable_eplb,
                                "server_config.expert_parallel_size": cfg.expert_parallel_size}
    engine = ctx.engine()
    if cfg.enable_eplb:
        text = ("EPLB is on and the balance stays low: the experts' load shifts faster than it rebalances (every "
                "--eplb-rebalance-num-iterations forward passes; the default is in this version's table). Rebalance "
                "more often, or add redundant experts for the hot ones.")
        cmds: tuple[str, ...] = ()
    else:
        cmds, note = engine_flags({"enable_eplb": None}, engine)
        text = "Turn on expert-parallel load balancing, which places and replicates experts by their measured load." + note
    return Hit(
        title="MoE experts are unevenly loaded: every step waits for the busiest GPU",
        message=f"The experts' balancedness averaged {balance:.2f} over the window (1.0 is even): the busiest GPU "
                f"did {1 / balance:.1f}x the mean's work each forward pass, and the others waited for it.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=min(0.8, 1 - balance), fix=Fix(text, cmds))


def _not_exported(ctx: Context) -> str:
    """Why no balance was read, and the setting that exports it on this engine at this version."""
    engine = ctx.engine()
    module = engine.module
    if module is None or "expert_balance_metric" not in module.knobs:
        return "the engine exports no expert balance to /metrics (SGLang can, when asked; vLLM does not)"
    cmds, note = engine_flags({"expert_balance_metric": None}, engine)
    if not cmds:
        return f"no expert balance in /metrics.{note}"
    return f"{module.display} exports the expert balance to /metrics only when asked: set {' '.join(cmds)}.{note}"
