"""`triage diagnose --active`: the active probes (probes/active/), run one at a time after the passive
ones so that they neither disturb the window nor each other, and the "measured next to the spec" rows
the text output prints. Budgets: the whole run stays within ~30 s on a single-GPU host."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from triage.core.snapshot import ProbeResult
from triage.probes.threaded import ProbeSpec, run_probes

ACTIVE_PROBE_NAMES = ("host_memory", "pcie", "hbm", "matmul", "allreduce")
BUDGETS_S = {"host_memory": 4.0, "pcie": 5.0, "hbm": 2.0, "matmul": 3.0, "allreduce": 8.0}
GRACE_S = 15.0          # CUDA start-up and allocation on top of each probe's timed budget
ALLREDUCE_GRACE_S = 2 * 45.0 + 10   # two rank launches (gloo, then NCCL), each with its start-up allowance
NOTICE = ("--active: measuring host memory, PCIe, GPU memory, matmul and all-reduce bandwidth; this loads the "
          f"CPU and GPUs for about {sum(BUDGETS_S.values()) + 6:.0f} s")


def active_specs(sys_root: str = "/sys") -> list[ProbeSpec]:
    from triage.probes.active.allreduce import probe_allreduce
    from triage.probes.active.hbm import probe_hbm
    from triage.probes.active.host_memory import probe_host_memory
    from triage.probes.active.matmul import probe_matmul
    from triage.probes.active.pcie import probe_pcie

    fns: dict[str, Callable[[], ProbeResult]] = {
        "host_memory": lambda: probe_host_memory(BUDGETS_S["host_memory"], sys_root),
        "pcie": lambda: probe_pcie(BUDGETS_S["pcie"]),
        "hbm": lambda: probe_hbm(BUDGETS_S["hbm"]),
        "matmul": lambda: probe_matmul(BUDGETS_S["matmul"]),
        "allreduce": lambda: probe_allreduce(BUDGETS_S["allreduce"]),
    }
    return [ProbeSpec(name, fns[name], BUDGETS_S[name] + (ALLREDUCE_GRACE_S if name == "allreduce" else GRACE_S))
            for name in ACTIVE_PROBE_NAMES]


def run_active(wanted: Sequence[str], results: list[ProbeResult], sys_root: str = "/sys") -> None:
    """Each wanted active probe in turn (never two at once: they would measure each other)."""
    for spec in active_specs(sys_root):
        if spec.name in wanted:
            run_probes([spec], results)


# --------------------------------------------------------------------------------------------
# Measured next to the spec (the text output's table; the same figures are in each probe's data)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


def _num(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.1f} {unit}"


Row = Callable[..., None]  # row(what, measured, expected="-", frac=None, note="")


def measured_rows(probes: Sequence[ProbeResult], weight_bytes: float | None = None) -> list[dict[str, Any]]:
    """One row per measured figure: what, measured, expected (and from where), share of it. With the served
    model's `weight_bytes`, the GPU memory rows also say the batch-1 decode ceiling both figures allow."""
    by = {p.name: p for p in probes}
    rows: list[dict[str, Any]] = []

    def row(what: str, measured: str, expected: str = "-", frac: float | None = None, note: str = "") -> None:
        rows.append({"measure": what, "measured": measured, "expected": expected, "share": _pct(frac), "note": note})

    for name in ACTIVE_PROBE_NAMES:
        p = by.get(name)
        if p is None:
            continue
        if not p.ok:
            row(name, p.status.value, note=p.reason or "")
            continue
        _probe_rows(name, p.data, row, weight_bytes)
    return rows


def _probe_rows(name: str, d: dict[str, Any], row: Row, weight_bytes: float | None) -> None:
    if name == "host_memory":
        _host_memory_rows(d, row)
    for g in d.get("gpus") or []:
        gid = f"GPU {g.get('index')}"
        if g.get("error"):
            row(f"{gid} {name}", "error", note=g["error"])
            continue
        gpu_rows = _GPU_ROWS.get(name)
        if gpu_rows is not None:
            gpu_rows(gid, g, row, weight_bytes)
    if name == "allreduce":
        _allreduce_rows(d, row)


