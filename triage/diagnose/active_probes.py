"""`triage diagnose --active`: the active probes (probes/active/, registered with `active=True` in the probe
registry, each with its budget and the extra it needs), run one at a time after the passive ones so that they
neither disturb the window nor each other; and the "measured next to the spec" rows the text output prints.
Budgets: the whole run stays within ~30 s on a single-GPU host."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from triage.core.probe_data import AllreduceData, HbmGpu, HostMemoryData, MatmulGpu, PcieGpu
from triage.core.snapshot import ProbeResult
from triage.probes.registry import ProbeRun, active_probes
from triage.probes.threaded import ProbeSpec, run_probes


def active_names() -> tuple[str, ...]:
    return tuple(e.name for e in active_probes())


def notice() -> str:
    total_s = sum(e.budget_s or 0.0 for e in active_probes())
    return ("--active: measuring host memory, PCIe, GPU memory, matmul and all-reduce bandwidth; this loads the "
            f"CPU and GPUs for about {total_s + 6:.0f} s")


def run_active(wanted: Sequence[str], results: list[ProbeResult], sys_root: str = "/sys") -> None:
    """Each wanted active probe in turn (never two at once: they would measure each other)."""
    run = ProbeRun(sys_root=sys_root)
    for entry in active_probes():
        if entry.name in wanted:
            run_probes([ProbeSpec(entry.name, (lambda e=entry: e.run(run)), entry.timeout_s(run))], results)


# --------------------------------------------------------------------------------------------
# Measured next to the spec (the text output's table; the same figures are in each probe's data)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


def _num(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.1f} {unit}"


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, what: str, measured: str, expected: str = "-", frac: float | None = None, note: str = "") -> None:
        self.rows.append({"measure": what, "measured": measured, "expected": expected, "share": _pct(frac),
                          "note": note})


def _host_memory(d: HostMemoryData, out: _Rows) -> None:
    out.add("host memory copy", _num(d.copy_bandwidth_gbps, "GB/s"),
            note=f"{d.num_threads} threads, {(d.buffer_bytes or 0) / 2**20:.0f} MiB buffer")
    out.add("host memory read", _num(d.read_bandwidth_gbps, "GB/s"))
    if len(d.nodes) > 1:
        for n in d.nodes:
            out.add(f"  NUMA node {n.node} copy", _num(n.copy_bandwidth_gbps, "GB/s"))


def _pcie(g: PcieGpu, gid: str, out: _Rows) -> None:
    link = f"Gen{g.pcie_link_gen_max} x{g.pcie_link_width_max} {_num(g.link_theoretical_gbps, 'GB/s')}"
    for rate, frac, label in ((g.h2d_pinned_gbps, g.h2d_pinned_share, "H2D pinned"),
                              (g.d2h_pinned_gbps, g.d2h_pinned_share, "D2H pinned"),
                              (g.h2d_pageable_gbps, g.h2d_pageable_share, "H2D pageable"),
                              (g.d2h_pageable_gbps, g.d2h_pageable_share, "D2H pageable")):
        out.add(f"{gid} PCIe {label}", _num(rate, "GB/s"), link, frac)
    if g.pcie_link_gen_under_load is not None:
        out.add(f"{gid} PCIe link under load", f"Gen{g.pcie_link_gen_under_load} x{g.pcie_link_width_under_load}",
                f"Gen{g.pcie_link_gen_max} x{g.pcie_link_width_max}")


def _hbm(g: HbmGpu, gid: str, weight_bytes: float | None, out: _Rows) -> None:
    from triage.core.roofline import decode_tokens_per_s_bound

    note = g.name or ""
    bw, spec = g.copy_bandwidth_gbps, g.spec_bandwidth_gbps
    if weight_bytes and bw and spec:
        at = [decode_tokens_per_s_bound(1, v * 1e9, weight_bytes, 0.0, 0.0) for v in (bw, spec)]
        note += f"; batch-1 decode <= {at[0]:,.0f} tok/s measured, {at[1]:,.0f} at spec"
    out.add(f"{gid} memory copy (D2D)", _num(bw, "GB/s"), _num(spec, "GB/s spec"), g.share_of_spec, note)


def _matmul(g: MatmulGpu, gid: str, out: _Rows) -> None:
    out.add(f"{gid} bf16 matmul", _num(g.bf16_tflops, "TFLOP/s"), _num(g.bf16_spec_tflops, "TFLOP/s spec"),
            g.bf16_share_of_spec, f"n={g.n}")
    if g.fp8_tflops is not None:
        out.add(f"{gid} fp8 matmul", _num(g.fp8_tflops, "TFLOP/s"), _num(g.fp8_spec_tflops, "TFLOP/s spec"),
                g.fp8_share_of_spec)
    else:
        out.add(f"{gid} fp8 matmul", "unsupported", note=g.fp8_reason or "")


def _allreduce(d: AllreduceData, out: _Rows) -> None:
    for backend, r, why in (("nccl", d.nccl, d.nccl_reason), ("gloo", d.gloo, d.gloo_reason)):
        if r is not None:
            out.add(f"all-reduce {backend} busbw", _num(r.busbw_gbps, "GB/s"),
                    note=f"{r.world_size} ranks, {(r.size_bytes or 0) / 2**20:.0f} MiB {r.dtype}, "
                         f"algbw {r.algbw_gbps} GB/s")
        else:
            out.add(f"all-reduce {backend}", "unsupported", note=why or "")


def _gpu_rows(d: Any, name: str, weight_bytes: float | None, out: _Rows) -> None:
    for g in getattr(d, "gpus", ()):
        gid = f"GPU {g.index}"
        if g.error:
            out.add(f"{gid} {name}", "error", note=g.error)
        elif isinstance(g, PcieGpu):
            _pcie(g, gid, out)
        elif isinstance(g, HbmGpu):
            _hbm(g, gid, weight_bytes, out)
        elif isinstance(g, MatmulGpu):
            _matmul(g, gid, out)


def measured_rows(probes: Sequence[ProbeResult], weight_bytes: float | None = None) -> list[dict[str, Any]]:
    """One row per measured figure: what, measured, expected (and from where), share of it. With the served
    model's `weight_bytes`, the GPU memory rows also say the batch-1 decode ceiling both figures allow."""
    by = {p.name: p for p in probes}
    out = _Rows()
    for name in active_names():
        p = by.get(name)
        if p is None:
            continue
        if not p.ok:
            out.add(name, p.status.value, note=p.reason or "")
        elif isinstance(p.data, HostMemoryData):
            _host_memory(p.data, out)
        elif isinstance(p.data, AllreduceData):
            _allreduce(p.data, out)
        else:
            _gpu_rows(p.data, name, weight_bytes, out)
    return out.rows
