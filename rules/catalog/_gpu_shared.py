"""Helpers shared by the GPU and hardware rules."""
from __future__ import annotations

from triage.core.probe_data import GpuDevice


def gpu_key(g: GpuDevice) -> str:
    """The evidence key prefix of one GPU: `gpu.gpus[0]`."""
    return f"gpu.gpus[{g.index}]"