def _host_memory_rows(d: dict[str, Any], row: Row) -> None:
    row("host memory copy", _num(d.get("copy_bandwidth_gbps"), "GB/s"),
        note=f"{d.get('num_threads')} threads, {(d.get('buffer_bytes') or 0) / 2**20:.0f} MiB buffer")
    row("host memory read", _num(d.get("read_bandwidth_gbps"), "GB/s"))
    if len(d.get("nodes") or []) > 1:
        for n in d["nodes"]:
            row(f"  NUMA node {n.get('node')} copy", _num(n.get("copy_bandwidth_gbps"), "GB/s"))


def _pcie_rows(gid: str, g: dict[str, Any], row: Row, weight_bytes: float | None) -> None:
    link = (f"Gen{g.get('pcie_link_gen_max')} x{g.get('pcie_link_width_max')} "
            f"{_num(g.get('link_theoretical_gbps'), 'GB/s')}")
    for key, label in (("h2d_pinned", "H2D pinned"), ("d2h_pinned", "D2H pinned"),
                       ("h2d_pageable", "H2D pageable"), ("d2h_pageable", "D2H pageable")):
        row(f"{gid} PCIe {label}", _num(g.get(key + "_gbps"), "GB/s"), link, g.get(key + "_share"))
    if g.get("pcie_link_gen_under_load") is not None:
        row(f"{gid} PCIe link under load",
            f"Gen{g['pcie_link_gen_under_load']} x{g.get('pcie_link_width_under_load')}",
            f"Gen{g.get('pcie_link_gen_max')} x{g.get('pcie_link_width_max')}")


def _hbm_rows(gid: str, g: dict[str, Any], row: Row, weight_bytes: float | None) -> None:
    from triage.core.roofline import decode_tokens_per_s_bound

    note = g.get("name") or ""
    bw, spec = g.get("copy_bandwidth_gbps"), g.get("spec_bandwidth_gbps")
    if weight_bytes and bw and spec:
        at = [decode_tokens_per_s_bound(1, v * 1e9, weight_bytes, 0.0, 0.0) for v in (bw, spec)]
        note += f"; batch-1 decode <= {at[0]:,.0f} tok/s measured, {at[1]:,.0f} at spec"
    row(f"{gid} memory copy (D2D)", _num(bw, "GB/s"), _num(spec, "GB/s spec"), g.get("share_of_spec"), note)


def _matmul_rows(gid: str, g: dict[str, Any], row: Row, weight_bytes: float | None) -> None:
    row(f"{gid} bf16 matmul", _num(g.get("bf16_tflops"), "TFLOP/s"),
        _num(g.get("bf16_spec_tflops"), "TFLOP/s spec"), g.get("bf16_share_of_spec"), f"n={g.get('n')}")
    if g.get("fp8_tflops") is not None:
        row(f"{gid} fp8 matmul", _num(g.get("fp8_tflops"), "TFLOP/s"),
            _num(g.get("fp8_spec_tflops"), "TFLOP/s spec"), g.get("fp8_share_of_spec"))
    else:
        row(f"{gid} fp8 matmul", "unsupported", note=g.get("fp8_reason") or "")


_GPU_ROWS: dict[str, Callable[[str, dict[str, Any], Row, float | None], None]] = {
    "pcie": _pcie_rows, "hbm": _hbm_rows, "matmul": _matmul_rows}


def _allreduce_rows(d: dict[str, Any], row: Row) -> None:
    for backend in ("nccl", "gloo"):
        r = d.get(backend)
        if r:
            row(f"all-reduce {backend} busbw", _num(r.get("busbw_gbps"), "GB/s"),
                note=f"{r.get('world_size')} ranks, {(r.get('size_bytes') or 0) / 2**20:.0f} MiB "
                     f"{r.get('dtype')}, algbw {r.get('algbw_gbps')} GB/s")
        else:
            row(f"all-reduce {backend}", "unsupported", note=d.get(backend + "_reason") or "")
