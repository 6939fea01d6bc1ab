"""The healthy host every rule case starts from, as typed payloads: an H100 on a Gen5 x16 slot in a
two-socket host, vLLM 0.18 serving an FP8 8B model at moderate load, and a bench of that server at
concurrency 1, 4, 16 and 64 whose throughput scales with no queueing and no preemption.

A field renamed in triage/core/probe_data/ or triage/core/bench_data.py fails here with a TypeError."""
from __future__ import annotations

from triage.core.bench_data import BenchRunConfig, LevelGpu, LevelServer, Slo
from triage.core.probe_data import (
    BatchingSettings,
    CpuData,
    EngineIdentityData,
    GpuData,
    GpuDevice,
    GpuProcess,
    Histograms,
    HistogramWindow,
    KernelLogData,
    LogsData,
    MemoryData,
    NetworkData,
    NumaNode,
    Payload,
    ProcessInfo,
    ServerConfigData,
    ServerMetricsData,
    ServerProcessData,
    StartupData,
    StartupPhase,
    StorageData,
    ThrottleTimes,
)
from triage.core.report import BenchLevel, BenchSection, ClientStats, LatencyStats, RequestCounts

GIB = 2**30
MIB = 2**20
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NO_THROTTLE = ThrottleTimes(power=0.0, thermal=0.0, sync_boost=0.0, board_limit=0.0, low_util=0.0, reliability=0.0,
                            total_app_clocks=0.0, total_base_clocks=0.0)


def healthy_gpu0() -> GpuDevice:
    """GPU 0: an H100 80GB at 78% utilization, 72 GiB used by the engine core, no faults."""
    return GpuDevice(
        index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1111", pci_bus_id="00000000:3B:00.0",
        compute_capability=(9, 0), memory_total_bytes=80 * GIB, memory_used_bytes=72 * GIB,
        memory_reserved_bytes=512 * MIB, memory_free_bytes=8 * GIB - 512 * MIB,
        utilization_gpu_pct=78.0, utilization_gpu_pct_max=95.0, utilization_memory_pct=55.0,
        sm_clock_mhz=1980, sm_clock_max_mhz=1980, mem_clock_mhz=2619, mem_clock_max_mhz=2619,
        clock_event_reasons_bitmask=0, clock_event_reasons=(), clock_event_reasons_source="clocks_event",
        throttle_time_delta_us=NO_THROTTLE, throttle_time_frac=NO_THROTTLE,
        power_usage_w=520.0, power_limit_enforced_w=700.0, power_limit_default_w=700.0,
        temperature_c=62, temperature_slowdown_c=90,
        pcie_link_gen_current=5, pcie_link_gen_max=5, pcie_link_gen_gpu_max=5,
        pcie_link_width_current=16, pcie_link_width_max=16, pcie_read_utilization_gpu_pct=80.0, pcie_replay_count=0,
        ecc_mode_enabled=True, ecc_corrected_volatile=0, ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0,
        retired_pages_sbe=None, retired_pages_dbe=None, retired_pages_pending=None,
        remapped_rows_correctable=0, remapped_rows_uncorrectable=0, remapped_rows_pending=False,
        remapped_rows_failure=False, persistence_mode_enabled=True, mig_mode_enabled=False,
        compute_processes=(GpuProcess(pid=1235, used_memory_bytes=71 * GIB, name="VLLM::EngineCore"),),
        nvlink=(), numa_node=0, numa_node_source="nvml", unsupported_fields=(), lost=False)


def _histograms() -> Histograms:
    h = HistogramWindow
    return Histograms(ttft_s=h(count_delta=110, sum_delta_s=9.4, mean_s=0.085, p50_s=0.07, p99_s=0.24),
                      itl_s=h(count_delta=7200, sum_delta_s=61.0, mean_s=0.0085, p50_s=0.008, p99_s=0.012),
                      e2e_s=h(count_delta=110, sum_delta_s=128.0, mean_s=1.16, p50_s=1.1, p99_s=1.6),
                      queue_time_s=h(count_delta=110, sum_delta_s=0.44, mean_s=0.004, p50_s=0.002, p99_s=0.02),
                      prefill_time_s=h(count_delta=110, sum_delta_s=8.0, mean_s=0.072, p50_s=0.06, p99_s=0.2),
                      decode_time_s=h(count_delta=110, sum_delta_s=118.0, mean_s=1.07, p50_s=1.0, p99_s=1.5))


def _server_metrics() -> ServerMetricsData:
    return ServerMetricsData(
        engine="vllm", model_name=MODEL, window_s=5.0, kv_cache_usage_frac=0.55, kv_cache_usage_frac_max=0.62,
        num_requests_running=12, num_requests_running_max=15, num_requests_waiting=0, num_requests_waiting_max=0,
        num_preemptions_delta=0, preemptions_per_s=0.0,
        prefix_cache_queries_delta=60000, prefix_cache_hits_delta=27000, prefix_cache_hit_rate=0.45,
        prompt_tokens_per_s=9200.0, generation_tokens_per_s=1450.0, histograms=_histograms(),
        # vllm:cache_config_info's labels: an engine's own shape, a plain dict in the type too.
        cache_config={"block_size": 16, "cache_dtype": "fp8", "gpu_memory_utilization": 0.9,
                      "enable_prefix_caching": True, "num_gpu_blocks": 30000},
        kv_cache_capacity_tokens=None, spec_decode_acceptance_rate=None, counter_resets=())


