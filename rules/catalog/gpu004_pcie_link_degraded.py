"""GPU004 (pcie-link-degraded): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU004/."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from triage.core.probe_data import GpuDevice
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._active_shared import NOT_MEASURED, pcie_measured
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("GPU004", "pcie-link-degraded", Severity.HIGH, ("gpu|pcie",), RuleDoc(
    what="The PCIe link runs at a lower generation or width than the card supports **while the GPU is busy**. "
         "An idle GPU downshifts its link on purpose to save power; that is not counted. With `diagnose "
         "--active` it is measured: pinned copies below 60% of the link's rate, or a link that trains below its "
         "maximum under the copy's load, confirm it (rules/catalog/_active_shared.py).",
    why="Host-device copies (inputs, sampled tokens, offloaded or swapped KV), weight loading and, without "
        "NVLink, tensor-parallel all-reduces all cross PCIe. A Gen3 x8 link has an eighth of Gen5 x16 "
        "bandwidth: in 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 1: PCIe Bottleneck', TTFT p99 rose from 1.2 s to 3.5 s at 80% SM utilization.",
    example="gpu.gpus[0].pcie_link_gen_current = 3, gpu.gpus[0].pcie_link_gen_max = 5, "
            "gpu.gpus[0].pcie_link_width_current = 8, gpu.gpus[0].pcie_link_width_max = 16, "
            "gpu.gpus[0].pcie_read_utilization_gpu_pct = 85",
    fix="Reseat the card, check the riser and the slot, and the BIOS lane settings (bifurcation, Gen speed).",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 1: PCIe Bottleneck' (PCIe bottleneck, Gen3 x8 instead of Gen5 x16)", "nvidia-smi -q -d PCIE"),
), thresholds=("common.gpu_busy_util_pct", "GPU004.min_pcie_link_frac"))
def gpu004(ctx: Context) -> Hit | None:
    measured = pcie_measured(ctx)          # --active: a measurement settles it either way
    if measured is not NOT_MEASURED:
        return measured  # type: ignore[return-value]
    links = _busy_links(ctx)
    if not links:
        raise MissingInput("no GPU was busy when its PCIe link was read (an idle link downshifts on purpose); "
                           "run diagnose while the server is under load, e.g. during `triage bench`")
    evidence: dict[str, Any] = {}
    severity = None
    certainty = Certainty.CONFIRMED
    for link in links:
        verdict = _judge_link(link, evidence)
        if verdict is _DEGRADED:
            severity = Severity.HIGH
        elif verdict is _PLATFORM:
            severity = severity or Severity.MEDIUM
            certainty = Certainty.LIKELY if severity is Severity.MEDIUM else certainty
    if not evidence:
        return None
    return _degraded(ctx, evidence, severity, certainty)


_DEGRADED = "degraded"     # the link trained below what the slot and card negotiate
_PLATFORM = "platform"     # the link runs at the slot's maximum, below the card's


@dataclass(frozen=True, slots=True)
class _Link:
    """One busy GPU's PCIe link as read, with the utilization that shows it was busy."""
    gpu: GpuDevice
    gen: int
    gen_max: int
    width: int
    width_max: int
    util: float
    util_key: str


def _busy_links(ctx: Context) -> list[_Link]:
    """The serving GPUs whose link was read while busy (an idle link downshifts legitimately)."""
    busy = ctx.th("common.gpu_busy_util_pct")
    links = []
    for g in ctx.serving_gpus():
        util = g.pcie_read_utilization_gpu_pct
        util_key = "pcie_read_utilization_gpu_pct"
        if util is None:
            util, util_key = g.utilization_gpu_pct, "utilization_gpu_pct"
        gen, gen_max, width, width_max = (g.pcie_link_gen_current, g.pcie_link_gen_max,
                                          g.pcie_link_width_current, g.pcie_link_width_max)
        if gen is None or gen_max is None or width is None or width_max is None or util is None or util < busy:
            continue
        links.append(_Link(g, gen, gen_max, width, width_max, util, util_key))
    return links


def _judge_link(link: _Link, evidence: dict[str, Any]) -> str | None:
    """_DEGRADED, _PLATFORM or None for one busy link; the readings that show it are added to `evidence`."""
    g, key = link.gpu, gpu_key(link.gpu)
    card_gen = max(link.gen_max, g.pcie_link_gen_gpu_max or link.gen_max)
    if link.gen < link.gen_max or link.width < link.width_max:
        evidence.update({f"{key}.pcie_link_gen_current": link.gen, f"{key}.pcie_link_gen_max": link.gen_max,
                         f"{key}.pcie_link_width_current": link.width, f"{key}.pcie_link_width_max": link.width_max,
                         f"{key}.{link.util_key}": link.util})
        return _DEGRADED
    if link.gen < card_gen:
        evidence.update({f"{key}.pcie_link_gen_current": link.gen, f"{key}.pcie_link_gen_gpu_max": card_gen,
                         f"{key}.{link.util_key}": link.util})
        return _PLATFORM
    return None


def _degraded(ctx: Context, evidence: dict[str, Any], severity: Severity | None, certainty: Certainty) -> Hit:
    platform_only = severity is Severity.MEDIUM
    links = []
    for g in ctx.serving_gpus():
        key = f"{gpu_key(g)}.pcie_link_gen_current"
        if key in evidence:
            links.append(f"GPU {g.index}: Gen{g.pcie_link_gen_current} x{g.pcie_link_width_current} "
                         f"of Gen{max(g.pcie_link_gen_max or 0, g.pcie_link_gen_gpu_max or 0)} "
                         f"x{g.pcie_link_width_max}")
    return Hit(
        title="The PCIe link is degraded under load" if not platform_only else "The slot caps the GPU's PCIe generation",
        message=("The GPU is busy but its PCIe link trained below its maximum generation or width ("
                 if not platform_only else
                 "The link runs at the platform's maximum, which is below what the card supports (")
                + "; ".join(links) + ").",
        evidence=evidence, severity=severity, certainty=certainty, impact=0.6,
        fix=Fix("Reseat the card, check the riser and slot, and the BIOS PCIe settings (link speed, bifurcation); "
                "confirm with the command below while the GPU is loaded.", ("nvidia-smi -q -d PCIE",)),
    )
