"""MEM003 (numa-node-bandwidth-low): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/MEM003/. Measured by
`triage diagnose --active` (host_memory probe, probes/active/host_memory.py)."""
from __future__ import annotations

import statistics
from typing import Any

from triage.core.probe_data import HostMemoryData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._active_shared import measured
from triage.rules.context import Context
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("MEM003", "numa-node-bandwidth-low", Severity.MEDIUM, ("host_memory",), RuleDoc(
    what="On a host with several NUMA nodes, one node's measured memory copy bandwidth (`triage diagnose "
         "--active`, threads and pages on that node) is below 60% of the best node's.",
    why="Nodes of one server carry the same memory population and measure within a few tens of percent of each "
        "other. A node far below the others has missing, mismatched or failed DIMMs or a degraded channel; "
        "processes and pinned buffers on it (the GPU's staging buffers, tokenizers) run at its speed.",
    example="host_memory.nodes[1].copy_bandwidth_gbps = 48, host_memory.nodes[0].copy_bandwidth_gbps = 160",
    fix="Check the DIMM population and errors per node (`dmidecode -t memory`, `edac-util -v`, the BMC); bind "
        "serving processes to a healthy node until it is fixed.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Memory Layer' (mbw: system memory bandwidth)", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'CPU Layer' (numactl --hardware)"),
), thresholds=("MEM003.min_node_frac_of_best",))
def mem003(ctx: Context) -> Hit | None:
    nodes = [n for n in measured(ctx, HostMemoryData).nodes if n.copy_bandwidth_gbps is not None]
    if len(nodes) < 2:
        raise MissingInput("this host has a single NUMA node (or one was measured): nothing to compare")
    best = max(nodes, key=lambda n: n.copy_bandwidth_gbps)
    min_frac = ctx.th("MEM003.min_node_frac_of_best")
    slow = [n for n in nodes if n.copy_bandwidth_gbps < min_frac * best.copy_bandwidth_gbps]
    if not slow:
        return None
    evidence: dict[str, Any] = {f"host_memory.nodes[{best.node}].copy_bandwidth_gbps": best.copy_bandwidth_gbps}
    for n in slow:
        evidence[f"host_memory.nodes[{n.node}].copy_bandwidth_gbps"] = n.copy_bandwidth_gbps
    median = statistics.median(n.copy_bandwidth_gbps for n in nodes)
    return Hit(
        title="One NUMA node's memory is far slower than the others",
        message="; ".join(f"node {n.node} copies {n.copy_bandwidth_gbps:.1f} GB/s, "
                          f"{pct(n.copy_bandwidth_gbps / best.copy_bandwidth_gbps)} of node {best.node}'s "
                          f"{best.copy_bandwidth_gbps:.1f} GB/s" for n in slow)
                + f" (median of the nodes: {median:.1f} GB/s).",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.3,
        fix=Fix("Check that node's DIMMs and memory errors; until it is fixed, bind the server and its GPU's "
                "staging buffers to a healthy node.", ("numactl --hardware", "sudo dmidecode -t memory")),
    )