def _server_config() -> ServerConfigData:
    return ServerConfigData(
        engine="vllm", engine_version="0.18.1", model=MODEL, max_model_len=8192, gpu_memory_utilization=0.9,
        max_num_seqs=256, max_num_batched_tokens=8192, enable_chunked_prefill=True, enable_prefix_caching=True,
        kv_cache_dtype="fp8", dtype="bfloat16", quantization="fp8", tensor_parallel_size=1,
        pipeline_parallel_size=1, enforce_eager=False, speculative_config=None, block_size=16,
        api_server_count=1, data_parallel_size=1, metrics_engine="vllm",
        sources={"engine_version": "/version", "max_model_len": "cmdline", "quantization": "cmdline",
                 "kv_cache_dtype": "cmdline", "gpu_memory_utilization": "cache_config_info",
                 "enable_prefix_caching": "cache_config_info", "enable_chunked_prefill": "default",
                 "max_num_seqs": "default", "enforce_eager": "default", "dtype": "default",
                 "tensor_parallel_size": "default"})


def _server_process() -> ServerProcessData:
    return ServerProcessData(
        pid=1234, engine="vllm",
        cmdline=("vllm", "serve", MODEL, "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--max-model-len", "8192"),
        cpu_affinity=tuple(range(0, 56)), affinity_numa_nodes=(0,), memory_numa_nodes=(0,), window_s=5.0,
        processes=(ProcessInfo(pid=1234, name="vllm", cpu_pct=40.0, num_threads=64, rss_bytes=3 * GIB),
                   ProcessInfo(pid=1235, name="VLLM::EngineCore", cpu_pct=70.0, num_threads=48, rss_bytes=5 * GIB)),
        max_thread_cpu_pct=72.0, rss_bytes_start=8 * GIB, rss_bytes_end=8 * GIB + 20 * MIB, debug_env={},
        hf_home="/models/hf")


def healthy_probes() -> dict[str, Payload]:
    """probe name -> payload for a healthy, moderately loaded vLLM host, in the order the probes report."""
    return {
        "gpu": GpuData(driver_version="550.54.15", cuda_driver_version="12.4", nvml_version="12.550.54.15",
                       window_s=5.0, num_gpus=1, unsupported_fields=(), gpus=(healthy_gpu0(),), topology=()),
        "kernel_log": KernelLogData(source="dmesg", num_lines_read=1800, num_xid_events=0, xid_counts={},
                                    xid_events=()),
        "cpu": CpuData(model="Intel(R) Xeon(R) Platinum 8480+", num_physical_cores=56, num_logical_cpus=112,
                       governor="performance", governors={"performance": 112}, freq_mhz_current=3000.0,
                       freq_mhz_max=3800.0, window_s=5.0, per_core_util_pct=(35.0,) * 8,
                       numa_nodes=(NumaNode(node=0, cpus=tuple(range(0, 56))),
                                   NumaNode(node=1, cpus=tuple(range(56, 112))))),
        "server_process": _server_process(),
        "memory": MemoryData(total_bytes=512 * GIB, available_bytes=400 * GIB, available_pct=78.1, swap_total_bytes=0,
                             swap_used_bytes=0, swap_in_bytes_delta=0, swap_out_bytes_delta=0, window_s=5.0,
                             copy_bandwidth_gbps=11.5),
        "storage": StorageData(model_dir="/models/hf/hub/models--meta-llama--Llama-3.1-8B-Instruct",
                               model_dir_fstype="ext4", model_dir_is_network_fs=False, read_gbps=3.1, read_bytes=GIB,
                               page_cache_warm=False, hf_cache_dir="/models/hf", hf_cache_fstype="ext4",
                               hf_cache_persistent=True, hf_cache_empty=False, serves_hub_model_id=True),
        "network": NetworkData(url="http://127.0.0.1:8000", same_host=True, num_samples=20, dns_ms_p50=None,
                               tcp_connect_ms_p50=0.08, health_ttfb_ms_p50=0.9),
        "server_metrics": _server_metrics(),
        "server_config": _server_config(),
        "engine_identity": EngineIdentityData(
            engine="vllm", version="0.11.2", server_header="uvicorn",
            evidence=("command line launches vllm", "/metrics has vllm:* names"),
            batching=BatchingSettings(slots=None, continuous=None, ctx_tokens=None, max_queue=None, evidence=(),
                                      from_cmdline=True)),
        "logs": LogsData(path="/var/log/vllm.log", truncated=False, num_lines=5200, slow_tokenizer=False,
                         num_preemption_lines=0, kv_cache_tokens=480000, num_gpu_blocks=30000, max_concurrency=58.6,
                         max_concurrency_tokens_per_request=8192, cuda_graph_hints=(), num_nccl_errors=0,
                         num_shm_broadcast_stalls=0, num_shm_broadcast_stalls_startup=0, num_oom_lines=0,
                         weights_download_s=None, source="--log", engine="vllm", engine_version="0.18.1",
                         event_counts={}),
    }


