"""The `hbm` active probe: device-to-device copy bandwidth per GPU (read + write counted), next to the
spec-sheet memory bandwidth of that GPU (triage/core/specs.py) and its share. Keys: docs/SNAPSHOT.md, `hbm`.
"""
from __future__ import annotations

import statistics
from typing import Any

from triage.core.probe_data.active import HbmData
from triage.core.snapshot import ProbeResult
from triage.probes.active.cuda import device_info, gbps, probe_each_gpu, share, spec_of, time_cuda
from triage.probes.registry import ProbeRun, register

MIB = 2**20
DEFAULT_BUFFER_BYTES = 1024 * MIB
DEFAULT_BUDGET_S = 3.0


def _one_gpu(torch: Any, i: int, buffer_bytes: int, budget_s: float) -> dict[str, Any]:
    info = device_info(torch, i)
    dev = torch.device("cuda", i)
    free, _total = torch.cuda.mem_get_info(dev)
    size = int(min(buffer_bytes, free // 4))           # src + dst leave at least half the free memory
    with torch.cuda.device(dev):
        src = torch.ones(size, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        times = time_cuda(torch, lambda: dst.copy_(src), num_repeats=20, max_time_s=budget_s, inner=2)
    rates = [2 * size / t for t in times if t > 0]
    spec = spec_of(info)
    spec_gbps = gbps(spec.hbm_bandwidth_bytes_per_s) if spec else None
    best = gbps(max(rates)) if rates else None
    return {**info, "buffer_bytes": size, "copy_bandwidth_gbps": best,
            "copy_bandwidth_gbps_median": gbps(statistics.median(rates)) if rates else None,
            "spec_bandwidth_gbps": spec_gbps, "spec_key": spec.key if spec else None,
            "share_of_spec": share(best, spec_gbps),
            "unsupported_fields": [] if spec else ["spec_bandwidth_gbps"]}


def probe_hbm(budget_s: float = DEFAULT_BUDGET_S, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> ProbeResult:
    return probe_each_gpu(
        "hbm", budget_s, lambda torch, i, per_gpu_s: _one_gpu(torch, i, buffer_bytes, per_gpu_s),
        ["copy_bandwidth_gbps"],
        lambda gpus: HbmData.build({"gpus": gpus, "method": "torch device copy, read + write counted, CUDA "
                                                            "events; best of the repeats; GB/s = 1e9 bytes/s"}))


BUDGET_S = 2.0


@register("hbm", phase=4, order=130, timeout_s=lambda run: BUDGET_S + 15.0, active=True, budget_s=BUDGET_S,
          extra="engine")
def _run(run: ProbeRun) -> ProbeResult:
    return probe_hbm(BUDGET_S)
