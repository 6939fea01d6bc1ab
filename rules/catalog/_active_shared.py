"""What the rules on `triage diagnose --active` measurements share (probes/active/): reading a measured payload,
the served model's weight bytes for costs in tokens/s, and the PCIe and all-reduce verdicts that confirm GPU004
and GPU010. The expectation comes from the spec table (triage/core/specs.py) and, for PCIe, from the link's own
generation and width; every threshold is in rules/thresholds.py with its source.

Costs are said in the served model's terms with the roofline arithmetic of triage/core/roofline.py when its
weight bytes are known ([model] weight_bytes in triage.toml, or a `triage plan` report as the baseline).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from triage.core.probe_data import (
    AllreduceData,
    GpuData,
    HbmData,
    MatmulData,
    PcieData,
    PcieGpu,
    ServerConfigData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.core.specs import match_nvml_name, pcie_bytes_per_s
from triage.rules.base import Hit, MissingInput
from triage.rules.context import Context
from triage.rules.fmt import gib, pct

P = TypeVar("P")
NOT_MEASURED = object()          # pcie_measured's answer when there is no usable measurement
# What pinned copies reach on a healthy link, as a share of its theoretical one-direction rate (CUDA
# bandwidthTest: ~50 of 63 GB/s on Gen5 x16); used to say "about 1/N of a healthy link", not to judge.
HEALTHY_PCIE_EFFICIENCY = 0.8
NO_WEIGHTS = " (set [model] weight_bytes in triage.toml to see the cost in tokens/s for the served model)"


def tensor_parallel(ctx: Context) -> int:
    tp = ctx.seen(ServerConfigData).tensor_parallel_size
    return int(tp) if isinstance(tp, (int, float)) and tp >= 1 else 1


def measured(ctx: Context, cls: type[P]) -> P:
    """An active probe's payload, or MissingInput: these probes run only with `diagnose --active`."""
    data = ctx.snapshot.payload(cls)      # type: ignore[arg-type]
    if data is None:
        raise MissingInput(f"probe {cls.PROBE} did not run (it runs with `triage diagnose --active`)")  # type: ignore[attr-defined]
    return data


def measured_gpus(ctx: Context, cls: type[HbmData] | type[MatmulData]) -> list[Any]:
    """The GPUs an active probe measured without error; MissingInput (with each error) when none."""
    gpus = measured(ctx, cls).gpus
    ok = [g for g in gpus if not g.error]
    if not ok:
        raise MissingInput(f"{cls.PROBE} measured no GPU" + "".join(f"; GPU {g.index}: {g.error}"
                                                                    for g in gpus if g.error))
    return ok


def pcie_pinned_gbps(ctx: Context) -> float | None:
    """The slowest pinned host<->GPU copy rate `diagnose --active` measured (GB/s), or None when not measured."""
    data = ctx.snapshot.payload(PcieData)
    rates = [r for g in (data.gpus if data else ()) for r in (g.h2d_pinned_gbps, g.d2h_pinned_gbps) if r is not None]
    return min(rates) if rates else None


# ------------------------------------------------------------------------------------------------
# GPU004, by measurement


@dataclass(frozen=True, slots=True)
class _PcieLow:
    evidence: dict[str, Any]
    text: str
    worst_gbps: float
    link_gbps: float


def _link_gbps(g: PcieGpu) -> float | None:
    if g.link_theoretical_gbps is not None:
        return g.link_theoretical_gbps
    if g.pcie_link_gen_max and g.pcie_link_width_max:
        rate = pcie_bytes_per_s(int(g.pcie_link_gen_max), int(g.pcie_link_width_max))
        return None if rate is None else rate / 1e9
    return None


def _pcie_low(g: PcieGpu, link: float, min_frac: float) -> _PcieLow | None:
    """One GPU's pinned copies against its link: what is low about them, or None."""
    rates = {k: v for k, v in (("h2d_pinned_gbps", g.h2d_pinned_gbps), ("d2h_pinned_gbps", g.d2h_pinned_gbps))
             if v is not None}
    gen, width = g.pcie_link_gen_max, g.pcie_link_width_max
    gen_l, width_l = g.pcie_link_gen_under_load, g.pcie_link_width_under_load
    trained_low = None not in (gen_l, width_l, gen, width) and (gen_l < gen or width_l < width)
    if not any(v < min_frac * link for v in rates.values()) and not trained_low:
        return None
    key = f"pcie.gpus[{g.index}]"
    evidence: dict[str, Any] = {f"{key}.{k}": v for k, v in rates.items()}
    evidence.update({f"{key}.link_theoretical_gbps": round(link, 1), f"{key}.pcie_link_gen_max": gen,
                     f"{key}.pcie_link_width_max": width})
    worst = min(rates.values())
    text = (f"GPU {g.index}: pinned copies move {worst:.1f} GB/s, {pct(worst / link)} of the {link:.1f} GB/s a "
            f"Gen{gen} x{width} link carries each way")
    healthy = HEALTHY_PCIE_EFFICIENCY * link
    if worst < healthy / 3:
        text += f", about 1/{round(healthy / worst)} of the ~{healthy:.0f} GB/s a healthy link measures"
    if trained_low:
        evidence[f"{key}.pcie_link_gen_under_load"], evidence[f"{key}.pcie_link_width_under_load"] = gen_l, width_l
        text += f"; under that load the link ran at Gen{gen_l} x{width_l}"
    return _PcieLow(evidence, text, worst, link)


