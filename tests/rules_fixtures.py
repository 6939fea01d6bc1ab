"""Builds the rule fixtures under tests/fixtures/rules/<CODE>/*.json from readable Python.

A healthy host (H100, vLLM 0.18 serving an FP8 8B model, moderate load) is described once below; each
case changes only the fields its story needs, by dotted path ("gpu.gpus.0.pcie_link_gen_current").

Regenerate after editing:  python -m tests.rules_fixtures
Each fixture file holds: description, snapshot {probes: [...]}, bench, baseline, config, expect.
expect: {"fires": bool, "severity", "certainty", "evidence_keys": [...], "commands": [...],
         "text_contains": [...], "skipped_reason": "..."}.
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rules"
GIB = 2**30


def _stats(p50: float, p99: float) -> dict[str, float]:
    return {"mean": round((p50 * 3 + p99) / 4, 3), "std": round((p99 - p50) / 2.33, 3), "min": round(p50 * 0.8, 3),
            "p50": p50, "p90": round(p50 + (p99 - p50) * 0.6, 3), "p95": round(p50 + (p99 - p50) * 0.8, 3),
            "p99": p99, "max": round(p99 * 1.1, 3)}


def healthy_probes() -> dict[str, dict[str, Any]]:
    """probe name -> data for a healthy, moderately loaded vLLM host."""
    return copy.deepcopy({
        "gpu": {
            "driver_version": "550.54.15", "cuda_driver_version": "12.4", "nvml_version": "12.550.54.15",
            "window_s": 5.0, "num_gpus": 1, "unsupported_fields": [],
            "gpus": [{
                "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1111", "pci_bus_id": "00000000:3B:00.0",
                "compute_capability": [9, 0], "memory_total_bytes": 80 * GIB, "memory_used_bytes": 72 * GIB,
                "memory_reserved_bytes": 512 * 2**20, "memory_free_bytes": 8 * GIB - 512 * 2**20,
                "utilization_gpu_pct": 78.0, "utilization_gpu_pct_max": 95.0, "utilization_memory_pct": 55.0,
                "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980, "mem_clock_mhz": 2619, "mem_clock_max_mhz": 2619,
                "clock_event_reasons_bitmask": 0, "clock_event_reasons": [], "clock_event_reasons_source": "clocks_event",
                "throttle_time_delta_us": {"power": 0.0, "thermal": 0.0, "sync_boost": 0.0, "board_limit": 0.0,
                                           "low_util": 0.0, "reliability": 0.0, "total_app_clocks": 0.0,
                                           "total_base_clocks": 0.0},
                "throttle_time_frac": {"power": 0.0, "thermal": 0.0, "sync_boost": 0.0, "board_limit": 0.0,
                                       "low_util": 0.0, "reliability": 0.0, "total_app_clocks": 0.0,
                                       "total_base_clocks": 0.0},
                "power_usage_w": 520.0, "power_limit_enforced_w": 700.0, "power_limit_default_w": 700.0,
                "temperature_c": 62, "temperature_slowdown_c": 90,
                "pcie_link_gen_current": 5, "pcie_link_gen_max": 5, "pcie_link_gen_gpu_max": 5,
                "pcie_link_width_current": 16, "pcie_link_width_max": 16,
                "pcie_read_utilization_gpu_pct": 80.0, "pcie_replay_count": 0,
                "ecc_mode_enabled": True, "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
                "ecc_uncorrected_aggregate": 0, "retired_pages_sbe": None, "retired_pages_dbe": None,
                "retired_pages_pending": None, "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0,
                "remapped_rows_pending": False, "remapped_rows_failure": False,
                "persistence_mode_enabled": True, "mig_mode_enabled": False,
                "compute_processes": [{"pid": 1235, "used_memory_bytes": 71 * GIB, "name": "VLLM::EngineCore"}],
                "nvlink": [], "numa_node": 0, "numa_node_source": "nvml", "unsupported_fields": [], "lost": False,
            }],
            "topology": [],
        },
        "kernel_log": {"source": "dmesg", "num_lines_read": 1800, "num_xid_events": 0, "xid_counts": {},
                       "xid_events": []},
        "cpu": {
            "model": "Intel(R) Xeon(R) Platinum 8480+", "num_physical_cores": 56, "num_logical_cpus": 112,
            "governor": "performance", "governors": {"performance": 112}, "freq_mhz_current": 3000.0,
            "freq_mhz_max": 3800.0, "window_s": 5.0, "per_core_util_pct": [35.0] * 8,
            "numa_nodes": [{"node": 0, "cpus": list(range(0, 56))}, {"node": 1, "cpus": list(range(56, 112))}],
        },
        "server_process": {
            "pid": 1234, "engine": "vllm",
            "cmdline": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--quantization", "fp8",
                        "--kv-cache-dtype", "fp8", "--max-model-len", "8192"],
            "cpu_affinity": list(range(0, 56)), "affinity_numa_nodes": [0], "memory_numa_nodes": [0],
            "window_s": 5.0,
            "processes": [{"pid": 1234, "name": "vllm", "cpu_pct": 40.0, "num_threads": 64, "rss_bytes": 3 * GIB},
                          {"pid": 1235, "name": "VLLM::EngineCore", "cpu_pct": 70.0, "num_threads": 48,
                           "rss_bytes": 5 * GIB}],
            "max_thread_cpu_pct": 72.0, "rss_bytes_start": 8 * GIB, "rss_bytes_end": 8 * GIB + 20 * 2**20,
            "debug_env": {}, "hf_home": "/models/hf",
        },
        "memory": {"total_bytes": 512 * GIB, "available_bytes": 400 * GIB, "available_pct": 78.1,
                   "swap_total_bytes": 0, "swap_used_bytes": 0, "swap_in_bytes_delta": 0, "swap_out_bytes_delta": 0,
                   "window_s": 5.0, "copy_bandwidth_gbps": 11.5},
        "storage": {"model_dir": "/models/hf/hub/models--meta-llama--Llama-3.1-8B-Instruct", "model_dir_fstype": "ext4",
                    "model_dir_is_network_fs": False, "read_gbps": 3.1, "read_bytes": GIB, "page_cache_warm": False,
                    "hf_cache_dir": "/models/hf", "hf_cache_fstype": "ext4", "hf_cache_persistent": True,
                    "hf_cache_empty": False, "serves_hub_model_id": True},
        "network": {"url": "http://127.0.0.1:8000", "same_host": True, "num_samples": 20, "dns_ms_p50": None,
                    "tcp_connect_ms_p50": 0.08, "health_ttfb_ms_p50": 0.9},
        "server_metrics": {
            "engine": "vllm", "model_name": "meta-llama/Llama-3.1-8B-Instruct", "window_s": 5.0,
            "kv_cache_usage_frac": 0.55, "kv_cache_usage_frac_max": 0.62,
            "num_requests_running": 12, "num_requests_running_max": 15, "num_requests_waiting": 0,
            "num_requests_waiting_max": 0,
            "num_preemptions_delta": 0, "preemptions_per_s": 0.0,
            "prefix_cache_queries_delta": 60000, "prefix_cache_hits_delta": 27000, "prefix_cache_hit_rate": 0.45,
            "prompt_tokens_per_s": 9200.0, "generation_tokens_per_s": 1450.0,
            "histograms": {
                "ttft_s": {"count_delta": 110, "sum_delta_s": 9.4, "mean_s": 0.085, "p50_s": 0.07, "p99_s": 0.24},
                "itl_s": {"count_delta": 7200, "sum_delta_s": 61.0, "mean_s": 0.0085, "p50_s": 0.008, "p99_s": 0.012},
                "e2e_s": {"count_delta": 110, "sum_delta_s": 128.0, "mean_s": 1.16, "p50_s": 1.1, "p99_s": 1.6},
                "queue_time_s": {"count_delta": 110, "sum_delta_s": 0.44, "mean_s": 0.004, "p50_s": 0.002, "p99_s": 0.02},
                "prefill_time_s": {"count_delta": 110, "sum_delta_s": 8.0, "mean_s": 0.072, "p50_s": 0.06, "p99_s": 0.2},
                "decode_time_s": {"count_delta": 110, "sum_delta_s": 118.0, "mean_s": 1.07, "p50_s": 1.0, "p99_s": 1.5},
            },
            "cache_config": {"block_size": 16, "cache_dtype": "fp8", "gpu_memory_utilization": 0.9,
                             "enable_prefix_caching": True, "num_gpu_blocks": 30000},
            "kv_cache_capacity_tokens": None, "spec_decode_acceptance_rate": None, "counter_resets": [],
        },
        "server_config": {
            "engine": "vllm", "engine_version": "0.18.1", "model": "meta-llama/Llama-3.1-8B-Instruct",
            "max_model_len": 8192, "gpu_memory_utilization": 0.9, "max_num_seqs": 256,
            "max_num_batched_tokens": 8192, "enable_chunked_prefill": True, "enable_prefix_caching": True,
            "kv_cache_dtype": "fp8", "dtype": "bfloat16", "quantization": "fp8", "tensor_parallel_size": 1,
            "pipeline_parallel_size": 1, "enforce_eager": False, "speculative_config": None, "block_size": 16,
            "api_server_count": 1, "data_parallel_size": 1, "metrics_engine": "vllm",
            "sources": {"engine_version": "/version", "max_model_len": "cmdline", "quantization": "cmdline",
                        "kv_cache_dtype": "cmdline", "gpu_memory_utilization": "cache_config_info",
                        "enable_prefix_caching": "cache_config_info", "enable_chunked_prefill": "default",
                        "max_num_seqs": "default", "enforce_eager": "default", "dtype": "default",
                        "tensor_parallel_size": "default"},
        },
        "engine_identity": {"engine": "vllm", "version": "0.11.2", "server_header": "uvicorn",
                            "evidence": ["command line launches vllm", "/metrics has vllm:* names"],
                            "batching": {"slots": None, "continuous": None, "ctx_tokens": None, "max_queue": None,
                                         "evidence": [], "from_cmdline": True}},
        "logs": {"path": "/var/log/vllm.log", "truncated": False, "num_lines": 5200, "slow_tokenizer": False,
                 "num_preemption_lines": 0, "kv_cache_tokens": 480000, "num_gpu_blocks": 30000, "max_concurrency": 58.6,
                 "max_concurrency_tokens_per_request": 8192, "cuda_graph_hints": [], "num_nccl_errors": 0,
                 "num_shm_broadcast_stalls": 0, "num_shm_broadcast_stalls_startup": 0, "num_oom_lines": 0, "weights_download_s": None},
    })


def healthy_level(concurrency: int) -> dict[str, Any]:
    """One bench level of the healthy server: throughput scales, no queueing, no preemption."""
    tps = {1: 120.0, 4: 440.0, 16: 1500.0, 64: 3900.0}[concurrency]
    ttft50 = {1: 38.0, 4: 44.0, 16: 62.0, 64: 140.0}[concurrency]
    tpot50 = {1: 8.0, 4: 8.6, 16: 10.0, 64: 15.0}[concurrency]
    kv = {1: 0.04, 4: 0.12, 16: 0.4, 64: 0.78}[concurrency]
    util = {1: 31.0, 4: 55.0, 16: 84.0, 64: 96.0}[concurrency]
    completed = max(20, concurrency * 8)
    return {
        "concurrency": concurrency, "request_rate": None, "duration_s": 30.0,
        "requests": {"completed": completed, "failed": 0, "errors_by_kind": {}},
        "ttft_ms": _stats(ttft50, round(ttft50 * 2.2, 1)), "tpot_ms": _stats(tpot50, round(tpot50 * 1.3, 2)),
        "itl_ms": _stats(tpot50, round(tpot50 * 1.6, 2)), "e2e_ms": _stats(ttft50 + 127 * tpot50, ttft50 * 2 + 127 * tpot50 * 1.3),
        "output_tokens_per_s": tps, "total_tokens_per_s": tps * 5, "requests_per_s": round(tps / 128, 3),
        "goodput_requests_per_s": None, "slo_attainment_pct": None,
        "input_tokens_mean": 512.0, "output_tokens_mean": 128.0,
        "server": {"kv_cache_usage_frac_mean": round(kv * 0.8, 3), "kv_cache_usage_frac_max": kv,
                   "num_requests_running_mean": concurrency * 0.95, "num_requests_running_max": concurrency,
                   "num_requests_waiting_mean": 0.0, "num_requests_waiting_max": 0,
                   "num_preemptions_delta": 0, "prefix_cache_hit_rate": 0.62,
                   "server_ttft_ms_mean": round(ttft50 * 0.8, 1), "server_queue_time_ms_mean": 1.5,
                   "client_minus_server_ttft_ms": 6.0, "prompt_tokens_delta": completed * 512,
                   "generation_tokens_delta": completed * 128, "engine": "vllm"},
        "gpu": {"utilization_gpu_pct_mean": util, "utilization_gpu_pct_max": min(100.0, util + 8),
                "memory_used_bytes_max": 72 * GIB, "power_usage_w_mean": 200 + util * 4, "sm_clock_mhz_mean": 1980,
                "clock_event_reasons_seen": [], "num_samples": 30},
        "client": {"cpu_pct": 22.0, "event_loop_lag_ms_p99": 1.2, "achieved_concurrency": float(concurrency),
                   "valid": True, "invalid_reason": None},
        "samples": None, "repeats": None, "notes": [],
    }


def healthy_bench(concurrencies=(1, 4, 16, 64)) -> dict[str, Any]:
    return {"config": {"endpoint": "chat", "input_len": 512, "output_len": 128, "shared_prefix_len": 400,
                       "slo": {}, "model": "meta-llama/Llama-3.1-8B-Instruct"},
            "levels": [healthy_level(c) for c in concurrencies], "summary": None}


# --- patching by dotted path ---------------------------------------------------------------------
def _set(root: Any, path: str, value: Any) -> None:
    parts = path.split(".")
    node = root
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def patched(base: dict[str, Any], patch: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for path, value in (patch or {}).items():
        _set(out, path, value)
    return out


def snapshot(patch: dict[str, Any] | None = None, drop: tuple[str, ...] = (),
             status: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The healthy snapshot with `patch` applied, probes in `drop` left out, and `status` overrides
    ({probe: (status, reason)}, whose data becomes empty)."""
    data = patched(healthy_probes(), patch)
    probes = []
    for name, body in data.items():
        if name in drop:
            continue
        st, reason = (status or {}).get(name, ("ok", None))
        probes.append({"name": name, "status": st, "duration_s": 0.05, "reason": reason,
                       "data": body if st == "ok" else {}})
    return {"probes": probes}