def startup_log(compile_s=(), download_s=(), load=None, ready_s=160.0, graphs_s=(), gaps_s=()) -> StartupData:
    """logs.startup as the log probe writes it (triage/engines/startup_log.py): the last start's phases.
    `load` is (seconds, bytes) of a weight-load phase."""
    phases = ()
    if load is not None:
        seconds, size = load
        phases = (StartupPhase(phase="weight_load", label="weight load", seconds=seconds, logged=True, bytes=size,
                               bandwidth_bytes_per_s=round(size / seconds, 1), started_at_s=5.0,
                               ended_at_s=5.0 + seconds, completed=True, line=None),)
    return StartupData(engine="vllm", num_starts=max(1, len(compile_s), len(download_s)), phases=phases,
                       ready_s=ready_s, phases_total_s=None, compile_s_each_start=tuple(compile_s),
                       cuda_graph_s_each_start=tuple(graphs_s), download_s_each_start=tuple(download_s),
                       start_gaps_s=tuple(gaps_s))


def _stats(p50: float, p99: float) -> LatencyStats:
    return LatencyStats(mean=round((p50 * 3 + p99) / 4, 3), std=round((p99 - p50) / 2.33, 3), min=round(p50 * 0.8, 3),
                        p50=p50, p90=round(p50 + (p99 - p50) * 0.6, 3), p95=round(p50 + (p99 - p50) * 0.8, 3),
                        p99=p99, max=round(p99 * 1.1, 3))


def healthy_level(concurrency: int) -> BenchLevel:
    """One bench level of the healthy server: throughput scales, no queueing, no preemption."""
    tps = {1: 120.0, 4: 440.0, 16: 1500.0, 64: 3900.0}[concurrency]
    ttft50 = {1: 38.0, 4: 44.0, 16: 62.0, 64: 140.0}[concurrency]
    tpot50 = {1: 8.0, 4: 8.6, 16: 10.0, 64: 15.0}[concurrency]
    kv = {1: 0.04, 4: 0.12, 16: 0.4, 64: 0.78}[concurrency]
    util = {1: 31.0, 4: 55.0, 16: 84.0, 64: 96.0}[concurrency]
    completed = max(20, concurrency * 8)
    return BenchLevel(
        concurrency=concurrency, request_rate=None, duration_s=30.0,
        requests=RequestCounts(completed=completed, failed=0, errors_by_kind={}),
        ttft_ms=_stats(ttft50, round(ttft50 * 2.2, 1)), tpot_ms=_stats(tpot50, round(tpot50 * 1.3, 2)),
        itl_ms=_stats(tpot50, round(tpot50 * 1.6, 2)),
        e2e_ms=_stats(ttft50 + 127 * tpot50, ttft50 * 2 + 127 * tpot50 * 1.3),
        output_tokens_per_s=tps, total_tokens_per_s=tps * 5, requests_per_s=round(tps / 128, 3),
        goodput_requests_per_s=None, slo_attainment_pct=None, input_tokens_mean=512.0, output_tokens_mean=128.0,
        server=LevelServer(kv_cache_usage_frac_mean=round(kv * 0.8, 3), kv_cache_usage_frac_max=kv,
                           num_requests_running_mean=concurrency * 0.95, num_requests_running_max=concurrency,
                           num_requests_waiting_mean=0.0, num_requests_waiting_max=0, num_preemptions_delta=0,
                           prefix_cache_hit_rate=0.62, server_ttft_ms_mean=round(ttft50 * 0.8, 1),
                           server_queue_time_ms_mean=1.5, client_minus_server_ttft_ms=6.0,
                           prompt_tokens_delta=completed * 512, generation_tokens_delta=completed * 128, engine="vllm"),
        gpu=LevelGpu(utilization_gpu_pct_mean=util, utilization_gpu_pct_max=min(100.0, util + 8),
                     memory_used_bytes_max=72 * GIB, power_usage_w_mean=200 + util * 4, sm_clock_mhz_mean=1980,
                     clock_event_reasons_seen=(), num_samples=30),
        client=ClientStats(cpu_pct=22.0, event_loop_lag_ms_p99=1.2, achieved_concurrency=float(concurrency), valid=True,
                           invalid_reason=None),
        samples=None, repeats=None, notes=())


def healthy_bench(concurrencies=(1, 4, 16, 64)) -> BenchSection:
    config = BenchRunConfig(endpoint="chat", input_len=512, output_len=128, shared_prefix_len=400, slo=Slo(),
                            model=MODEL)
    return BenchSection(config=config, levels=tuple(healthy_level(c) for c in concurrencies), summary=None)
