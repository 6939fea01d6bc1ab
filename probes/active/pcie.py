"""The `pcie` active probe: host->device and device->host bandwidth per GPU, from pinned and from pageable
host memory, timed with CUDA events (what CUDA's bandwidthTest measures, the PCIe step of "How to Diagnose and Fix Slow LLM Inference").

NVML's link generation and width are read *while* pinned copies are in flight, so a link that trained
low cannot pass for an idle power-saving downshift. Each figure sits next to the link's theoretical
one-direction rate (triage/core/specs.py, from its maximum generation and width) and its share of it.
Keys: docs/SNAPSHOT.md, `pcie`.
"""
from __future__ import annotations

import statistics
from typing import Any

from triage.core.probe_data.active import PcieData
from triage.core.snapshot import ProbeResult
from triage.core.specs import pcie_bytes_per_s
from triage.probes.active.cuda import device_info, gbps, nvml_link, probe_each_gpu, share, time_cuda
from triage.probes.registry import ProbeRun, register

MIB = 2**20
DEFAULT_BUFFER_BYTES = 256 * MIB
DEFAULT_BUDGET_S = 6.0


def _one_gpu(torch: Any, i: int, buffer_bytes: int, budget_s: float) -> dict[str, Any]:
    info = device_info(torch, i)
    dev = torch.device("cuda", i)
    unsupported_fields: list[str] = []
    out: dict[str, Any] = {**info, "buffer_bytes": buffer_bytes}
    with torch.cuda.device(dev):
        d = torch.empty(buffer_bytes, dtype=torch.uint8, device=dev)
        pageable = torch.ones(buffer_bytes, dtype=torch.uint8)
        try:
            pinned = torch.ones(buffer_bytes, dtype=torch.uint8).pin_memory()
        except RuntimeError as e:           # pinning refused (ulimit -l, container limits)
            pinned = None
            out["pinned_reason"] = f"{type(e).__name__}: {e}"[:200]
            unsupported_fields += ["h2d_pinned_gbps", "d2h_pinned_gbps"]
        per = budget_s / 4
        cases = [("h2d_pageable_gbps", lambda: d.copy_(pageable)), ("d2h_pageable_gbps", lambda: pageable.copy_(d))]
        if pinned is not None:
            cases = [("h2d_pinned_gbps", lambda: d.copy_(pinned, non_blocking=True)),
                     ("d2h_pinned_gbps", lambda: pinned.copy_(d, non_blocking=True))] + cases
            # Queue a few pinned copies and read the link while they run: a loaded link shows its trained state.
            for _ in range(8):
                d.copy_(pinned, non_blocking=True)
            out.update(nvml_link(info["pci_bus_id"]))
            torch.cuda.synchronize(dev)
        else:
            out.update(nvml_link(info["pci_bus_id"]))
        for key, fn in cases:
            times = time_cuda(torch, fn, num_repeats=10, max_time_s=per)
            rates = [buffer_bytes / t for t in times if t > 0]
            out[key] = gbps(max(rates)) if rates else None
            out[key + "_median"] = gbps(statistics.median(rates)) if rates else None
    gen, width = out.get("pcie_link_gen_max"), out.get("pcie_link_width_max")
    link = pcie_bytes_per_s(gen, width) if gen and width else None
    if link is None:
        unsupported_fields.append("link_theoretical_gbps")
    out["link_theoretical_gbps"] = gbps(link)
    for key in ("h2d_pinned_gbps", "d2h_pinned_gbps", "h2d_pageable_gbps", "d2h_pageable_gbps"):
        out[key.replace("_gbps", "_share")] = share(out.get(key), out["link_theoretical_gbps"])
    out["unsupported_fields"] = unsupported_fields + [k for k in ("pcie_link_gen_under_load", "pcie_link_width_under_load")
                                                      if out.get(k) is None]
    return out


def probe_pcie(budget_s: float = DEFAULT_BUDGET_S, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> ProbeResult:
    method = ("torch copies of a uint8 buffer, CUDA events; best of up to 10; GB/s = 1e9 bytes/s; "
              "link rate = PCIe max generation x width, one direction, before packet overhead")
    return probe_each_gpu(
        "pcie", budget_s, lambda torch, i, per_gpu_s: _one_gpu(torch, i, buffer_bytes, per_gpu_s),
        ["h2d_pinned_gbps", "d2h_pinned_gbps", "h2d_pageable_gbps", "d2h_pageable_gbps"],
        lambda gpus: PcieData.build({"gpus": gpus, "budget_s": budget_s, "method": method}))


BUDGET_S = 5.0


@register("pcie", phase=4, order=120, timeout_s=lambda run: BUDGET_S + 15.0, active=True, budget_s=BUDGET_S,
          extra="engine")
def _run(run: ProbeRun) -> ProbeResult:
    return probe_pcie(BUDGET_S)