def startup_log(compile_s=(), download_s=(), load=None, ready_s=160.0, graphs_s=(), gaps_s=()) -> dict[str, Any]:
    """logs.startup as the log probe writes it (triage/engines/startup_log.py): the last start's phases."""
    phases = []
    if load is not None:
        seconds, size = load
        phases.append({"phase": "weight_load", "label": "weight load", "seconds": seconds, "logged": True,
                       "bytes": size, "bandwidth_bytes_per_s": round(size / seconds, 1), "started_at_s": 5.0,
                       "ended_at_s": 5.0 + seconds, "completed": True, "line": None})
    return {"engine": "vllm", "num_starts": max(1, len(compile_s), len(download_s)), "phases": phases,
            "ready_s": ready_s, "phases_total_s": None, "compile_s_each_start": list(compile_s),
            "cuda_graph_s_each_start": list(graphs_s), "download_s_each_start": list(download_s),
            "start_gaps_s": list(gaps_s)}


def bench(patch: dict[str, Any] | None = None, concurrencies=(1, 4, 16, 64)) -> dict[str, Any]:
    return patched(healthy_bench(concurrencies), patch)


# --- the cases -----------------------------------------------------------------------------------
CASES: list[tuple[str, str, dict[str, Any]]] = []


def case(code: str, name: str, description: str, expect: dict[str, Any], snap: dict[str, Any] | None = None,
         bench_: dict[str, Any] | None = None, baseline: dict[str, Any] | None = None,
         config: dict[str, Any] | None = None) -> None:
    CASES.append((code, name, {"description": description, "snapshot": snap if snap is not None else snapshot(),
                               "bench": bench_, "baseline": baseline, "config": config or {}, "expect": expect}))


FIRES = {"fires": True}
# What every report carries, for the earlier reports given as a baseline (`triage diagnose --baseline`).
REPORT_HEAD = {"triage_version": "0.4.0", "created_at": "2026-11-20T10:00:00Z", "command": ["triage", "bench"],
               "host": {"hostname": "gpu-node-3", "os": "Linux", "python": "3.11", "cpu_model": None,
                        "num_cpus": None, "memory_total_bytes": None}}
PASSES = {"fires": False}


