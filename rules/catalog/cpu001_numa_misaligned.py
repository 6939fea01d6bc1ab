"""CPU001 (numa-misaligned): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/CPU001/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import (
    CpuData,
    ServerProcessData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule


@rule("CPU001", "numa-misaligned", Severity.MEDIUM, ("server_process", "gpu"), RuleDoc(
    what="The serving process's CPU affinity or its memory lies outside the NUMA node the GPU hangs off.",
    why="Every host-device copy and every CPU-side step (tokenizing, scheduling, sampling glue) then crosses "
        "the socket interconnect: higher latency, lower bandwidth, and jitter in TTFT.",
    example="gpu.gpus[0].numa_node = 1, server_process.affinity_numa_nodes = [0], "
            "server_process.memory_numa_nodes = [0]",
    fix="Bind the server to the GPU's node: `numactl --cpunodebind=N --membind=N vllm serve ...`.",
    references=("seed 003 CPU layer (check NUMA affinity, bind vLLM to the correct node)", "nvidia-smi topo -m"),
))
def cpu001(ctx: Context) -> Hit | None:
    nodes = {g.numa_node for g in ctx.serving_gpus()}
    nodes = {n for n in nodes if n is not None and n >= 0}
    if not nodes:
        raise MissingInput("gpu.numa_node was not measured (or the host has no NUMA information)")
    cpu = ctx.snapshot.payload(CpuData) or {}
    if cpu.numa_nodes is not None and len(cpu.numa_nodes) <= 1:
        return None  # one NUMA node: nothing can be misaligned
    affinity = ctx.measured(ctx.need(ServerProcessData).affinity_numa_nodes, "server_process.affinity_numa_nodes")
    memory = ctx.seen(ServerProcessData).memory_numa_nodes
    evidence: dict[str, Any] = {"gpu.numa_node": sorted(nodes)}
    problems = []
    if not set(affinity) & nodes:
        evidence["server_process.affinity_numa_nodes"] = affinity
        problems.append("its CPUs are all on another NUMA node")
    if memory is not None and memory and not set(memory) & nodes:
        evidence["server_process.memory_numa_nodes"] = memory
        problems.append("its memory sits on another NUMA node")
    if not problems:
        return None
    node = min(nodes)
    return Hit(
        title="The server runs on a different NUMA node than its GPU",
        message=f"The GPU is on NUMA node {node} but {' and '.join(problems)}.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.3,
        fix=Fix(f"Start the server bound to node {node}.",
                (f"numactl --cpunodebind={node} --membind={node} <your server command>",)),
    )
