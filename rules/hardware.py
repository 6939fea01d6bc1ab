"""GPU spec figures the roofline rules need, matched on NVML's product name. These are vendor *spec*
numbers (HBM/GDDR bandwidth), not measurements: rules that use them say so in their evidence."""
from __future__ import annotations

# (name fragment, memory bandwidth in GB/s). Longest fragment wins, so "H100 PCIe" beats "H100".
MEMORY_BANDWIDTH_GBPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 2000.0),
    ("H100 NVL", 3900.0),
    ("H100", 3350.0),          # SXM5
    ("H200", 4800.0),
    ("H20", 4000.0),
    ("GH200", 4000.0),
    ("B200", 8000.0),
    ("B100", 8000.0),
    ("A100-SXM4-40GB", 1555.0),
    ("A100-PCIE-40GB", 1555.0),
    ("A100", 2039.0),          # 80 GB SXM
    ("A10G", 600.0),
    ("A10", 600.0),
    ("L40S", 864.0),
    ("L40", 864.0),
    ("L4", 300.0),
    ("RTX 4090", 1008.0),
    ("RTX 5090", 1792.0),
    ("RTX 6000 Ada", 960.0),
    ("V100", 900.0),
    ("T4", 320.0),
)


def memory_bandwidth_gbps(name: str | None) -> float | None:
    if not name:
        return None
    best: tuple[int, float] | None = None
    for fragment, gbps in MEMORY_BANDWIDTH_GBPS:
        if fragment.lower() in name.lower() and (best is None or len(fragment) > best[0]):
            best = (len(fragment), gbps)
    return best[1] if best else None
