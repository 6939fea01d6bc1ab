"""CPU001, numa misaligned (rules/catalog/cpu001_numa_misaligned.py): its fixture cases."""
from __future__ import annotations

import dataclasses

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    cpu,
    gpu,
    gpu0,
    snapshot,
)
from tests.rule_cases._healthy import healthy_gpu0
from triage.core.probe_data import NumaNode

CODE = "CPU001"


def cases() -> list[Case]:
    gpu1 = dataclasses.replace(healthy_gpu0(), index=1, uuid="GPU-2222", numa_node=1)
    tp_two_sockets = (gpu(gpus=(healthy_gpu0(), gpu1)), cfg(tensor_parallel_size=2))
    return [
        case("positive_wrong_node", "GPU on node 1, server pinned to node 0",
             {**FIRES, "commands": ["numactl --cpunodebind=1 --membind=1 <your server command>"]},
             snapshot(gpu0(numa_node=1))),
        case("positive_wrong_node_numa_bind", "vLLM 0.33 on node 0, GPU on node 1: --numa-bind, not numactl",
             {**FIRES, "commands": ["--numa-bind"]},
             snapshot(gpu0(numa_node=1), cfg(engine_version="0.33.0"))),
        case("positive_tp_across_sockets_old_vllm", "TP=2 with GPUs on nodes 0 and 1, server pinned to node 0, "
             "vLLM 0.18: no whole-server numactl advice",
             {**FIRES, "commands": [], "text_contains": ["pins some workers to the wrong node",
                                                         "no --numa-bind (added in 0.20)"]},
             snapshot(*tp_two_sockets)),
        case("positive_tp_across_sockets_new_vllm", "The same on vLLM 0.33: --numa-bind",
             {**FIRES, "commands": ["--numa-bind"]}, snapshot(*tp_two_sockets, cfg(engine_version="0.33.0"))),
        case("positive_tp_across_sockets_vllm_0_20", "The same on vLLM 0.20.1, where --numa-bind came in",
             {**FIRES, "commands": ["--numa-bind"]}, snapshot(*tp_two_sockets, cfg(engine_version="0.20.1"))),
        case("positive_tp_across_sockets_sglang", "TP=2 over two nodes on SGLang 0.5.4: one --numa-node "
             "value per GPU, in GPU order (numa_node[gpu_id]), never the set of nodes",
             {**FIRES, "commands": ["--numa-node 0 1"]},
             snapshot(*tp_two_sockets, cfg(engine="sglang", engine_version="0.5.4"))),
        case("negative_aligned", "Server on the GPU's node", PASSES, snapshot()),
        case("negative_single_node", "A one-node host cannot be misaligned",
             PASSES, snapshot(gpu0(numa_node=1), cpu(numa_nodes=(NumaNode(node=0, cpus=tuple(range(112))),)))),
    ]
