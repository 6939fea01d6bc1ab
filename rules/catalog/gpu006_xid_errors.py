"""GPU006 (xid-errors): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU006/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import KernelLogData
from triage.core.report import Certainty, Fix, Severity
from triage.core.xid import XID_MEANINGS
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule

_XID_CRITICAL = frozenset({48, 62, 64, 74, 79, 92, 94, 95, 119, 120})


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


@rule("GPU006", "xid-errors", Severity.HIGH, ("kernel_log",), RuleDoc(
    what="NVRM Xid lines in the kernel log. Hardware Xids (79 fell off the bus, 48/94/95 ECC, 63/64 retirement "
         "and remapping, 74 NVLink, 119/120 GSP) are critical; application-level ones (13, 31, 43, 45) are "
         "reported as possible causes.",
    why="An Xid means the driver saw the GPU fail: the requests on it die, the engine restarts, and a GPU "
        "that fell off the bus serves nothing until the node is fixed.",
    example="kernel_log.xid_events = [{xid: 79, pci_bus_id: '0000:3B:00.0'}]",
    fix="Look up each Xid in NVIDIA's Xid catalogue; for hardware Xids drain the node, reset or reboot, and RMA "
        "if it repeats.",
    references=("NVIDIA Xid errors catalogue", "DCGM diagnostics"),
))
def gpu006(ctx: Context) -> Hit | None:
    events = ctx.measured(ctx.need(KernelLogData).xid_events, "kernel_log.xid_events")
    counts: dict[int, int] = {}
    if ctx.seen(KernelLogData).xid_counts:   # complete counts; xid_events keeps only the last lines
        counts = {int(x): int(n) for x, n in ctx.seen(KernelLogData).xid_counts.items() if n}
    else:
        for e in events:
            if e.xid is not None:
                counts[int(e.xid)] = counts.get(int(e.xid), 0) + 1
    if not counts:
        return None
    critical = sorted(x for x in counts if x in _XID_CRITICAL)
    buses = sorted({e.pci_bus_id for e in events if e.pci_bus_id})
    evidence: dict[str, Any] = {f"kernel_log.xid_events.xid_{x}_count": n for x, n in sorted(counts.items())}
    if buses:
        evidence["kernel_log.xid_events.pci_bus_ids"] = buses
    names = "; ".join(f"Xid {x}: {XID_MEANINGS.get(x, 'see the Xid catalogue')}" for x in sorted(counts))
    newest = ctx.seen(KernelLogData).newest_xid_age_s
    when = ""
    if newest is not None:
        evidence["kernel_log.newest_xid_age_s"] = newest
        when = f" The newest is {_ago(newest)} old (the log covers the time since boot)."
    return Hit(
        title="The kernel log has GPU Xid errors",
        message=f"The driver logged {sum(counts.values())} Xid event(s): {names}.{when}",
        evidence=evidence, severity=Severity.CRITICAL if critical else Severity.MEDIUM,
        certainty=Certainty.CONFIRMED if critical else Certainty.POSSIBLE, impact=0.9 if critical else 0.3,
        fix=Fix(("Hardware Xids: drain the node, reset or reboot, and RMA the GPU if they repeat. "
                 if critical else "These Xids usually come from the application (a bad kernel or OOB access): "
                 "check the server's log around the same time. ") + "Read the lines with the command below.",
                ("sudo dmesg -T | grep -i xid",)),
    )