def pcie_measured(ctx: Context) -> Hit | None | object:
    """GPU004's verdict from the `pcie` probe: a Hit, None (measured and healthy), or NOT_MEASURED."""
    data = ctx.snapshot.payload(PcieData)
    if data is None:
        return NOT_MEASURED
    min_frac = ctx.th("GPU004.min_pcie_link_frac")
    judged, lows = False, []
    for g in data.gpus:
        link = _link_gbps(g)
        if not link or (g.h2d_pinned_gbps is None and g.d2h_pinned_gbps is None):
            continue
        judged = True
        low = _pcie_low(g, link, min_frac)
        if low is not None:
            lows.append(low)
    if not judged:
        return NOT_MEASURED
    if not lows:
        return None
    evidence = {k: v for low in lows for k, v in low.evidence.items()}
    worst = min(lows, key=lambda low: low.worst_gbps / low.link_gbps)
    cost = ""
    w = ctx.weight_bytes()
    if w is not None:
        healthy = worst.link_gbps * HEALTHY_PCIE_EFFICIENCY
        cost = (f" Loading the served model's {gib(w[0])} of weights over it takes {w[0] / (worst.worst_gbps * 1e9):.1f}"
                f" s instead of about {w[0] / (healthy * 1e9):.1f} s, and every host<->GPU copy (inputs, sampled "
                "tokens, swapped or offloaded KV) is as much slower.")
        evidence[w[1]] = w[0]
    return Hit(
        title="PCIe transfers measure far below the link's rate",
        message="; ".join(low.text for low in lows) + "." + cost,
        evidence=evidence, severity=Severity.HIGH, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix("Reseat the card, check the riser and slot, and the BIOS PCIe settings (link speed, bifurcation); "
                "then run `triage diagnose --active` again to confirm the copies reach the link's rate.",
                ("nvidia-smi -q -d PCIE", "triage diagnose --active")),
    )


# ------------------------------------------------------------------------------------------------
# GPU010, by measurement


@dataclass(frozen=True, slots=True)
class AllreduceMeasure:
    busbw_gbps: float
    expected_gbps: float | None          # NVLink per direction per GPU (half the spec's bidirectional figure)
    low: bool
    evidence: dict[str, Any]

    def note(self) -> str:
        if self.expected_gbps is None:
            return f" The measured NCCL all-reduce bus bandwidth is {self.busbw_gbps:.1f} GB/s."
        return (f" Measured: NCCL all-reduce moves {self.busbw_gbps:.1f} GB/s bus bandwidth, "
                f"{pct(self.busbw_gbps / self.expected_gbps)} of the {self.expected_gbps:.0f} GB/s NVLink would give.")


def allreduce_measured(ctx: Context) -> AllreduceMeasure | None:
    """The `allreduce` probe's NCCL figure against NVLink's expectation; None when not measured."""
    data = ctx.snapshot.payload(AllreduceData)
    nccl = data.nccl if data is not None else None
    if nccl is None or nccl.busbw_gbps is None:
        return None
    specs = [match_nvml_name(g.name or "", g.memory_total_bytes) for g in ctx.seen(GpuData).gpus]
    if not specs:     # no NVML: name the GPUs from the active probes' own device records
        devices = ctx.snapshot.payload(HbmData) or ctx.snapshot.payload(MatmulData)
        specs = [match_nvml_name(g.name or "", g.memory_total_bytes) for g in (devices.gpus if devices else ())]
    links = [s.nvlink_bytes_per_s for s in specs if s is not None and s.nvlink_bytes_per_s]
    expected = min(links) / 2 / 1e9 if links and len(links) == len(specs) else None
    evidence: dict[str, Any] = {"allreduce.nccl.busbw_gbps": nccl.busbw_gbps,
                                "allreduce.nccl.world_size": nccl.world_size}
    low = False
    if expected:
        frac = nccl.busbw_gbps / expected
        evidence["derived.nvlink_busbw_expected_gbps"] = round(expected, 1)
        evidence["derived.allreduce_busbw_frac"] = round(frac, 3)
        low = frac < ctx.th("GPU010.min_nvlink_busbw_frac")
    return AllreduceMeasure(nccl.busbw_gbps, expected, low, evidence)


def allreduce_hit(ctx: Context, tp: int, m: AllreduceMeasure, nvlink_seen: bool) -> Hit:
    """GPU010 from the measurement alone: TP > 1 and the all-reduce runs far below NVLink."""
    why = ("NVLink is there, but the traffic does not use it (NCCL_P2P_DISABLE, a down NVLink or fabric "
           "manager)" if nvlink_seen else "the traffic goes over PCIe or through the host")
    return Hit(
        title="Tensor-parallel all-reduce runs far below NVLink speed",
        message=f"TP={tp} all-reduces after every layer.{m.note()} So {why}.",
        evidence={"server_config.tensor_parallel_size": tp, **m.evidence}, certainty=Certainty.CONFIRMED,
        impact=0.5,
        fix=Fix("Check `nvidia-smi nvlink -s` and `nvidia-smi topo -m`, that nvidia-fabricmanager runs on NVSwitch "
                "systems, and that NCCL_P2P_DISABLE is not set; otherwise lower the TP and add replicas.",
                ("nvidia-smi nvlink -s", "nvidia-smi topo -m")),
    )
