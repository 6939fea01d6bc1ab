"""Rule fixtures for the `diagnose --active` measurements (rules/catalog/gpu014, gpu015, mem003 and _active_shared.py, and GPU004/GPU010 confirmed by
measurement). tests/rules_fixtures.py calls `define(...)` with its own helpers, so these cases are written
with the others by `python -m tests.rules_fixtures`.

The healthy figures are those of one H100 SXM on a Gen5 x16 slot in a two-socket host.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

GIB = 2**30


def healthy_active() -> dict[str, dict[str, Any]]:
    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GIB,
           "compute_capability": [9, 0], "pci_bus_id": "00000000:3b:00.0"}
    return copy.deepcopy({
        "host_memory": {
            "copy_bandwidth_gbps": 310.0, "read_bandwidth_gbps": 340.0, "buffer_bytes": 2 * GIB,
            "llc_bytes": 210 * 2**20, "num_threads": 112, "num_numa_nodes": 2, "unsupported_fields": [],
            "nodes": [{"node": 0, "num_threads": 56, "copy_bandwidth_gbps": 158.0, "read_bandwidth_gbps": 170.0},
                      {"node": 1, "num_threads": 56, "copy_bandwidth_gbps": 152.0, "read_bandwidth_gbps": 166.0}],
        },
        "pcie": {"gpus": [{**gpu, "buffer_bytes": 256 * 2**20,
                           "h2d_pinned_gbps": 53.6, "d2h_pinned_gbps": 54.1,
                           "h2d_pageable_gbps": 21.0, "d2h_pageable_gbps": 17.5,
                           "pcie_link_gen_under_load": 5, "pcie_link_width_under_load": 16,
                           "pcie_link_gen_max": 5, "pcie_link_gen_gpu_max": 5, "pcie_link_width_max": 16,
                           "link_theoretical_gbps": 63.02, "h2d_pinned_share": 0.851, "d2h_pinned_share": 0.858,
                           "unsupported_fields": []}]},
        "hbm": {"gpus": [{**gpu, "buffer_bytes": GIB, "copy_bandwidth_gbps": 2905.0, "spec_bandwidth_gbps": 3350.0,
                          "spec_key": "h100-sxm", "share_of_spec": 0.867, "unsupported_fields": []}]},
        "matmul": {"gpus": [{**gpu, "n": 8192, "spec_key": "h100-sxm", "bf16_tflops": 720.0, "fp8_tflops": 1310.0,
                             "bf16_spec_tflops": 989.4, "fp8_spec_tflops": 1978.9, "bf16_share_of_spec": 0.728,
                             "fp8_share_of_spec": 0.662, "unsupported_fields": []}]},
        "allreduce": {"gloo": {"backend": "gloo", "world_size": 2, "size_bytes": 32 * 2**20, "busbw_gbps": 4.1,
                               "algbw_gbps": 4.1},
                      "nccl": None, "nccl_reason": "1 GPU visible: an all-reduce needs two or more", "num_gpus": 1,
                      "unsupported_fields": ["nccl"]},
    })


def define(case: Callable[..., None], snapshot: Callable[..., dict[str, Any]], patched: Callable[..., dict],
           FIRES: dict[str, Any], PASSES: dict[str, Any]) -> None:
    g = "gpu.gpus.0."
    p = "pcie.gpus.0."

    def snap(active_patch: dict[str, Any] | None = None, passive_patch: dict[str, Any] | None = None,
             only: tuple[str, ...] | None = None) -> dict[str, Any]:
        base = snapshot(passive_patch)
        active = patched(healthy_active(), copy.deepcopy(active_patch))
        for name, body in active.items():
            if only is None or name in only:
                base["probes"].append({"name": name, "status": "ok", "duration_s": 1.0, "reason": None, "data": body})
        return base

    idle = {g + "pcie_link_gen_current": 1, g + "pcie_read_utilization_gpu_pct": 0.0, g + "utilization_gpu_pct": 0.0}
    weights = {"model_weight_bytes": 8.5e9}
    # GPU004, by measurement
    case("GPU004", "positive_measured_gen3_x8_speed",
         "Gen5 x16 slot whose pinned copies measure at Gen3 x8 speed (about an eighth); the idle link read by NVML "
         "was ambiguous, the measurement is not",
         {**FIRES, "severity": "high", "certainty": "confirmed",
          "evidence_keys": ["pcie.gpus[0].h2d_pinned_gbps", "pcie.gpus[0].link_theoretical_gbps"],
          "text_contains": ["about 1/8 of the ~50 GB/s a healthy link measures", "Loading the served model"]},
         snap({p + "h2d_pinned_gbps": 6.6, p + "d2h_pinned_gbps": 6.4, p + "pcie_link_gen_under_load": None,
               p + "pcie_link_width_under_load": None}, idle), config=weights)
    case("GPU004", "positive_trained_low_under_load", "Under the copy's load NVML reads Gen4 x16 on a Gen5 x16 slot",
         {**FIRES, "severity": "high", "certainty": "confirmed",
          "evidence_keys": ["pcie.gpus[0].pcie_link_gen_under_load"],
          "text_contains": ["under that load the link ran at Gen4 x16"]},
         snap({p + "h2d_pinned_gbps": 26.0, p + "d2h_pinned_gbps": 26.3, p + "pcie_link_gen_under_load": 4}, idle))
    case("GPU004", "negative_measured_full_speed",
         "NVML saw an idle Gen1 link; pinned copies measure 85% of Gen5 x16: healthy, judged by measurement",
         PASSES, snap(passive_patch=idle))
    # GPU010, by measurement
    two = {"gpu.gpus": [dict(snapshot()["probes"][0]["data"]["gpus"][0], index=i, uuid=f"GPU-{i}") for i in (0, 1)],
           "server_config.tensor_parallel_size": 2}
    nccl = {"allreduce.nccl": {"backend": "nccl", "world_size": 2, "size_bytes": 256 * 2**20, "algbw_gbps": 21.0,
                               "busbw_gbps": 21.0}, "allreduce.num_gpus": 2}
    case("GPU010", "positive_nvlink_unused", "TP=2 on NVLink-connected H100s, but NCCL all-reduce measures 21 GB/s "
         "bus bandwidth (5% of NVLink)",
         {**FIRES, "certainty": "confirmed", "text_contains": ["NVLink is there, but the traffic does not use it"],
          "evidence_keys": ["allreduce.nccl.busbw_gbps", "derived.allreduce_busbw_frac"]},
         snap(nccl, {**two, "gpu.topology": [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "nvlink", "nvlink": True}]}))
    case("GPU010", "positive_pcie_confirmed_by_measurement", "TP=2 across sockets without NVLink; the measured "
         "all-reduce confirms it",
         {**FIRES, "certainty": "confirmed", "evidence_keys": ["gpu.topology[0,1].common_ancestor",
                                                               "allreduce.nccl.busbw_gbps"],
          "text_contains": ["Measured: NCCL all-reduce moves 21.0 GB/s"]},
         snap(nccl, {**two, "gpu.topology": [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "system", "nvlink": False}]}))
    case("GPU010", "negative_nvlink_measured_fast", "TP=2 on NVLink; all-reduce measures 370 GB/s (82% of NVLink)",
         PASSES, snap({**nccl, "allreduce.nccl.busbw_gbps": 370.0},
                      {**two, "gpu.topology": [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "nvlink", "nvlink": True}]}))
    # GPU014
    case("GPU014", "positive_hbm_half_spec", "H100 SXM copies 1450 GB/s of 3350 (power-capped memory clock)",
         {**FIRES, "severity": "high", "certainty": "confirmed",
          "evidence_keys": ["hbm.gpus[0].copy_bandwidth_gbps", "derived.decode_tokens_per_s_bound_measured"],
          "text_contains": ["batch-1 decode ceiling falls from 394 to 171 tokens/s"]},
         snap({"hbm.gpus.0.copy_bandwidth_gbps": 1450.0, "hbm.gpus.0.share_of_spec": 0.433}), config=weights)
    case("GPU014", "positive_no_weights_says_how", "Slow HBM, model size unknown: the message says how to get the cost",
         {**FIRES, "text_contains": ["[model] weight_bytes"]},
         snap({"hbm.gpus.0.copy_bandwidth_gbps": 1450.0}))
    case("GPU014", "negative_hbm_healthy", "2905 GB/s of 3350 (87%)", PASSES, snap())
    case("GPU014", "skipped_unknown_gpu", "A GPU the spec table does not know",
         {"fires": False, "skipped_reason": "spec table"},
         snap({"hbm.gpus.0.name": "NVIDIA A16", "hbm.gpus.0.spec_bandwidth_gbps": None}))
    # GPU015
    case("GPU015", "positive_matmul_throttled", "bf16 matmuls at 310 of 989 TFLOP/s",
         {**FIRES, "severity": "medium", "evidence_keys": ["matmul.gpus[0].bf16_tflops"],
          "text_contains": ["prefill ceiling"]},
         snap({"matmul.gpus.0.bf16_tflops": 310.0, "matmul.gpus.0.fp8_tflops": 600.0}), config=weights)
    case("GPU015", "negative_matmul_healthy", "bf16 720 (73%), fp8 1310 (66%) TFLOP/s", PASSES, snap())
    # MEM003
    case("MEM003", "positive_slow_node", "Node 1 copies 61 GB/s against node 0's 158 (a memory channel missing)",
         {**FIRES, "evidence_keys": ["host_memory.nodes[1].copy_bandwidth_gbps"], "text_contains": ["node 1 copies"]},
         snap({"host_memory.nodes.1.copy_bandwidth_gbps": 61.0}))
    case("MEM003", "negative_nodes_alike", "158 and 152 GB/s", PASSES, snap())
    case("MEM003", "skipped_single_node", "One NUMA node: nothing to compare",
         {"fires": False, "skipped_reason": "single NUMA node"},
         snap({"host_memory.nodes": [{"node": 0, "copy_bandwidth_gbps": 20.0}], "host_memory.num_numa_nodes": 1}))