def _define() -> None:
    g = "gpu.gpus.0."
    # GPU001
    case("GPU001", "positive_offload_rss_growth", "VRAM 99% full, server RSS grew 6 GiB, a thread pegged while GPU starves",
         {**FIRES, "severity": "high", "certainty": "likely",
          "evidence_keys": ["gpu.gpus[0].memory_used_frac", "server_process.rss_growth_bytes"],
          "commands": ["--quantization fp8"]},
         snapshot({g + "memory_used_bytes": int(79.5 * GIB), g + "utilization_gpu_pct": 12.0,
                   "server_process.rss_bytes_end": 14 * GIB, "server_process.max_thread_cpu_pct": 100.0}))
    case("GPU001", "positive_cpu_offload_flag", "Explicit --cpu-offload-gb on an A100 with full VRAM",
         {**FIRES, "certainty": "confirmed", "commands": ["triage plan"]},
         snapshot({g + "memory_used_bytes": int(79.8 * GIB), g + "compute_capability": [8, 0],
                   g + "name": "NVIDIA A100-SXM4-80GB",
                   "server_process.cmdline": ["vllm", "serve", "m", "--cpu-offload-gb", "20"]}))
    case("GPU001", "negative_full_but_preallocated", "VRAM 97% used by vLLM's preallocated KV pool, no offload signs",
         PASSES, snapshot({g + "memory_used_bytes": int(77.6 * GIB)}))
    case("GPU001", "negative_vram_has_room", "VRAM 90% used", PASSES, snapshot())
    # GPU002
    case("GPU002", "positive_hw_thermal", "HW thermal slowdown at 97% utilization",
         {**FIRES, "severity": "high", "certainty": "confirmed",
          "evidence_keys": ["gpu.gpus[0].clock_event_reasons"]},
         snapshot({g + "clock_event_reasons": ["hw_thermal_slowdown"], g + "utilization_gpu_pct": 97.0,
                   g + "sm_clock_mhz": 1005}))
    case("GPU002", "positive_bench_power_brake", "Power brake seen during a loaded bench level, no NVML probe",
         {**FIRES, "evidence_keys": ["bench.c64.gpu.clock_event_reasons_seen"]},
         snapshot(drop=("gpu",)), bench({"levels.3.gpu.clock_event_reasons_seen": ["hw_power_brake_slowdown"]}))
    case("GPU002", "positive_thermal_counter", "NVML's thermal throttle counter ran 12% of the window",
         {**FIRES, "evidence_keys": ["gpu.gpus[0].throttle_time_frac.thermal+board_limit+reliability"]},
         snapshot({g + "throttle_time_frac.thermal": 0.12}))
    case("GPU002", "negative_sw_power_cap_at_load", "Software power cap at full load is normal",
         PASSES, snapshot({g + "clock_event_reasons": ["sw_power_cap"], g + "utilization_gpu_pct": 99.0}))
    case("GPU002", "negative_idle_thermal", "A slowdown flag on an idle GPU is not throttling under load",
         PASSES, snapshot({g + "clock_event_reasons": ["gpu_idle", "sw_thermal_slowdown"], g + "utilization_gpu_pct": 0.0}))
    # GPU003
    case("GPU003", "positive_lowered_cap", "Power limit 450 W on a 700 W board",
         {**FIRES, "severity": "medium", "commands": ["sudo nvidia-smi -i 0 -pl 700"]},
         snapshot({g + "power_limit_enforced_w": 450.0}))
    case("GPU003", "negative_default_cap", "Enforced equals default", PASSES, snapshot())
    # GPU004
    case("GPU004", "positive_gen3_x8_busy", "Gen3 x8 on a Gen5 x16 H100 at 85% load (seed 003 case 1)",
         {**FIRES, "severity": "high", "certainty": "confirmed",
          "evidence_keys": ["gpu.gpus[0].pcie_link_gen_current", "gpu.gpus[0].pcie_link_width_current"]},
         snapshot({g + "pcie_link_gen_current": 3, g + "pcie_link_width_current": 8,
                   g + "pcie_read_utilization_gpu_pct": 85.0}))
    case("GPU004", "negative_idle_downshift", "An idle GPU downshifted its link to Gen1 to save power",
         {"fires": False, "skipped_reason": "idle"},
         snapshot({g + "pcie_link_gen_current": 1, g + "pcie_read_utilization_gpu_pct": 0.0,
                   g + "utilization_gpu_pct": 0.0}))
    case("GPU004", "negative_full_link_busy", "Gen5 x16 under load", PASSES, snapshot())
    # GPU005
    case("GPU005", "positive_uncorrectable", "Uncorrectable ECC errors and a pending row remap",
         {**FIRES, "severity": "critical", "commands": ["sudo nvidia-smi -r -i 0"]},
         snapshot({g + "ecc_uncorrected_volatile": 4, g + "remapped_rows_pending": True}))
    case("GPU005", "positive_retired_pages", "Retired pages past DCGM's line on a V100-era GPU",
         {**FIRES, "severity": "high"},
         snapshot({g + "retired_pages_sbe": 50, g + "retired_pages_dbe": 16, g + "remapped_rows_pending": None,
                   g + "remapped_rows_failure": None}))
    case("GPU005", "negative_corrected_only", "Corrected ECC errors only (ECC doing its job)",
         PASSES, snapshot({g + "ecc_corrected_volatile": 12}))
    case("GPU005", "skipped_no_counters", "Consumer GPU without ECC or remapping counters",
         {"fires": False, "skipped_reason": "ECC"},
         snapshot({g + k: None for k in ("ecc_uncorrected_volatile", "retired_pages_sbe", "retired_pages_dbe",
                                         "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure")}))
    # GPU006
    case("GPU006", "positive_fell_off_bus", "Xid 79: GPU has fallen off the bus",
         {**FIRES, "severity": "critical", "certainty": "confirmed",
          "evidence_keys": ["kernel_log.xid_events.xid_79_count"]},
         snapshot({"kernel_log.xid_events": [{"xid": 79, "pci_bus_id": "0000:3B:00.0",
                                              "line": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."}]}))
    case("GPU006", "positive_app_xid", "Xid 13 (application-level) is reported as possible",
         {**FIRES, "severity": "medium", "certainty": "possible"},
         snapshot({"kernel_log.xid_events": [{"xid": 13, "pci_bus_id": "0000:3B:00.0", "line": "NVRM: Xid 13"}]}))
    case("GPU006", "positive_counts_beyond_kept_events", "xid_counts has 250 Xid 48 while only the last events are kept",
         {**FIRES, "severity": "critical", "evidence_keys": ["kernel_log.xid_events.xid_48_count"]},
         snapshot({"kernel_log.xid_counts": {"48": 250}, "kernel_log.num_xid_events": 250,
                   "kernel_log.xid_events": [{"xid": 48, "pci_bus_id": "0000:3B:00.0", "meaning": "DBE", "line": "Xid 48"}]}))
    case("GPU006", "positive_old_xid_says_its_age", "An Xid 79 from 9 days ago: the message says how old it is",
         {**FIRES, "severity": "critical", "evidence_keys": ["kernel_log.newest_xid_age_s"],
          "text_contains": ["The newest is 9 days old"]},
         snapshot({"kernel_log.newest_xid_age_s": 9 * 86400.0,
                   "kernel_log.xid_events": [{"xid": 79, "pci_bus_id": "0000:3B:00.0", "age_s": 9 * 86400.0,
                                              "line": "[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79"}]}))
    case("GPU006", "negative_clean_log", "No Xid lines", PASSES, snapshot())
    case("GPU006", "skipped_no_dmesg", "dmesg not readable without root",
         {"fires": False, "skipped_reason": "permission_denied"},
         snapshot(status={"kernel_log": ("permission_denied", "dmesg: read kernel buffer failed: Operation not permitted")}))
    # GPU007
    case("GPU007", "positive_off", "Persistence mode off", {**FIRES, "severity": "low", "commands": ["sudo nvidia-smi -pm 1"]},
         snapshot({g + "persistence_mode_enabled": False}))
    case("GPU007", "negative_on", "Persistence mode on", PASSES, snapshot())
    # GPU008
    case("GPU008", "positive_bench_low_util", "16 in flight, GPU at 25%, one request running at a time",
         {**FIRES, "evidence_keys": ["bench.c16.gpu.utilization_gpu_pct_mean"]},
         snapshot(), bench({"levels.2.gpu.utilization_gpu_pct_mean": 25.0,
                            "levels.2.server.num_requests_running_mean": 1.0,
                            "levels.3.gpu.utilization_gpu_pct_mean": 27.0}))
    case("GPU008", "positive_capped_batch", "max_num_seqs=4 caps the batch under 16 in flight",
         {**FIRES, "commands": ["--max-num-seqs 256"]},
         snapshot({"server_config.max_num_seqs": 4}),
         bench({"levels.2.gpu.utilization_gpu_pct_mean": 30.0, "levels.2.server.num_requests_running_max": 4}))
    case("GPU008", "negative_busy_under_load", "Healthy bench: 55-96% under load", PASSES, snapshot(), bench())
    case("GPU008", "negative_low_util_low_load", "Low util at concurrency 1 is expected",
         PASSES, snapshot(), bench({"levels.0.gpu.utilization_gpu_pct_mean": 10.0}))
    # GPU009
    case("GPU009", "positive_foreign_job", "A notebook holds 9 GiB on the serving GPU",
         {**FIRES, "severity": "medium", "evidence_keys": ["gpu.gpus[0].compute_processes[1].pid"]},
         snapshot({g + "compute_processes": [{"pid": 1235, "used_memory_bytes": 60 * GIB, "name": "VLLM::EngineCore"},
                                              {"pid": 4242, "used_memory_bytes": 9 * GIB, "name": "python"}]}))
    case("GPU009", "negative_engine_child", "The engine core child process is the server's own",
         PASSES, snapshot())
    case("GPU009", "skipped_pid_namespace", "Container PID namespace: NVML pids do not match the server's",
         {"fires": False, "skipped_reason": "namespace"},
         snapshot({g + "compute_processes": [{"pid": 88, "used_memory_bytes": 71 * GIB, "name": "python"}]}))
    # GPU010
    two_gpus = {"gpu.gpus": [healthy_probes()["gpu"]["gpus"][0],
                             {**healthy_probes()["gpu"]["gpus"][0], "index": 1, "uuid": "GPU-2222",
                              "compute_processes": [{"pid": 1236, "used_memory_bytes": 71 * GIB, "name": "VLLM::Worker"}]}],
                "server_process.processes": [{"pid": 1234, "name": "vllm", "cpu_pct": 40.0, "num_threads": 64, "rss_bytes": GIB},
                                             {"pid": 1235, "name": "w0", "cpu_pct": 60.0, "num_threads": 8, "rss_bytes": GIB},
                                             {"pid": 1236, "name": "w1", "cpu_pct": 60.0, "num_threads": 8, "rss_bytes": GIB}],
                "server_config.tensor_parallel_size": 2}
    case("GPU010", "positive_tp2_over_system", "TP=2 across sockets, no NVLink",
         {**FIRES, "severity": "high", "commands": ["nvidia-smi topo -m"]},
         snapshot({**two_gpus, "gpu.topology": [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "system", "nvlink": False}]}))
    case("GPU010", "negative_tp2_nvlink", "TP=2 over NVLink",
         PASSES, snapshot({**two_gpus, "gpu.topology": [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "system", "nvlink": True}]}))
    case("GPU010", "negative_tp1", "No tensor parallelism", PASSES, snapshot())
    # GPU011
    case("GPU011", "positive_launch_blocking", "CUDA_LAUNCH_BLOCKING=1 left in the service file",
         {**FIRES, "severity": "high", "commands": ["unset CUDA_LAUNCH_BLOCKING"]},
         snapshot({"server_process.debug_env": {"CUDA_LAUNCH_BLOCKING": "1"}}))
    case("GPU011", "positive_vllm_trace", "VLLM_TRACE_FUNCTION=1 and NCCL_DEBUG=INFO",
         {**FIRES, "severity": "high", "text_contains": ["traces every Python function call"]},
         snapshot({"server_process.debug_env": {"VLLM_TRACE_FUNCTION": "1", "NCCL_DEBUG": "INFO"}}))
    case("GPU011", "positive_profiler_injected", "An Nsight injection library and the legacy profiler left on",
         {**FIRES, "severity": "medium", "commands": ["unset CUDA_INJECTION64_PATH", "unset CUDA_PROFILE"]},
         snapshot({"server_process.debug_env": {"CUDA_INJECTION64_PATH": "/opt/nsight/libToolsInjection64.so",
                                                "CUDA_PROFILE": "1", "OMP_NUM_THREADS": "8"}}))
    case("GPU011", "negative_harmless_vars", "NCCL_DEBUG=WARN and CUDA_VISIBLE_DEVICES are harmless",
         PASSES, snapshot({"server_process.debug_env": {"NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0"}}))
    case("GPU011", "negative_launch_blocking_zero", "CUDA_LAUNCH_BLOCKING=0 is harmless",
         PASSES, snapshot({"server_process.debug_env": {"CUDA_LAUNCH_BLOCKING": "0"}}))
    # GPU012
    case("GPU012", "positive_hot_under_load", "86 °C at 94% load with slowdown at 90 °C",
         {**FIRES, "evidence_keys": ["gpu.gpus[0].temperature_c"]},
         snapshot({g + "temperature_c": 86, g + "utilization_gpu_pct": 94.0}))
    case("GPU012", "negative_cool", "62 °C under load", PASSES, snapshot())
    case("GPU012", "negative_hot_idle", "Hot but idle (a neighbour's exhaust): judged under load only",
         PASSES, snapshot({g + "temperature_c": 87, g + "utilization_gpu_pct": 2.0}))
    # GPU013
    case("GPU013", "positive_lost", "GPU 1 fell off the bus (NVML GPU_IS_LOST)",
         {**FIRES, "severity": "critical", "evidence_keys": ["gpu.gpus[1].lost"]},
         snapshot({"gpu.gpus": [healthy_probes()["gpu"]["gpus"][0],
                                {"index": 1, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:86:00.0",
                                 "unsupported_fields": ["*"], "lost": True}]}))
    case("GPU013", "negative_all_present", "Every GPU answers", PASSES, snapshot())
    # CPU001
    case("CPU001", "positive_wrong_node", "GPU on node 1, server pinned to node 0",
         {**FIRES, "commands": ["numactl --cpunodebind=1 --membind=1 <your server command>"]},
         snapshot({g + "numa_node": 1}))
    case("CPU001", "positive_wrong_node_numa_bind", "vLLM 0.33 on node 0, GPU on node 1: --numa-bind, not numactl",
         {**FIRES, "commands": ["--numa-bind"]},
         snapshot({g + "numa_node": 1, "server_config.engine_version": "0.33.0"}))
    tp_two_sockets = {"gpu.gpus": [healthy_probes()["gpu"]["gpus"][0],
                                   {**healthy_probes()["gpu"]["gpus"][0], "index": 1, "uuid": "GPU-2222", "numa_node": 1}],
                      "server_config.tensor_parallel_size": 2}
    case("CPU001", "positive_tp_across_sockets_old_vllm", "TP=2 with GPUs on nodes 0 and 1, server pinned to node 0, "
         "vLLM 0.18: no whole-server numactl advice",
         {**FIRES, "commands": [], "text_contains": ["pins some workers to the wrong node",
                                                     "no --numa-bind (added in 0.20)"]},
         snapshot(tp_two_sockets))
    case("CPU001", "positive_tp_across_sockets_new_vllm", "The same on vLLM 0.33: --numa-bind",
         {**FIRES, "commands": ["--numa-bind"]}, snapshot({**tp_two_sockets, "server_config.engine_version": "0.33.0"}))
    case("CPU001", "positive_tp_across_sockets_vllm_0_20", "The same on vLLM 0.20.1, where --numa-bind came in",
         {**FIRES, "commands": ["--numa-bind"]}, snapshot({**tp_two_sockets, "server_config.engine_version": "0.20.1"}))
    case("CPU001", "positive_tp_across_sockets_sglang", "TP=2 over two nodes on SGLang 0.5.4: one --numa-node "
         "value per GPU, in GPU order (numa_node[gpu_id]), never the set of nodes",
         {**FIRES, "commands": ["--numa-node 0 1"]},
         snapshot({**tp_two_sockets, "server_config.engine": "sglang", "server_config.engine_version": "0.5.4"}))
    case("CPU001", "negative_aligned", "Server on the GPU's node", PASSES, snapshot())
    case("CPU001", "negative_single_node", "A one-node host cannot be misaligned",
         PASSES, snapshot({g + "numa_node": 1, "cpu.numa_nodes": [{"node": 0, "cpus": list(range(112))}]}))
    # CPU002
    case("CPU002", "positive_powersave", "powersave governor",
         {**FIRES, "commands": ["sudo cpupower frequency-set -g performance"]},
         snapshot({"cpu.governor": "powersave", "cpu.governors": {"powersave": 112}}))
    case("CPU002", "negative_performance", "performance governor", PASSES, snapshot())
    case("CPU002", "skipped_vm", "No cpufreq in this VM", {"fires": False, "skipped_reason": "governor"},
         snapshot({"cpu.governor": None, "cpu.governors": {}}))
    # CPU003
    case("CPU003", "positive_gil_bound", "API server thread at 99% while the GPU sits at 35%",
         {**FIRES, "commands": ["--tokenizer-mode auto", "--api-server-count 2"]},
         snapshot({"server_process.max_thread_cpu_pct": 99.0, g + "utilization_gpu_pct": 35.0}))
    case("CPU003", "negative_busy_gpu", "A busy engine-core thread next to a busy GPU is normal",
         PASSES, snapshot({"server_process.max_thread_cpu_pct": 99.0}))
    # CPU004
    case("CPU004", "positive_slow_tokenizer", "Log says 'Using a slow tokenizer'",
         {**FIRES, "certainty": "confirmed"}, snapshot({"logs.slow_tokenizer": True}))
    case("CPU004", "negative_fast_tokenizer", "Fast tokenizer", PASSES, snapshot())
    case("CPU004", "skipped_no_log", "No --log given", {"fires": False, "skipped_reason": "logs"}, snapshot(drop=("logs",)))
    # MEM001
    case("MEM001", "positive_swapping", "200 MiB swapped in during the window",
         {**FIRES, "severity": "high", "commands": ["sudo swapoff -a"]},
         snapshot({"memory.swap_total_bytes": 8 * GIB, "memory.swap_in_bytes_delta": 200 * 2**20,
                   "memory.swap_out_bytes_delta": 50 * 2**20}))
    case("MEM001", "negative_swap_idle", "Swap enabled but nothing moved", PASSES,
         snapshot({"memory.swap_total_bytes": 8 * GIB, "memory.swap_used_bytes": 100 * 2**20}))
    # MEM002
    case("MEM002", "positive_low_available", "4% of host RAM available", {**FIRES, "severity": "high"},
         snapshot({"memory.available_pct": 4.0, "memory.available_bytes": int(0.04 * 512 * GIB)}))
    case("MEM002", "negative_plenty", "78% available", PASSES, snapshot())
    # NET001
    case("NET001", "positive_nfs", "Model directory on NFS, 180 MB/s cold read",
         {**FIRES, "certainty": "confirmed", "evidence_keys": ["storage.model_dir_fstype", "storage.read_gbps"]},
         snapshot({"storage.model_dir_fstype": "nfs4", "storage.model_dir_is_network_fs": True, "storage.read_gbps": 0.18}))
    case("NET001", "negative_local_nvme", "Local ext4 at 3.1 GB/s", PASSES, snapshot())
    case("NET001", "negative_warm_cache_local", "A slow figure from a warm page cache on local disk is not evidence",
         {"fires": False, "skipped_reason": "page cache"},
         snapshot({"storage.read_gbps": 0.5, "storage.page_cache_warm": True}))
    # NET002
    case("NET002", "positive_ephemeral_cache", "Hub model with HF cache in the container layer",
         {**FIRES, "evidence_keys": ["storage.hf_cache_persistent"]},
         snapshot({"storage.hf_cache_fstype": "overlay", "storage.hf_cache_persistent": False}))
    case("NET002", "negative_persistent", "Persistent, warm cache", PASSES, snapshot())
    case("NET002", "negative_local_path", "A local model path never downloads", PASSES,
         snapshot({"storage.serves_hub_model_id": False, "storage.hf_cache_persistent": False}))
    case("NET002", "positive_download_in_log", "vLLM logged 508 s downloading the weights at start",
         {**FIRES, "certainty": "confirmed", "evidence_keys": ["logs.weights_download_s"]},
         snapshot({"logs.weights_download_s": 508.6}))
    case("NET002", "negative_empty_cache_is_not_evidence", "An empty cache on a persistent disk (someone "
         "else's, or not yet used) is no evidence of a download on every start", PASSES,
         snapshot({"storage.hf_cache_empty": True, "storage.hf_cache_persistent": True}))
    case("NET002", "positive_download_every_start", "Two starts in the log, each downloading the weights (the "
         "start-up timeline)", {**FIRES, "certainty": "confirmed",
                                "evidence_keys": ["logs.startup.download_s_each_start", "logs.startup.ready_s"],
                                "commands": ["--download-dir /mnt/persistent/hf"]},
         snapshot({"logs.startup": startup_log(download_s=(92.5, 88.0), ready_s=160.0)}))
    case("NET002", "negative_timeline_without_download", "A start-up timeline with no download phase", PASSES,
         snapshot({"logs.startup": startup_log(compile_s=(25.0,))}))
    # NET005
    case("NET005", "positive_loader_slower_than_disk", "15.3 GiB loaded in 60 s (0.27 GB/s) from a 3.1 GB/s disk",
         {**FIRES, "evidence_keys": ["storage.read_gbps", "derived.load_to_disk_frac"],
          "commands": ["--load-format fastsafetensors"]},
         snapshot({"logs.startup": startup_log(load=(60.0, int(15.3 * GIB))), "storage.read_gbps": 3.1}))
    case("NET005", "negative_loader_near_disk_speed", "15.3 GiB in 6.5 s (2.5 GB/s) from a 3.1 GB/s disk", PASSES,
         snapshot({"logs.startup": startup_log(load=(6.5, int(15.3 * GIB))), "storage.read_gbps": 3.1}))
    case("NET005", "skipped_no_load_line", "The log gives no weight-load bytes",
         {"fires": False, "skipped_reason": "weight-load bytes"},
         snapshot({"logs.startup": startup_log(compile_s=(25.0,))}))
    # NET003
    case("NET003", "positive_slow_loopback", "3.4 ms TCP connect on the same host",
         {**FIRES, "severity": "medium", "evidence_keys": ["network.tcp_connect_ms_p50"]},
         snapshot({"network.tcp_connect_ms_p50": 3.4, "network.health_ttfb_ms_p50": 6.1}))
    case("NET003", "positive_remote_share_of_ttft", "Remote server: 25 ms RTT on a 60 ms TTFT",
         {**FIRES, "evidence_keys": ["server_metrics.histograms.ttft_s.p50_s"]},
         snapshot({"network.same_host": False, "network.url": "http://10.0.0.7:8000", "network.tcp_connect_ms_p50": 25.0,
                   "network.health_ttfb_ms_p50": 26.0, "server_metrics.histograms.ttft_s.p50_s": 0.06}))
    case("NET003", "positive_slow_front_end", "Loopback connects in 0.1 ms but /health takes 17 ms (real run on a "
         "busy 2-core host): the server, not the network", {**FIRES, "severity": "low", "certainty": "possible",
                                                            "text_contains": ["not the network"]},
         snapshot({"network.tcp_connect_ms_p50": 0.1, "network.health_ttfb_ms_p50": 17.2}))
    case("NET003", "negative_fast_loopback", "Sub-millisecond loopback", PASSES, snapshot())
    # KV001
    kv_sat = {"server_metrics.kv_cache_usage_frac": 0.97, "server_metrics.kv_cache_usage_frac_max": 0.99,
              "server_metrics.num_requests_waiting": 14, "server_metrics.num_requests_running": 48,
              "server_config.gpu_memory_utilization": 0.85, "server_metrics.cache_config.gpu_memory_utilization": 0.85,
              "server_config.kv_cache_dtype": "auto", "server_metrics.cache_config.cache_dtype": "auto",
              "server_config.max_model_len": 32768}
    case("KV001", "positive_saturated_with_queue", "KV at 99% with 14 waiting on vLLM 0.18",
         {**FIRES, "severity": "high", "certainty": "confirmed",
          "evidence_keys": ["server_metrics.kv_cache_usage_frac_max", "server_metrics.num_requests_waiting"],
          "commands": ["--gpu-memory-utilization 0.92", "--max-model-len 1024", "--kv-cache-dtype fp8"]},
         snapshot(kv_sat), bench())
    case("KV001", "positive_sglang_at_its_ceiling", "SGLang on an 80 GiB H100 at --mem-fraction-static 0.87: "
         "raising it would eat the >= 10 GiB SGLang keeps for activations and CUDA graphs, so no 0.92",
         {**FIRES, "text_contains": ["already 0.87", "--chunked-prefill-size"]},
         snapshot({"server_config.engine": "sglang", "server_config.engine_version": "0.5.23",
                   "server_config.gpu_memory_utilization": 0.87}, drop=("server_metrics",)),
         bench({"levels.3.server.kv_cache_usage_frac_max": 0.98, "levels.3.server.num_requests_waiting_max": 30,
                "levels.3.server.num_requests_waiting_mean": 17.0}))
    case("KV001", "positive_bench_only_sglang", "SGLang: saturated during the bench, no snapshot metrics; its "
         "--mem-fraction-static rises by a few hundredths, in SGLang's own terms, never to vLLM's 0.92",
         {**FIRES, "commands": ["--mem-fraction-static 0.84"],
          "evidence_keys": ["bench.c64.server.kv_cache_usage_frac_max"]},
         snapshot({"server_config.engine": "sglang", "server_config.engine_version": "0.5.2",
                   "server_config.gpu_memory_utilization": 0.8}, drop=("server_metrics",)),
         bench({"levels.3.server.kv_cache_usage_frac_max": 0.98, "levels.3.server.num_requests_waiting_max": 30,
                "levels.3.server.num_requests_waiting_mean": 17.0}))
    case("KV001", "negative_full_but_no_queue", "KV at 96% but nothing waits: a well-used cache",
         PASSES, snapshot({"server_metrics.kv_cache_usage_frac_max": 0.96}))
    case("KV001", "negative_queue_with_room", "Requests wait but KV is at 40% (SCHED002's case)",
         PASSES, snapshot({"server_metrics.num_requests_waiting": 10, "server_metrics.kv_cache_usage_frac_max": 0.4}))
    # A cache that holds a few requests is full long before 90%: the next request's blocks do not fit.
    rag = {"levels.2.input_tokens_mean": 3000.0, "levels.2.output_tokens_mean": 256.0,
           "levels.2.server.kv_cache_usage_frac_max": 0.82, "levels.2.server.kv_cache_usage_frac_mean": 0.78,
           "levels.2.server.num_requests_waiting_max": 9, "levels.2.server.num_requests_waiting_mean": 3.0}
    small_cache = {"server_metrics.cache_config.num_gpu_blocks": 1000}
    case("KV001", "positive_no_room_for_next_request", "RAG traffic (3256-token requests) on a 16000-token cache: "
         "at 82% only 2880 tokens are free while 9 wait (likely: at the mean, 78%, a prompt would still fit)",
         {**FIRES, "certainty": "likely",
          "evidence_keys": ["server_metrics.cache_config.num_gpu_blocks*block_size", "derived.bench.c16.kv_free_tokens",
                            "bench.c16.input_tokens_mean+output_tokens_mean", "bench.c16.server.kv_cache_usage_frac_max",
                            "bench.c16.server.num_requests_waiting_max"],
          "text_contains": ["only 2880 of the KV cache's 16000 tokens were free", "3256 tokens"]},
         snapshot(small_cache, drop=("logs",)), bench(rag))
    tiny_kv = {"levels.2.input_tokens_mean": 400.0, "levels.2.output_tokens_mean": 64.0,
               "levels.2.server.kv_cache_usage_frac_max": 0.77, "levels.2.server.kv_cache_usage_frac_mean": 0.72,
               "levels.2.server.num_requests_waiting_max": 15, "levels.2.server.num_requests_waiting_mean": 12.5,
               "levels.2.server.num_requests_running_max": 1, "levels.2.server.num_requests_running_mean": 1.0}
    case("KV001", "positive_prompt_never_fits", "40 blocks x 16 = 640 tokens at 72-77% with 15 waiting and one "
         "running: not even a 400-token prompt fits in the free blocks (a real reference-engine run)",
         {**FIRES, "certainty": "confirmed",
          "evidence_keys": ["derived.bench.c16.kv_free_tokens_typical", "bench.c16.input_tokens_mean",
                            "bench.c16.server.kv_cache_usage_frac_mean", "bench.c16.server.num_requests_waiting_mean"],
          "text_contains": ["although usage stayed below 90%", "pins the cache at 40 blocks"]},
         snapshot({"server_metrics.cache_config.num_gpu_blocks": 40,
                   "server_metrics.cache_config.num_gpu_blocks_override": 40}, drop=("logs",)), bench(tiny_kv))
    case("KV001", "negative_queue_with_room_for_requests", "9 wait on the 16000-token cache at 70%: 4800 tokens free, "
         "1.5 requests' worth, so the cache is not what holds them back",
         PASSES, snapshot(small_cache, drop=("logs",)),
         bench({**rag, "levels.2.server.kv_cache_usage_frac_max": 0.70, "levels.2.server.kv_cache_usage_frac_mean": 0.66}))
    case("KV001", "skipped_no_metrics", "/metrics not reachable and no bench",
         {"fires": False, "skipped_reason": "server_metrics"},
         snapshot(status={"server_metrics": ("error", "GET /metrics: connection refused")}))
    # KV002
    case("KV002", "positive_growing", "37 preemptions in the window",
         {**FIRES, "severity": "high", "evidence_keys": ["server_metrics.num_preemptions_delta"],
          "commands": ["--max-num-seqs 36"]},
         snapshot({"server_metrics.num_preemptions_delta": 37, "server_metrics.preemptions_per_s": 7.4,
                   "server_metrics.num_requests_running": 48}))
    case("KV002", "negative_not_growing", "Preemptions in the log's history, none during the window",
         PASSES, snapshot({"logs.num_preemption_lines": 500}))
    # KV003
    case("KV003", "positive_oversized", "max_model_len 32768 for 4096-token traffic while KV-limited",
         {**FIRES, "commands": ["--max-model-len 5120"], "evidence_keys": ["server_config.max_model_len"]},
         snapshot({"server_config.max_model_len": 32768, "server_metrics.num_preemptions_delta": 12}),
         bench({"config.input_len": 3584, "config.output_len": 512,
                **{f"levels.{i}.input_tokens_mean": 3584.0 for i in range(4)},
                **{f"levels.{i}.output_tokens_mean": 512.0 for i in range(4)}}))
    case("KV003", "negative_not_kv_limited", "Oversized, but KV has room: nothing to gain",
         PASSES, snapshot({"server_config.max_model_len": 131072}), bench())
    case("KV003", "negative_right_sized", "max_model_len 2048 for 640-token traffic (3.2x) while preempting",
         PASSES, snapshot({"server_config.max_model_len": 2048, "server_metrics.num_preemptions_delta": 5}), bench())
    # KV004
    case("KV004", "positive_bf16_kv_hopper", "16-bit KV on an H100 while preempting",
         {**FIRES, "commands": ["--kv-cache-dtype fp8"]},
         snapshot({"server_config.kv_cache_dtype": "auto", "server_metrics.num_preemptions_delta": 9}))
    case("KV004", "positive_bf16_kv_ada", "16-bit KV on an L40S (compute capability 8.9: vLLM runs FP8 natively "
         "from Ada on) while preempting", {**FIRES, "commands": ["--kv-cache-dtype fp8"]},
         snapshot({"server_config.kv_cache_dtype": "auto", "server_metrics.num_preemptions_delta": 9,
                   g + "compute_capability": [8, 9], g + "name": "NVIDIA L40S"}))
    case("KV004", "negative_ampere", "16-bit KV on an A100 (no FP8 tensor cores)",
         PASSES, snapshot({"server_config.kv_cache_dtype": "auto", "server_metrics.num_preemptions_delta": 9,
                           g + "compute_capability": [8, 0]}))
    case("KV004", "negative_fp8_already", "FP8 KV already", PASSES, snapshot({"server_metrics.num_preemptions_delta": 9}))
    # KV005
    case("KV005", "negative_default_tgi_2_4", "TGI 2.4 with no PREFIX_CACHING set: its launcher turns prefix "
         "caching on by default from 2.3, so it is never called turned off", PASSES,
         snapshot({"server_config.engine": "tgi", "server_config.engine_version": "2.4.1",
                   "server_config.enable_prefix_caching": None}), bench())
    case("KV005", "positive_disabled_v1", "vLLM 0.18 started with --no-enable-prefix-caching; 400-token shared prompt",
         {**FIRES, "severity": "medium", "certainty": "confirmed", "text_contains": ["Remove `--no-enable-prefix-caching`"]},
         snapshot({"server_config.enable_prefix_caching": False, "server_config.sources.enable_prefix_caching": "cmdline"}),
         bench())
    case("KV005", "positive_disabled_v0", "vLLM 0.6 (V0): prefix caching off by default, must be enabled",
         {**FIRES, "commands": ["--enable-prefix-caching"]},
         snapshot({"server_config.engine_version": "0.6.3", "server_config.enable_prefix_caching": False}), bench())
    case("KV005", "positive_low_hit_rate", "Shared 1024-token prefix but 2% hit rate",
         {**FIRES, "evidence_keys": ["bench.c16.server.prefix_cache_hit_rate"]},
         snapshot(), bench({"config.shared_prefix_len": 1024,
                            **{f"levels.{i}.server.prefix_cache_hit_rate": 0.02 for i in range(4)}}))
    case("KV005", "positive_low_hit_rate_state_assumed", "2% hit rate on vLLM 0.33 where only the default says prefix "
         "caching is on: vLLM decides it per model, so the finding is hedged",
         {**FIRES, "certainty": "possible", "text_contains": ["attention-free, encoder-decoder and some pooling models"]},
         snapshot({"server_config.engine_version": "0.33.0", "server_config.enable_prefix_caching": None,
                   "server_config.sources.enable_prefix_caching": "default",
                   "server_metrics.cache_config.enable_prefix_caching": None}),
         bench({"config.shared_prefix_len": 1024, **{f"levels.{i}.server.prefix_cache_hit_rate": 0.02 for i in range(4)}}))
    case("KV005", "negative_low_hit_no_shared_prefix", "Low hit rate on traffic with no shared prefix is expected",
         PASSES, snapshot(), bench({"config.shared_prefix_len": 0,
                                    **{f"levels.{i}.server.prefix_cache_hit_rate": 0.01 for i in range(4)}}))
    case("KV005", "negative_hitting", "Shared prefix and a 62% hit rate", PASSES, snapshot(), bench())
    case("KV005", "negative_v1_default_not_disabled", "A 'default' false from the probe is overruled by the "
         "version: vLLM 0.18 caches prefixes unless told not to", PASSES,
         snapshot({"server_config.enable_prefix_caching": False, "server_config.sources.enable_prefix_caching": "default",
                   "server_metrics.cache_config.enable_prefix_caching": None}), bench())
    # KV006
    case("KV006", "positive_low_util_kv_limited", "gpu_memory_utilization 0.7 while preempting",
         {**FIRES, "commands": ["--gpu-memory-utilization 0.92"]},
         snapshot({"server_config.gpu_memory_utilization": 0.7, "server_metrics.num_preemptions_delta": 4}))
    case("KV006", "positive_sglang_low_fraction", "SGLang 0.5.23 at --mem-fraction-static 0.7 on an 80 GiB H100 "
         "while preempting: raised a few hundredths in SGLang's terms, not to 0.92",
         {**FIRES, "commands": ["--mem-fraction-static 0.74"], "text_contains": ["activations and CUDA graphs"]},
         snapshot({"server_config.engine": "sglang", "server_config.engine_version": "0.5.23",
                   "server_config.gpu_memory_utilization": 0.7, "server_metrics.num_preemptions_delta": 4}))
    case("KV006", "negative_sglang_default_fraction", "SGLang at 0.87 on an 80 GiB GPU: what lies outside is its "
         "activation reserve, not unused VRAM", PASSES,
         snapshot({"server_config.engine": "sglang", "server_config.engine_version": "0.5.23",
                   "server_config.gpu_memory_utilization": 0.87, "server_metrics.num_preemptions_delta": 4}))
    case("KV006", "positive_tgi_low_fraction", "TGI 3.3.7 at --cuda-memory-fraction 0.7 while preempting: back to "
         "its default, the whole GPU (1.0), not vLLM's 0.92",
         {**FIRES, "commands": ["--cuda-memory-fraction 1.0"], "text_contains": ["Raise it to 1.00."]},
         snapshot({"server_config.engine": "tgi", "server_config.engine_version": "3.3.7",
                   "server_config.gpu_memory_utilization": 0.7, "server_metrics.num_preemptions_delta": 4}))
    case("KV006", "negative_low_util_no_pressure", "0.7 with plenty of KV room is a choice, not a problem",
         PASSES, snapshot({"server_config.gpu_memory_utilization": 0.7}))
    # SCHED001
    case("SCHED001", "positive_disabled_v0", "vLLM 0.6 without chunked prefill",
         {**FIRES, "commands": ["--enable-chunked-prefill"]},
         snapshot({"server_config.engine_version": "0.6.3", "server_config.enable_chunked_prefill": False,
                   "server_config.sources.enable_chunked_prefill": "cmdline"}))
    case("SCHED001", "positive_spikes_on_v1", "vLLM 0.18 (chunked prefill on): TPOT p99 6x p50 with 8K prompts",
         {**FIRES, "commands": ["--max-num-batched-tokens 2048"], "text_contains": ["already on"]},
         snapshot(), bench({**{f"levels.{i}.input_tokens_mean": 8192.0 for i in range(4)},
                            "levels.2.tpot_ms.p99": 60.0}))
    case("SCHED001", "negative_v1_default", "vLLM 0.18 default: the source says 'default', which is on in V1",
         {"fires": False, "skipped_reason": "needs a bench"},
         snapshot({"server_config.enable_chunked_prefill": None}))
    case("SCHED001", "negative_smooth_long_prompts", "Long prompts, smooth TPOT",
         PASSES, snapshot(), bench({**{f"levels.{i}.input_tokens_mean": 8192.0 for i in range(4)}}))
    # SCHED002
    case("SCHED002", "positive_seq_cap", "16 running = max_num_seqs, 40 waiting, KV at 31%",
         {**FIRES, "commands": ["--max-num-seqs 32"]},
         snapshot({"server_config.max_num_seqs": 16}),
         bench({"levels.3.server.num_requests_running_max": 16, "levels.3.server.num_requests_waiting_mean": 40.0,
                "levels.3.server.kv_cache_usage_frac_max": 0.31}))
    case("SCHED002", "positive_seq_cap_not_pow2", "24 running = max_num_seqs: doubled to 48, not rounded up to a "
         "power of two (vLLM captures graphs every 8)", {**FIRES, "commands": ["--max-num-seqs 48"]},
         snapshot({"server_config.max_num_seqs": 24}),
         bench({"levels.3.server.num_requests_running_max": 24, "levels.3.server.num_requests_waiting_mean": 40.0,
                "levels.3.server.kv_cache_usage_frac_max": 0.31}))
    case("SCHED002", "negative_kv_bound", "Waiting with a full KV cache is KV001's case, not SCHED002's",
         PASSES, snapshot({"server_config.max_num_seqs": 16}),
         bench({"levels.3.server.num_requests_running_max": 16, "levels.3.server.num_requests_waiting_mean": 40.0,
                "levels.3.server.kv_cache_usage_frac_max": 0.95}))
    case("SCHED002", "negative_small_kv_one_running", "Requests wait at 62% KV, but one runs of max_num_seqs 256: "
         "the small cache (KV001), not the sequence cap, holds them back",
         PASSES, snapshot({"server_metrics.cache_config.num_gpu_blocks": 40}, drop=("logs",)),
         bench({**tiny_kv, "levels.2.server.kv_cache_usage_frac_max": 0.62,
                "levels.2.server.kv_cache_usage_frac_mean": 0.6}))
    # SCHED003
    case("SCHED003", "positive_queue_share", "Queue time is 81% of server TTFT at c=64",
         {**FIRES, "evidence_keys": ["bench.c64.server.server_queue_time_ms_mean"]},
         snapshot(), bench({"levels.3.server.server_queue_time_ms_mean": 820.0,
                            "levels.3.server.server_ttft_ms_mean": 1010.0}))
    case("SCHED003", "positive_linear_ttft", "TTFT grows 7x from c=16 to c=64 while TPOT stays flat (no server metrics)",
         {**FIRES, "evidence_keys": ["derived.ttft_growth_x", "bench.c64.ttft_ms.p50"]},
         snapshot(drop=("server_metrics",)),
         bench({**{f"levels.{i}.server": None for i in range(4)}, "levels.3.ttft_ms.p50": 456.0,
                "levels.3.tpot_ms.p50": 10.5}))
    case("SCHED003", "positive_one_at_a_time_server", "TTFT grows 24x from c=1 to c=4 on a server whose throughput "
         "is flat (transformers serve, live): batching is the first fix, not replicas",
         {**FIRES, "text_contains": ["ENG001"]}, snapshot(drop=("server_metrics",)),
         bench({"levels.0.output_tokens_per_s": 271.0, "levels.1.output_tokens_per_s": 314.0,
                "levels.0.ttft_ms.p50": 12.3, "levels.1.ttft_ms.p50": 290.5, "levels.0.tpot_ms.p50": 3.4,
                "levels.1.tpot_ms.p50": 3.0}, concurrencies=(1, 4)))
    case("SCHED003", "negative_tiny_queue", "Queue 3.6 of 5.9 ms server TTFT (a real reference-engine run): too "
         "small to matter next to a 40 ms client TTFT", PASSES, snapshot(),
         bench({"levels.1.server.server_queue_time_ms_mean": 3.63, "levels.1.server.server_ttft_ms_mean": 5.89}))
    case("SCHED003", "negative_compute_bound", "TTFT and TPOT grow together: compute, not queueing",
         PASSES, snapshot(), bench())
    # SCHED004
    case("SCHED004", "positive_flat", "c=1 41 tok/s, c=16 55 tok/s",
         {**FIRES, "severity": "high", "evidence_keys": ["derived.scaling_x"]},
         snapshot(), bench({"levels.0.output_tokens_per_s": 41.0, "levels.2.output_tokens_per_s": 55.0}))
    case("SCHED004", "negative_scales", "12.5x from c=1 to c=16", PASSES, snapshot(), bench())
    case("SCHED004", "skipped_no_high_level", "Only c=1 and c=4 measured",
         {"fires": False, "skipped_reason": "concurrency >= 16"}, snapshot(), bench(concurrencies=(1, 4)))
    # SCHED005
    case("SCHED005", "positive_eager", "--enforce-eager with max_num_seqs 100",
         {**FIRES, "text_contains": ["Remove `--enforce-eager`"]},
         snapshot({"server_config.enforce_eager": True, "server_config.max_num_seqs": 100}))
    case("SCHED005", "negative_graphs_on", "CUDA graphs on", PASSES, snapshot())
    # SCHED006
    ctx_sweep = {"levels.0.input_tokens_mean": 2048.0, "levels.0.ttft_ms.p50": 180.0,
                 "levels.1.concurrency": 1, "levels.1.input_tokens_mean": 16384.0, "levels.1.ttft_ms.p50": 4900.0}
    case("SCHED006", "positive_quadratic", "TTFT 180 ms at 2K, 4.9 s at 16K at batch 1 (exponent ~1.6)",
         {**FIRES, "evidence_keys": ["derived.ttft_growth_exponent"]},
         snapshot({"server_config.engine_version": "0.5.4"}), bench(ctx_sweep, concurrencies=(1, 4)))
    case("SCHED006", "negative_linear", "TTFT 180 ms at 2K, 1.5 s at 16K (linear)",
         PASSES, snapshot(), bench({**ctx_sweep, "levels.1.ttft_ms.p50": 1500.0}, concurrencies=(1, 4)))
    case("SCHED006", "negative_small_model_at_32k", "8K -> 32K at batch 1 grows as len^1.6: the O(N^2) FLOPs of "
         "a FlashAttention prefill for a small model, not a missing flash kernel", PASSES, snapshot(),
         bench({"levels.0.input_tokens_mean": 8192.0, "levels.0.ttft_ms.p50": 1000.0, "levels.1.concurrency": 1,
                "levels.1.input_tokens_mean": 32768.0, "levels.1.ttft_ms.p50": 9100.0}, concurrencies=(1, 4)))
    case("SCHED006", "skipped_no_sweep", "One prompt length only",
         {"fires": False, "skipped_reason": "context sweep"}, snapshot(), bench())
    # QUANT001
    case("QUANT001", "opportunity_bf16_h100_healthy", "bf16, no quantization flag, on a healthy H100: an "
         "opportunity, not a problem", {**FIRES, "severity": "low", "kind": "opportunity",
                                        "commands": ["--quantization fp8"],
                                        "text_contains": ["`--dtype fp8` is not accepted"]},
         snapshot({"server_config.quantization": None, "server_config.sources.quantization": "cmdline"}))
    case("QUANT001", "positive_bf16_h100_kv_pressure", "bf16 on an H100 whose KV cache is 97% full",
         {**FIRES, "severity": "medium", "kind": "problem",
          "evidence_keys": ["server_metrics.kv_cache_usage_frac_max"]},
         snapshot({"server_config.quantization": None, "server_config.sources.quantization": "cmdline",
                   "server_metrics.kv_cache_usage_frac_max": 0.97}))
    case("QUANT001", "positive_no_flag_seen_hedges", "Quantization only assumed (engine default): possible, hedged",
         {**FIRES, "certainty": "possible", "text_contains": ["pre-quantized checkpoint needs no flag"]},
         snapshot({"server_config.quantization": None, "server_config.sources.quantization": "default"}))
    case("QUANT001", "negative_fp8", "Already FP8", PASSES, snapshot())
    case("QUANT001", "negative_a100", "bf16 on an A100 (no native FP8)",
         PASSES, snapshot({"server_config.quantization": None, g + "compute_capability": [8, 0]}))
    # QUANT002
    case("QUANT002", "positive_kv_smaller_than_context", "KV holds 9120 tokens, max_model_len 32768",
         {**FIRES, "severity": "critical", "commands": ["--max-model-len 8960", "triage plan"]},
         snapshot({"server_config.max_model_len": 32768, "logs.kv_cache_tokens": 9120}))
    case("QUANT002", "positive_from_cache_config", "No log; cache_config says 500 blocks x 16 = 8000 tokens",
         {**FIRES, "evidence_keys": ["server_metrics.cache_config.num_gpu_blocks*block_size"]},
         snapshot({"server_metrics.cache_config.num_gpu_blocks": 500}, drop=("logs",)))
    case("QUANT002", "positive_sglang_capacity", "SGLang: max_total_num_tokens 6000 under a 16K context, no log",
         {**FIRES, "evidence_keys": ["server_metrics.kv_cache_capacity_tokens"], "commands": ["--context-length 5888"]},
         snapshot({"server_config.engine": "sglang", "server_config.engine_version": "0.5.2",
                   "server_config.max_model_len": 16384, "server_metrics.engine": "sglang",
                   "server_metrics.kv_cache_capacity_tokens": 6000, "server_metrics.cache_config": {}}, drop=("logs",)))
    case("QUANT002", "negative_fits", "480K KV tokens for an 8K context", PASSES, snapshot())
    # ENG001
    flat = {"levels.1.output_tokens_per_s": 126.0, "levels.2.output_tokens_per_s": 131.0,
            "levels.3.output_tokens_per_s": 133.0}
    case("ENG001", "positive_flat_from_load_alone", "Throughput 120 -> 133 tok/s from c=1 to c=64, engine unknown",
         {**FIRES, "severity": "high", "certainty": "confirmed", "kind": "problem",
          "evidence_keys": ["derived.throughput_x", "derived.concurrency_x"]},
         snapshot(drop=("server_config", "server_metrics", "engine_identity", "server_process")), bench(flat))
    tfs = {"engine_identity.engine": "transformers", "engine_identity.batching.continuous": False,
           "server_config.engine": None, "server_config.model": "Qwen/Qwen3-0.6B"}
    case("ENG001", "positive_transformers_serve_flat", "transformers serve, as tried live: 26.8 -> 24.3 tok/s at "
         "c=1 -> 4", {**FIRES, "severity": "high", "text_contains": ["transformers", "--continuous-batching"],
                      "commands": ["transformers serve Qwen/Qwen3-0.6B --continuous-batching"]},
         snapshot(tfs, drop=("server_metrics",)),
         bench({"levels.0.output_tokens_per_s": 26.8, "levels.1.output_tokens_per_s": 24.3}, concurrencies=(1, 4)))
    lcpp = {"engine_identity.engine": "llama.cpp", "engine_identity.version": "b0-unknown",
            "engine_identity.llamacpp": {"total_slots": 1, "busy_slots": 1, "ctx_per_slot_tokens": 2048,
                                         "build_info": "b0-unknown"},
            "server_config.engine": None, "server_config.engine_version": None, "server_config.model": "tiny.gguf"}
    case("ENG001", "positive_llamacpp_one_slot_deferred", "llama-server --parallel 1 with requests deferred "
         "(the real capture under load)", {**FIRES, "severity": "medium", "kind": "problem",
                                           "evidence_keys": ["server_metrics.num_requests_waiting_max"],
                                           "commands": ["llama-server -m tiny.gguf --parallel 4 -c 8192"]},
         snapshot({**lcpp, "server_metrics.num_requests_waiting_max": 1, "server_metrics.engine": "llama.cpp"}))
    case("ENG001", "opportunity_llamacpp_one_slot_idle", "llama-server --parallel 1 at rest: an opportunity only",
         {**FIRES, "severity": "low", "kind": "opportunity", "text_contains": ["--parallel"]},
         snapshot({**lcpp, "server_metrics.num_requests_waiting_max": 0, "server_metrics.engine": "llama.cpp"}))
    case("ENG001", "negative_llamacpp_four_slots", "llama-server with 4 slots batches", PASSES,
         snapshot({**lcpp, "engine_identity.llamacpp": {**lcpp["engine_identity.llamacpp"], "total_slots": 4},
                   "server_metrics.num_requests_waiting_max": 2}))
    case("ENG001", "positive_ollama_one_parallel_under_load", "Ollama with OLLAMA_NUM_PARALLEL=1, load-tested",
         {**FIRES, "severity": "high", "commands": ["OLLAMA_NUM_PARALLEL=16 ollama serve"]},
         snapshot({"engine_identity.engine": "ollama", "engine_identity.batching.slots": 1,
                   "server_config.engine": None}, drop=("server_metrics",)), bench(flat))
    case("ENG001", "negative_vllm", "vLLM batches", PASSES, snapshot(), bench())
    case("ENG001", "skipped_nothing_known", "No bench pair and no engine identified",
         {"fires": False, "skipped_reason": "needs engine_identity"},
         snapshot(drop=("server_config", "server_metrics", "engine_identity", "server_process")))
    # ENG002
    case("ENG002", "positive_far_below", "8B FP8 (8.5 GB) on an H100: 26 tok/s at c=1 vs a 394 tok/s roofline",
         {**FIRES, "evidence_keys": ["derived.roofline_frac", "config.model.weight_bytes"]},
         snapshot(), bench({"levels.0.tpot_ms.p50": 38.0}), config={"model_weight_bytes": 8.5e9})
    case("ENG002", "negative_near_roofline", "8 ms TPOT (125 tok/s) with 16 GB of bf16 weights: 60% of the roofline",
         PASSES, snapshot(), bench(), config={"model_weight_bytes": 16.06e9})
    case("ENG002", "positive_weights_from_plan_report", "Weight bytes from a `triage plan` report given as baseline",
         {**FIRES, "evidence_keys": ["baseline.plan.model.weight_bytes"]},
         snapshot(), bench({"levels.0.tpot_ms.p50": 38.0}),
         baseline={**REPORT_HEAD, "kind": "plan", "plan": {"model": {"name": "llama-3.1-8b", "weight_bytes": 8.5e9}}})
    case("ENG002", "positive_a100_bandwidth_from_spec_table", "An A100 80GB: 2039 GB/s from the spec table",
         {**FIRES, "evidence_keys": ["derived.gpu_memory_bandwidth_gbps_spec"], "text_contains": ["(2039 GB/s spec)"]},
         snapshot({"gpu.gpus.0.name": "NVIDIA A100-SXM4-80GB", "gpu.gpus.0.compute_capability": [8, 0]}),
         bench({"levels.0.tpot_ms.p50": 38.0}), config={"model_weight_bytes": 16.06e9})
    case("ENG002", "skipped_gpu_not_in_spec_table", "A GPU the spec table does not know: no roofline",
         {"fires": False, "skipped_reason": "memory bandwidth is unknown"},
         snapshot({"gpu.gpus.0.name": "NVIDIA GeForce GTX 1080"}), bench({"levels.0.tpot_ms.p50": 38.0}),
         config={"model_weight_bytes": 8.5e9})
    case("ENG002", "skipped_no_weight_bytes", "Weight bytes unknown",
         {"fires": False, "skipped_reason": "weight bytes"}, snapshot(), bench())
    # ENG003
    spec = {"server_config.speculative_config": {"method": "eagle", "num_speculative_tokens": 5}}
    case("ENG003", "positive_low_acceptance", "31% acceptance with 5 speculative tokens",
         {**FIRES, "commands": ["--speculative-config '{\"method\": \"eagle\", \"num_speculative_tokens\": 2}'"]},
         snapshot({**spec, "server_metrics.spec_decode_acceptance_rate": 0.31}))
    case("ENG003", "negative_good_acceptance", "78% acceptance",
         PASSES, snapshot({**spec, "server_metrics.spec_decode_acceptance_rate": 0.78}))
    case("ENG003", "skipped_not_configured", "No speculative decoding",
         {"fires": False, "skipped_reason": "not configured"}, snapshot())
    # ENG004
    tp4 = {"gpu.gpus": [{**healthy_probes()["gpu"]["gpus"][0], "index": i,
                         "compute_processes": [{"pid": 1235 + i, "used_memory_bytes": 70 * GIB, "name": "w"}]}
                        for i in range(4)],
           "server_process.processes": [{"pid": 1234 + i, "name": "w", "cpu_pct": 50.0, "num_threads": 8,
                                         "rss_bytes": GIB} for i in range(5)],
           "server_config.tensor_parallel_size": 4, "server_metrics.kv_cache_usage_frac_max": 0.1,
           "logs.kv_cache_tokens": 1_400_000}
    case("ENG004", "positive_tp4_for_8b", "An 8B model at TP=4 peaking at 10% KV",
         {**FIRES, "commands": ["--tensor-parallel-size 1"]}, snapshot(tp4), config={"model_weight_bytes": 16e9})
    case("ENG004", "negative_tp4_needed", "A 140 GB model at TP=4 using 85% of its KV",
         PASSES, snapshot({**tp4, "server_metrics.kv_cache_usage_frac_max": 0.85, "logs.kv_cache_tokens": 300_000}),
         config={"model_weight_bytes": 140e9})
    # ENG005
    case("ENG005", "positive_v0", "vLLM 0.6.3 (V0 engine)", {**FIRES, "severity": "medium"},
         snapshot({"server_config.engine_version": "0.6.3"}))
    case("ENG005", "positive_pre_fa4_on_sm100_flash_attn_chosen", "vLLM 0.11 on a B200 (SM100) started with "
         "--attention-backend FLASH_ATTN: FA4 comes with 0.17",
         {**FIRES, "severity": "low", "text_contains": ["FlashAttention 4 on Blackwell SM100", "from vLLM 0.17"]},
         snapshot({"server_config.engine_version": "0.11.0", "gpu.gpus.0.name": "NVIDIA B200",
                   "gpu.gpus.0.compute_capability": [10, 0],
                   "server_process.cmdline": ["vllm", "serve", "m", "--attention-backend", "FLASH_ATTN"]}))
    case("ENG005", "negative_pre_fa4_on_sm100_default_backend", "vLLM 0.11 on a B200 with the default backend: "
         "SM100 defaults to FlashInfer, so FA4 is no reason to upgrade", PASSES,
         snapshot({"server_config.engine_version": "0.11.0", "gpu.gpus.0.name": "NVIDIA B200",
                   "gpu.gpus.0.compute_capability": [10, 0]}))
    case("ENG005", "positive_tgi_2_2", "TGI 2.2: no prefix caching by default (2.3) nor prefill chunking (3.0)",
         {**FIRES, "text_contains": ["prefix caching on by default from TGI 2.3",
                                     "prefill chunking on by default from TGI 3.0"]},
         snapshot({"server_config.engine": "tgi", "server_config.engine_version": "2.2.0"}))
    case("ENG005", "negative_tgi_3", "TGI 3.3.7", PASSES,
         snapshot({"server_config.engine": "tgi", "server_config.engine_version": "3.3.7"}))
    case("ENG005", "negative_v1_on_hopper", "vLLM 0.11 on an H100 already picks FA3 (since 0.8): quiet", PASSES,
         snapshot({"server_config.engine_version": "0.11.0"}))
    case("ENG005", "negative_v1_on_ampere", "vLLM 0.10 on an A100: no newer FlashAttention to gain", PASSES,
         snapshot({"server_config.engine_version": "0.10.2", "gpu.gpus.0.name": "NVIDIA A100-SXM4-80GB",
                   "gpu.gpus.0.compute_capability": [8, 0]}))
    case("ENG005", "negative_current", "vLLM 0.18.1", PASSES, snapshot())
    # ENG006
    base_report = {**REPORT_HEAD, "kind": "bench", "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
                   "bench": bench({"levels.2.output_tokens_per_s": 1500.0})}
    case("ENG006", "positive_degraded", "c=16 fell 1500 -> 1050 tok/s with 55 preemptions after 5 days up",
         {**FIRES, "certainty": "likely", "evidence_keys": ["derived.throughput_drop_frac"]},
         snapshot({"server_process.uptime_s": 5 * 86400}),
         bench({"levels.2.output_tokens_per_s": 1050.0, "levels.2.server.num_preemptions_delta": 55}),
         baseline=base_report)
    case("ENG006", "positive_kv_stuck_at_idle", "Slower with preemptions, and 30% of the KV cache still held with "
         "nothing running: a leak; a restart is called a workaround",
         {**FIRES, "evidence_keys": ["server_metrics.kv_cache_usage_frac"],
          "text_contains": ["a leak", "workaround until then, not a fix"]},
         snapshot({"server_process.uptime_s": 5 * 86400, "server_metrics.kv_cache_usage_frac": 0.30,
                   "server_metrics.num_requests_running_max": 0, "server_metrics.num_requests_waiting_max": 0}),
         bench({"levels.2.output_tokens_per_s": 1050.0, "levels.2.server.num_preemptions_delta": 55}),
         baseline=base_report)
    case("ENG006", "negative_same_speed", "Same throughput as last week", PASSES, snapshot(), bench(),
         baseline=base_report)
    case("ENG006", "negative_drop_without_preemptions", "Slower, but no preemptions: another cause",
         PASSES, snapshot(), bench({"levels.2.output_tokens_per_s": 1050.0}), baseline=base_report)
    # ENG007
    case("ENG007", "positive_shm_stalls", "vLLM TP=2 log: 14 shared-memory broadcast stalls",
         {**FIRES, "severity": "medium", "evidence_keys": ["logs.num_shm_broadcast_stalls"]},
         snapshot({"logs.num_shm_broadcast_stalls": 14}))
    case("ENG007", "positive_nccl", "NCCL errors in the log", {**FIRES, "severity": "high"},
         snapshot({"logs.num_nccl_errors": 3}))
    case("ENG007", "positive_stalls_nccl_not_counted", "Stalls counted, NCCL lines not: no '0 NCCL errors' claim",
         {**FIRES, "severity": "medium", "text_contains": ["The server log has 5 shared-memory broadcast stall"]},
         snapshot({"logs.num_shm_broadcast_stalls": 5, "logs.num_nccl_errors": None}))
    case("ENG007", "negative_startup_only", "14 shm broadcast warnings, all while vLLM compiled at startup",
         PASSES, snapshot({"logs.num_shm_broadcast_stalls": 14, "logs.num_shm_broadcast_stalls_startup": 14}))
    case("ENG007", "negative_clean_log", "No communication trouble", PASSES, snapshot())
    # ENG008
    case("ENG008", "positive_compile_recurs", "Two starts in the log, each compiling for ~41 s",
         {**FIRES, "certainty": "confirmed", "evidence_keys": ["logs.startup.compile_s_each_start"],
          "commands": ["export VLLM_CACHE_ROOT=/mnt/persistent/compile-cache"]},
         snapshot({"logs.startup": startup_log(compile_s=(41.2, 40.8))}))
    case("ENG008", "positive_cache_ephemeral", "One 38 s compile with ~/.cache in the container layer",
         {**FIRES, "certainty": "likely", "evidence_keys": ["storage.hf_cache_persistent"]},
         snapshot({"logs.startup": startup_log(compile_s=(38.0,)), "storage.hf_cache_fstype": "overlay",
                   "storage.hf_cache_persistent": False, "storage.hf_home_set": False}))
    case("ENG008", "negative_second_start_hits_the_cache", "41 s, then 6 s: the cache worked", PASSES,
         snapshot({"logs.startup": startup_log(compile_s=(41.2, 6.0))}))
    case("ENG008", "negative_persistent_cache", "One 38 s compile on a persistent cache (the first ever)", PASSES,
         snapshot({"logs.startup": startup_log(compile_s=(38.0,))}))
    case("ENG008", "skipped_no_start_in_log", "A log with no server start", {"fires": False, "skipped_reason": "start"},
         snapshot())
    # ENG009
    case("ENG009", "positive_short_lived_replicas", "Replicas restart every ~3.6 min; each spends 59 s compiling and "
         "capturing (27%)", {**FIRES, "severity": "medium", "kind": "problem", "commands": ["--enforce-eager"],
                             "evidence_keys": ["logs.startup.start_gaps_s", "derived.warmup_share_of_life"]},
         snapshot({"logs.startup": startup_log(compile_s=(41.0, 40.2, 41.0), graphs_s=(18.0, 17.5, 18.0),
                                               gaps_s=(220.0, 215.0))}))
    case("ENG009", "opportunity_seven_minute_replicas", "Replicas live ~7 min: 14% warming up, an opportunity",
         {**FIRES, "severity": "low", "kind": "opportunity"},
         snapshot({"logs.startup": startup_log(compile_s=(41.0, 40.2), graphs_s=(18.0, 17.5), gaps_s=(410.0,))}))
    case("ENG009", "negative_long_lived", "Replicas restart every 10 h: the warm-up is noise", PASSES,
         snapshot({"logs.startup": startup_log(compile_s=(41.0, 40.2), graphs_s=(18.0, 17.5), gaps_s=(36000.0,))}))
    case("ENG009", "skipped_one_start", "One start: how long a replica lives is unknown",
         {"fires": False, "skipped_reason": "one start"},
         snapshot({"logs.startup": startup_log(compile_s=(41.0,), graphs_s=(18.0,))}))
    # FLEET001
    def replica(i: int, ttft_p99: float, waiting: float, kv: float, blocks: int) -> dict[str, Any]:
        return {"replica": i, "url": f"http://10.0.0.{i + 1}:8000", "requests": 256, "failed": 0,
                "ttft_ms": {"p50": ttft_p99 / 3, "p99": ttft_p99, "mean": ttft_p99 / 2.5}, "tpot_ms": {"p50": 20.0, "p99": 30.0},
                "e2e_ms": {"p99": 4000.0}, "output_tokens_per_s": 900.0, "slo_attainment_pct": None,
                "server": {"num_requests_waiting_mean": waiting, "kv_cache_usage_frac_max": kv},
                "cache_config": {"num_gpu_blocks": blocks, "block_size": 16, "gpu_memory_utilization": 0.92}}
    case("FLEET001", "positive_undersized_replica", "Replica 1 started with a 12-block KV cache: TTFT p99 490 ms vs "
         "11 ms, 4 waiting", {**FIRES, "certainty": "confirmed", "text_contains": ["num_gpu_blocks 12 vs 4096",
                                                                                    "round robin"]},
         snapshot(), bench({"config.balance": "round-robin",
                            "levels.3.replicas": [replica(0, 11.0, 0.0, 0.2, 4096), replica(1, 490.0, 4.3, 0.97, 12)]}))
    case("FLEET001", "positive_same_flags_slow_hardware", "Same flags, least-in-flight, one replica 3x slower",
         {**FIRES, "certainty": "likely", "text_contains": ["hardware may be slower"]},
         snapshot(), bench({"config.balance": "least-in-flight",
                            "levels.3.replicas": [replica(0, 200.0, 1.0, 0.5, 4096), replica(1, 650.0, 1.5, 0.55, 4096),
                                                  replica(2, 210.0, 1.0, 0.5, 4096)]}))
    case("FLEET001", "positive_replica_down", "Replica 1 refuses every connection: 64 of 64 failed",
         {**FIRES, "text_contains": ["64 of its 64 requests failed", "take it out of the balancer"]},
         snapshot(), bench({"levels.3.replicas": [replica(0, 200.0, 1.0, 0.5, 4096),
                                                  {**replica(1, 0.0, 0.0, 0.0, 4096), "requests": 64, "failed": 64,
                                                   "ttft_ms": {"p50": None, "p99": None, "mean": None},
                                                   "server": None, "cache_config": None}]}))
    case("FLEET001", "negative_balanced", "Three replicas within 20% of each other", PASSES,
         snapshot(), bench({"levels.3.replicas": [replica(0, 200.0, 1.0, 0.5, 4096), replica(1, 240.0, 1.2, 0.55, 4096),
                                                  replica(2, 210.0, 1.0, 0.5, 4096)]}))
    case("FLEET001", "skipped_one_replica", "A bench against one server", {"fires": False, "skipped_reason": "one replica"},
         snapshot(), bench())
    # HIST001
    def history(now: dict[str, float], then: dict[str, float] | None = None) -> dict[str, Any]:
        base = {"ttft_p50_s": 0.30, "ttft_p90_s": 0.60, "ttft_p99_s": 0.95, "requests_per_s": 20.0,
                "prompt_tokens_per_s": 20000.0, "prompt_tokens_per_request": 1000.0, "kv_cache_usage_mean": 0.5,
                "requests_waiting_mean": 1.0, "preemptions_per_s": 0.0, "gpu_sm_clock_mhz_mean": 1980.0}
        return {"prometheus_history": {"url": "http://prometheus:9090", "engine": "vllm", "window_s": 3600.0,
                                       "against_s": 7 * 86400.0, "at_epoch_s": 1795000000.0,
                                       "now": {**base, **now}, "then": base if then is None else then}}
    case("HIST001", "positive_server_side", "TTFT p99 0.95 -> 1.9 s at the same traffic, SM clock down 30%",
         {**FIRES, "severity": "high", "text_contains": ["traffic did not grow", "the server or the hardware changed", "GPU SM clock -30%"],
          "evidence_keys": ["derived.latency_rise_x", "prometheus_history.now.gpu_sm_clock_mhz_mean"]},
         snapshot(history({"ttft_p99_s": 1.9, "requests_per_s": 20.5, "gpu_sm_clock_mhz_mean": 1386.0})))
    case("HIST001", "positive_traffic", "TTFT p99 0.95 -> 1.9 s with prompts twice as long: traffic",
         {**FIRES, "severity": "medium", "text_contains": ["traffic grew", "prompt tokens per request +100%", "Capacity, not a regression"]},
         snapshot(history({"ttft_p99_s": 1.9, "prompt_tokens_per_request": 2000.0, "prompt_tokens_per_s": 40000.0})))
    case("HIST001", "negative_noise", "TTFT p99 +5% week over week", PASSES,
         snapshot(history({"ttft_p99_s": 1.0})))
    case("HIST001", "skipped_no_history_then", "Prometheus keeps less than a week",
         {"fires": False, "skipped_reason": "comparison window"},
         snapshot({"prometheus_history": {**history({})["prometheus_history"], "then": {"ttft_p99_s": None}}}))
    # BENCH001
    case("BENCH001", "positive_client_lag", "c=64: achieved 41.5, loop lag 38 ms, marked invalid",
         {**FIRES, "evidence_keys": ["bench.c64.client.achieved_concurrency", "bench.c64.client.event_loop_lag_ms_p99"]},
         snapshot(), bench({"levels.3.client": {"cpu_pct": 97.0, "event_loop_lag_ms_p99": 38.0,
                                                "achieved_concurrency": 41.5, "valid": False,
                                                "invalid_reason": "client event loop lagged"}}))
    case("BENCH001", "negative_client_fine", "Client kept up", PASSES, snapshot(), bench())
    # BENCH002
    case("BENCH002", "positive_503s", "37 of 500 failed at c=64",
         {**FIRES, "severity": "high", "text_contains": ["429/503"]},
         snapshot(), bench({"levels.3.requests": {"completed": 463, "failed": 37,
                                                  "errors_by_kind": {"http_503": 30, "timeout": 7}}}))
    case("BENCH002", "negative_half_percent", "2 of 512 failed (0.4%)", PASSES, snapshot(),
         bench({"levels.3.requests": {"completed": 510, "failed": 2, "errors_by_kind": {"timeout": 2}}}))
    # BENCH003
    case("BENCH003", "positive_ttft_missed", "Chat defaults: c=64 TTFT p99 2.4 s",
         {**FIRES, "evidence_keys": ["bench.c64.ttft_ms.p99"], "text_contains": ["bench.c16"]},
         snapshot(), bench({"levels.3.ttft_ms.p99": 2400.0}))
    case("BENCH003", "positive_user_slo", "User SLO ttft_ms=100 is missed from c=16",
         {**FIRES, "evidence_keys": ["slo.ttft_ms", "bench.c16.ttft_ms.p99"]},
         snapshot(), bench({"config.slo": {"ttft_ms": 100}}))
    case("BENCH003", "negative_within_slo", "All levels within the chat defaults", PASSES, snapshot(), bench())
    case("BENCH003", "skipped_completions_no_slo", "Completions endpoint, no SLO",
         {"fires": False, "skipped_reason": "no SLO"}, snapshot(), bench({"config.endpoint": "completions"}))



def _define_active() -> None:
    from tests.rules_fixtures_active import define

    define(case, snapshot, patched, FIRES, PASSES)


def _define_topology() -> None:
    from tests.rules_fixtures_topology import define

    define(case, snapshot, FIRES, PASSES)


def _define_connect() -> None:
    """NET004 (rules/connect.py): connect time under load vs idle."""
    def conns(in_window_p50: float | None, opened: int) -> dict[str, Any]:
        stats = {"p50": in_window_p50, "p99": in_window_p50, "max": in_window_p50}
        return {"opened": opened, "opened_warm": 0, "opened_in_window": opened, "reused": 0, "retries": 0,
                "connect_ms": stats, "in_window_connect_ms": stats, "warm_connect_ms": {"p50": None, "p99": None,
                                                                                       "max": None}}
    case("NET004", "positive_syn_drops_under_load", "Idle connect 0.4 ms, 1 s at c=64 (SYNs dropped)",
         {**FIRES, "evidence_keys": ["bench.config.idle_connect_ms_p50",
                                     "bench.c64.connections.in_window_connect_ms.p50"], "text_contains": ["1003 ms"]},
         snapshot(), bench({"config.idle_connect_ms_p50": 0.4, "levels.3.connections": conns(1003.0, 12),
                            "levels.0.connections": conns(0.5, 1)}))
    case("NET004", "negative_fast_connects", "Connections under load as fast as idle", PASSES, snapshot(),
         bench({"config.idle_connect_ms_p50": 0.4, "levels.3.connections": conns(0.9, 12)}))
    case("NET004", "skipped_old_report", "A report from before connect_ms",
         {"fires": False, "skipped_reason": "no idle connect time"}, snapshot(), bench())



_define()
_define_active()
_define_connect()
_define_topology()


def write_all(root: Path = FIXTURES) -> int:
    """Write every case; remove stale fixture files. Returns the number written."""
    wanted = {}
    for code, name, body in CASES:
        wanted[root / code / f"{name}.json"] = json.dumps(body, indent=1, sort_keys=True) + "\n"
    for old in root.glob("*/*.json"):
        if old not in wanted:
            old.unlink()
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return len(wanted)


# --- reading a fixture back ----------------------------------------------------------------------
def load_case(path: Path):
    """(snapshot, bench, baseline, config, expect) from one fixture file."""
    from triage.core.report import BenchSection, Report
    from triage.core.report_io import from_dict
    from triage.core.snapshot import ProbeResult, Snapshot
    from triage.rules import RulesConfig

    body = json.loads(path.read_text(encoding="utf-8"))
    snap = Snapshot(probes=tuple(from_dict(ProbeResult, p, "probe") for p in body["snapshot"]["probes"]))
    bench_section = from_dict(BenchSection, body["bench"], "bench") if body.get("bench") else None
    baseline = from_dict(Report, body["baseline"], "baseline") if body.get("baseline") else None
    cfg = body.get("config") or {}
    config = RulesConfig(enabled_only=frozenset({path.parent.name}), thresholds=cfg.get("thresholds", {}),
                         target_engine=cfg.get("target_engine"), model_weight_bytes=cfg.get("model_weight_bytes"))
    return snap, bench_section, baseline, config, body["expect"]


if __name__ == "__main__":
    n = write_all()
    sys.stdout.write(f"wrote {n} fixtures under {FIXTURES}\n")
