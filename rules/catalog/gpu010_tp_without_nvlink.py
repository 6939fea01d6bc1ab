"""GPU010 (tp-without-nvlink): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU010/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import (
    GpuData,
    ServerConfigData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._active_shared import allreduce_hit, allreduce_measured
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule

_PCIE_ONLY = frozenset({"hostbridge", "node", "system"})


@rule("GPU010", "tp-without-nvlink", Severity.HIGH, ("gpu", "server_config"), RuleDoc(
    what="Tensor parallelism > 1 over GPUs with no NVLink between them whose common ancestor is a PCIe host "
         "bridge, the NUMA node or the system (SMP interconnect); with `diagnose --active`, also an NCCL "
         "all-reduce measured below 25% of NVLink's rate (rules/catalog/_active_shared.py).",
    why="Tensor parallelism all-reduces after every layer. NVLink moves 600-900 GB/s; PCIe through the host "
        "bridge or across sockets moves a few tens of GB/s, so communication eats the gain (the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Step 6: Tensor Parallelism and GPU Selection').",
    example="server_config.tensor_parallel_size = 2, gpu.topology[0] = {gpu_a: 0, gpu_b: 1, "
            "common_ancestor: 'system', nvlink: false}",
    fix="Place the TP group on NVLink-connected GPUs, lower the TP (and use replicas), or use pipeline "
        "parallelism across PCIe.",
    references=("a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Step 6: Tensor Parallelism and GPU Selection' (PCIe interconnect negates TP gains)", "an explainer of inference as a memory-bound problem, 'when one GPU isn't enough' (TP needs NVLink)",
                "nvidia-smi topo -m"),
), thresholds=("GPU010.min_nvlink_busbw_frac",))
def gpu010(ctx: Context) -> Hit | None:
    tp = ctx.measured(ctx.need(ServerConfigData).tensor_parallel_size, "server_config.tensor_parallel_size")
    if tp <= 1:
        return None
    measured = allreduce_measured(ctx)     # --active: NCCL all-reduce against NVLink's rate
    topology = ctx.need(GpuData).topology
    if topology is None:
        if measured is not None and measured.low:
            return allreduce_hit(ctx, tp, measured, nvlink_seen=False)
        raise MissingInput("gpu.topology was not measured")
    serving = {g.index for g in ctx.serving_gpus()}
    pairs = [t for t in topology if t.gpu_a in serving and t.gpu_b in serving]
    if not pairs:
        if measured is not None and measured.low:
            return allreduce_hit(ctx, tp, measured, nvlink_seen=False)
        raise MissingInput("no topology entry links two of the serving GPUs")
    bad = [t for t in pairs if not t.nvlink and t.common_ancestor in _PCIE_ONLY]
    if not bad:
        if measured is not None and measured.low:
            return allreduce_hit(ctx, tp, measured, nvlink_seen=any(t.nvlink for t in pairs))
        return None
    evidence: dict[str, Any] = {"server_config.tensor_parallel_size": tp, **(measured.evidence if measured else {})}
    for t in bad:
        evidence[f"gpu.topology[{t.gpu_a},{t.gpu_b}].common_ancestor"] = t.common_ancestor
    cmds, note = engine_flags({"tensor_parallel_size": max(1, tp // 2)}, ctx.engine())
    return Hit(
        title="Tensor parallelism runs over PCIe, without NVLink",
        message=f"TP={tp} all-reduces every layer over PCIe ({', '.join(sorted({t.common_ancestor for t in bad}))}) "
                "instead of NVLink." + (measured.note() if measured else ""),
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.5,
        fix=Fix("Put the TP group on NVLink-connected GPUs (see `nvidia-smi topo -m`), or lower the TP and add "
                "replicas, or use pipeline parallelism across PCIe." + note, ("nvidia-smi topo -m",) + cmds),
    )
