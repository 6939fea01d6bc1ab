"""CPU001 (numa-misaligned): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/CPU001/.

One `numactl --cpunodebind=N --membind=N` around the whole server is right only when every GPU it serves
hangs off node N. With tensor-parallel GPUs on both sockets it pins half the workers to the wrong node.
vLLM's `--numa-bind` (from 0.20, claim vllm.numa-bind) binds each worker to its own GPU's node; SGLang's
`--numa-node` takes one node per GPU, in GPU order (claim sglang.numa-node-per-gpu), and from 0.5.10 SGLang binds
each GPU's process itself unless told otherwise (0.5.18 added SGLANG_AUTO_NUMA_BIND=0; claim sglang.auto-numa-bind).
"""
from __future__ import annotations

from typing import Any

import triage.engines.truth as truth
from triage.core.probe_data import (
    CpuData,
    ServerProcessData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_flags import LAUNCHERS, PRETTY, render
from triage.rules.registry import rule


@rule("CPU001", "numa-misaligned", Severity.MEDIUM, ("server_process", "gpu"), RuleDoc(
    what="The serving process's CPU affinity or its memory lies outside the NUMA node the GPU hangs off.",
    why="Every host-device copy and every CPU-side step (tokenizing, scheduling, sampling glue) then crosses "
        "the socket interconnect: higher latency, lower bandwidth, and jitter in TTFT.",
    example="gpu.gpus[0].numa_node = 1, server_process.affinity_numa_nodes = [0], "
            "server_process.memory_numa_nodes = [0]",
    fix="Bind each worker to its GPU's node: vLLM `--numa-bind` where the version has it, SGLang `--numa-node`; "
        "`numactl --cpunodebind=N --membind=N` on the whole server only when all its GPUs are on node N.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'CPU Layer' (check NUMA affinity, bind vLLM to the correct node)", "nvidia-smi topo -m",
                "claim:vllm.numa-bind", "claim:sglang.numa-node-per-gpu", "claim:sglang.auto-numa-bind-0.5.18",
                "The whole-server numactl of 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide' is wrong when TP spans sockets"),
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
    elif len(nodes) > 1 and not nodes <= set(affinity):
        evidence["server_process.affinity_numa_nodes"] = affinity
        problems.append(f"the server is pinned to node {', '.join(map(str, sorted(affinity)))} only, so the workers "
                        f"of the GPUs on node {', '.join(map(str, sorted(nodes - set(affinity))))} cross the socket")
    if memory is not None and memory and not set(memory) & nodes:
        evidence["server_process.memory_numa_nodes"] = memory
        problems.append("its memory sits on another NUMA node")
    if not problems:
        return None
    return Hit(
        title="The server runs on a different NUMA node than its GPU",
        message=f"The GPU{'s are' if len(nodes) > 1 else ' is'} on NUMA node{'s' if len(nodes) > 1 else ''} "
                f"{', '.join(map(str, sorted(nodes)))} but {' and '.join(problems)}.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.3, fix=_binding_fix(ctx, sorted(nodes)),
    )


def _binding_fix(ctx: Context, nodes: list[int]) -> Fix:
    """Per-worker binding where the engine at this version has it (vLLM --numa-bind from 0.20; SGLang
    --numa-node, one node per GPU, and its own binding from 0.5.10); whole-process numactl only for a GPU set
    on a single node."""
    engine = ctx.engine()
    per_gpu = " ".join(str(g.numa_node) for g in sorted(ctx.serving_gpus(), key=lambda g: g.index or 0))
    if engine.name in LAUNCHERS:
        r = render("numa_bind", engine.name, per_gpu, engine.version)
        table = truth.table(engine.name, engine.version)
        label = table.label if table is not None else engine.label
        if r.text is not None:
            return Fix(f"Let {PRETTY[engine.name]} bind each worker to its own GPU's NUMA node (checked against "
                       f"{label}); drop any numactl around the whole server.", (r.text,))
        if r.note and len(nodes) > 1:
            return Fix("The GPUs span NUMA nodes, so one numactl binding for the whole server pins some workers "
                       f"to the wrong node: keep tensor-parallel GPUs within one node, or unpin the server. "
                       f"{PRETTY[engine.name]} {engine.version or '(version unknown)'}: {r.note}.", ())
    if len(nodes) > 1:
        return Fix("The GPUs span NUMA nodes: keep tensor-parallel GPUs within one node, or unpin the server; a "
                   "whole-server numactl binding is wrong for half of them.", ())
    node = nodes[0]
    return Fix(f"Start the server bound to node {node}.",
               (f"numactl --cpunodebind={node} --membind={node} <your server command>",))
