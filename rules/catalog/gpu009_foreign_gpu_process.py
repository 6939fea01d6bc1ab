"""GPU009 (foreign-gpu-process): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU009/."""
from __future__ import annotations

from typing import Any

from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.fmt import gib
from triage.rules.registry import rule


@rule("GPU009", "foreign-gpu-process", Severity.MEDIUM, ("gpu", "server_process"), RuleDoc(
    what="Another process (not the server or its children) holds at least 1 GiB on a GPU the server uses.",
    why="The memory it holds is missing from the KV cache (vLLM refuses to start unless its "
        "gpu_memory_utilization share of the GPU is free, 'Free memory on device ... is less than desired GPU "
        "memory utilization', so a shared GPU forces a lower share; TGI sizes its cache from the memory free at "
        "start), and its kernels compete for the SMs and bandwidth.",
    example="gpu.gpus[0].compute_processes[1] = {pid: 4242, name: 'python', used_memory_bytes: 8.6e9}",
    fix="Move the other job off the serving GPU (CUDA_VISIBLE_DEVICES, scheduler isolation, MIG), then restart "
        "the server so it can size its KV cache again.",
    references=("claim:vllm.free-memory-check", "claim:vllm.kv-is-what-is-left", "claim:tgi.kv-sized-with-wiggle-room"),
), thresholds=("GPU009.foreign_bytes",))
def gpu009(ctx: Context) -> Hit | None:
    pids = ctx.server_pids()
    if not pids:
        raise MissingInput("server_process.pid is unknown, so own and foreign GPU processes cannot be told apart")
    gpus = ctx.gpus()
    if not any(p.pid in pids for g in gpus for p in g.compute_processes or []):
        raise MissingInput("none of the server's processes appear in NVML's process list (a container PID "
                           "namespace?), so own and foreign GPU processes cannot be told apart")
    serving = ctx.serving_gpus()
    if any(g.compute_processes is None for g in serving):
        raise MissingInput("gpu.compute_processes was not measured")
    evidence: dict[str, Any] = {}
    for g in serving:
        for i, p in enumerate(g.compute_processes or []):
            if p.pid not in pids and (p.used_memory_bytes or 0) >= ctx.th("GPU009.foreign_bytes"):
                key = f"{gpu_key(g)}.compute_processes[{i}]"
                evidence[f"{key}.pid"] = p.pid
                evidence[f"{key}.name"] = p.name
                evidence[f"{key}.used_memory_bytes"] = p.used_memory_bytes
    if not evidence:
        return None
    return Hit(
        title="Another process holds memory on the serving GPU",
        message="Processes outside the server hold memory on a serving GPU (" + ", ".join(
            f"pid {evidence[k]} {evidence[k.replace('.pid', '.name')] or '?'}: "
            f"{gib(evidence[k.replace('.pid', '.used_memory_bytes')])}"
            for k in evidence if k.endswith(".pid")) + "): that memory is missing from the KV cache and their "
                "kernels compete with the server's.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Move the other process off this GPU (CUDA_VISIBLE_DEVICES, your scheduler's GPU isolation, or "
                "MIG), then restart the server so it sizes its KV cache again.",
                ("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",)),
    )
