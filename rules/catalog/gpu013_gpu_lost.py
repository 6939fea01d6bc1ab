"""GPU013 (gpu-lost): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU013/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("GPU013", "gpu-lost", Severity.CRITICAL, ("gpu",), RuleDoc(
    what="NVML reports a GPU as lost (GPU_IS_LOST): it fell off the bus and the driver can no longer reach it.",
    why="A lost GPU serves nothing: the engine on it has crashed or hangs, and its tensor-parallel peers "
        "stall with it. It does not come back without a reset or a reboot.",
    example="gpu.gpus[2].lost = true, gpu.gpus[2].pci_bus_id = '00000000:86:00.0'",
    fix="Drain the node, then reset the GPU or reboot; check the kernel log for Xid 79 and the slot, riser "
        "and power; RMA if it repeats.",
    references=("NVML nvmlDeviceGetHandleByIndex GPU_IS_LOST", "NVIDIA Xid 79 (GPU has fallen off the bus)",
                "DCGM health watches"),
))
def gpu013(ctx: Context) -> Hit | None:
    gpus = ctx.gpus()
    if all(g.lost is None for g in gpus):
        raise MissingInput("gpu.lost was not reported")
    lost = [g for g in gpus if g.lost]
    if not lost:
        return None
    evidence: dict[str, Any] = {}
    for g in lost:
        evidence[f"{gpu_key(g)}.lost"] = True
        evidence[f"{gpu_key(g)}.pci_bus_id"] = g.pci_bus_id
    return Hit(
        title="A GPU has fallen off the bus",
        message=f"NVML cannot reach {len(lost)} GPU(s) any more (GPU_IS_LOST).",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=1.0,
        fix=Fix("Drain the node and reset the GPU or reboot; then check the slot, riser and power, and RMA the "
                "board if it happens again.", ("sudo dmesg -T | grep -i xid", "sudo nvidia-smi -r")),
    )
