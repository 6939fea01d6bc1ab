"""MEM003, numa node bandwidth low (rules/catalog/mem003_numa_node_bandwidth_low.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._active import active_snapshot, host_memory
from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
)
from triage.core.probe_data import NodeBandwidth

CODE = "MEM003"


def cases() -> list[Case]:
    return [
        case("positive_slow_node", "Node 1 copies 61 GB/s against node 0's 158 (a memory channel missing)",
             {**FIRES, "evidence_keys": ["host_memory.nodes[1].copy_bandwidth_gbps"], "text_contains": ["node 1 copies"]},
             active_snapshot(host_memory("nodes[1]", copy_bandwidth_gbps=61.0))),
        case("negative_nodes_alike", "158 and 152 GB/s", PASSES, active_snapshot()),
        case("skipped_single_node", "One NUMA node: nothing to compare",
             {"fires": False, "skipped_reason": "single NUMA node"},
             active_snapshot(host_memory(nodes=(NodeBandwidth(node=0, copy_bandwidth_gbps=20.0),), num_numa_nodes=1))),
    ]
