"""Every threshold the rules use, in one table, each with its unit and its source.

Keys are `CODE.name` (or `common.name` for values shared by several rules). A triage.toml overrides
them under `[thresholds]`, e.g. `KV001.kv_usage_frac = 0.95`. Severity ladders, in Dr. Elephant's
style, are separate keys with the severity in the name (`BENCH002.error_rate_frac_high`).
Sources are user-visible (docs/RULES.md, `triage rules explain`): they cite an article by its title
or, better, the primary source (an engine's docs or code, a paper), never an internal number.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Threshold:
    value: float
    unit: str
    source: str
    meaning: str


_T = Threshold

THRESHOLDS: dict[str, Threshold] = {
    # --- shared ---------------------------------------------------------------------------------
    "common.gpu_busy_util_pct": _T(30.0, "%", "NVML: an idle GPU lowers its PCIe link and clocks on purpose; "
                                   "30% utilization is well clear of idle", "GPU utilization above which a GPU counts as busy"),
    "common.kv_limited_usage_frac": _T(0.90, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)' (kv_cache_usage_perc near 100%), an explainer of inference as a memory-bound problem, 'watching the real ceiling'",
                                       "KV usage at or above which the server counts as KV-limited"),
    # --- GPU ------------------------------------------------------------------------------------
    "GPU001.vram_used_frac": _T(0.95, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong GPU: Your Model Doesn't Fit in VRAM' (nvidia-smi VRAM near 100%)", "VRAM used share that opens the check"),
    "GPU001.rss_growth_bytes": _T(float(2**30), "bytes", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong GPU: Your Model Doesn't Fit in VRAM' (htop shows system RAM being consumed)",
                                  "server RSS growth over the window that signals offload"),
    "GPU001.cpu_busy_pct": _T(90.0, "%", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong GPU: Your Model Doesn't Fit in VRAM' (CPU usage elevated during inference)", "server thread CPU that signals CPU compute"),
    "GPU001.gpu_starved_util_pct": _T(40.0, "%", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong GPU: Your Model Doesn't Fit in VRAM' and the 'Quick Reference: If You See X, Try Y' table", "GPU utilization below which the GPU is starved"),
    "GPU002.throttle_time_frac": _T(0.01, "fraction of window", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'GPU Layer'; NVML throttle-time counters",
                                    "thermal/board/reliability throttle time share of the window that counts"),
    "GPU003.power_limit_frac_of_default": _T(0.98, "fraction", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'GPU Layer' (power draw)",
                                             "enforced/default power limit below which the cap counts as lowered"),
    "GPU005.retired_pages_total": _T(63.0, "pages", "DCGM health: 64 retired pages is the RMA line", "retired pages (SBE+DBE) that fire"),
    "GPU005.retired_pages_dbe": _T(15.0, "pages", "DCGM health: more than 15 DBE retirements", "DBE retired pages above which it fires"),
    "GPU008.low_util_pct": _T(40.0, "%", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Single-Request Serving Instead of Continuous Batching' and the 'Quick Reference: If You See X, Try Y' table (GPU util <40% under concurrent load)", "utilization that counts as low"),
    "GPU008.min_in_flight": _T(4.0, "requests", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Quick Reference: If You See X, Try Y' (many concurrent requests)", "requests in flight that count as load"),
    "GPU012.margin_c": _T(5.0, "°C", "DCGM thermal health watch; NVML temperature thresholds",
                          "distance below the slowdown temperature that counts as close"),
    "GPU009.foreign_bytes": _T(float(2**30), "bytes", "vLLM log 'Free memory on device ... less than desired'",
                               "memory held by another process that fires"),
    # --- measured by `diagnose --active` (rules/catalog/_active_shared.py) --------------------------------------
    "GPU004.min_pcie_link_frac": _T(0.60, "fraction", "CUDA bandwidthTest: pinned copies on a healthy link reach "
                                    "~80-90% of its one-direction rate (about 50 of 63 GB/s on Gen5 x16; 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', "
                                    "'GPU Layer', PCIe bandwidthTest)", "measured pinned copy share of the link's "
                                    "theoretical rate below which the link counts as degraded"),
    "GPU010.min_nvlink_busbw_frac": _T(0.25, "fraction", "nccl-tests doc/PERFORMANCE.md (busbw tracks the slowest "
                                       "link); NVLink per direction = half the spec's bidirectional figure; a PCIe "
                                       "Gen5 x16 path carries at most ~63 GB/s, under 15% of H100's 450 GB/s",
                                       "all-reduce busbw share of NVLink's per-direction rate below which traffic "
                                       "is taken to go over PCIe or the host"),
    "GPU014.min_hbm_spec_frac": _T(0.60, "fraction", "STREAM-style device copies (BabelStream, nvbandwidth, DCGM "
                                   "memory bandwidth plugin) reach ~80-90% of spec on a healthy GPU",
                                   "measured device copy share of spec HBM bandwidth below which it fires"),
    "GPU015.min_matmul_spec_frac": _T(0.45, "fraction", "large cuBLAS bf16/fp8 GEMMs reach ~60-80% of the dense "
                                      "tensor-core peak on a healthy GPU (DCGM targeted stress, vendor GEMM "
                                      "results)", "measured matmul share of the dense spec peak below which it fires"),
    "MEM003.min_node_frac_of_best": _T(0.60, "fraction", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Memory Layer' (mbw) and CPU layer (numactl): nodes "
                                       "with the same DIMM population measure within a few tens of percent",
                                       "a node's copy bandwidth share of the best node's below which it fires"),
    # --- CPU, memory, storage, network -----------------------------------------------------------
    "CPU003.thread_busy_pct": _T(95.0, "%", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'CPU Layer' (mpstat single-thread bottleneck), the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Lessons Learned and Common Pitfalls'", "one thread's CPU share that counts as saturated"),
    "CPU003.gpu_waiting_util_pct": _T(60.0, "%", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'CPU Layer'", "GPU utilization below which the GPU waits on the CPU"),
    "MEM001.swap_activity_bytes": _T(float(2**20), "bytes", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Memory Layer' (disable swap)", "swap in+out over the window that counts"),
    "MEM002.available_pct": _T(10.0, "%", "'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit' (leave memory headroom)", "available host RAM below which it fires"),
    "NET001.read_gbps": _T(1.0, "GB/s", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Network Bottleneck', 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Network Layer' (local SSD vs NFS dd test)", "model directory read rate below which it fires"),
    "NET003.same_host_ms": _T(2.0, "ms", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Lessons Learned and Common Pitfalls' (2 ms cross-zone RTT), 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Network Layer'", "TCP connect or /health TTFB that is too slow nearby"),
    "NET003.ttft_share_frac": _T(0.20, "fraction", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Lessons Learned and Common Pitfalls'", "network time share of TTFT that fires"),
    # --- KV cache and scheduler ------------------------------------------------------------------
    "KV001.kv_usage_frac": _T(0.90, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)' and the 'Quick Reference: If You See X, Try Y' table", "KV usage at or above which, with requests waiting, it fires"),
    "KV001.min_waiting": _T(1.0, "requests", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Quick Reference: If You See X, Try Y' (requests queuing)", "waiting requests that count as queueing"),
    "KV001.min_free_requests": _T(1.0, "typical requests", "an explainer of inference as a memory-bound problem, 'watching the real ceiling' (vLLM admits requests until the KV cache "
                                  "fills); vLLM V1 and reference-engine schedulers leave a request waiting while "
                                  "blocks for its tokens cannot be allocated",
                                  "free KV, in typical requests (bench input+output tokens), below which waiting "
                                  "requests mean the cache is the limit"),
    "KV001.gpu_memory_utilization_target": _T(0.92, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)' (--gpu-memory-utilization 0.92)", "the value the fix proposes"),
    "KV003.oversize_ratio": _T(4.0, "x", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)' (reduce --max-model-len)", "max_model_len over observed p99 length that fires"),
    "KV003.headroom_ratio": _T(1.25, "x", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)'", "headroom the proposed --max-model-len keeps over the observed p99"),
    "KV005.min_hit_rate_frac": _T(0.10, "fraction", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Step 2: KV Cache Optimization and PagedAttention', an explainer of inference as a memory-bound problem, 'prefix caching'", "prefix-cache hit rate below which it fires"),
    "KV005.min_shared_prefix_tokens": _T(256.0, "tokens", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Step 2: KV Cache Optimization and PagedAttention' (400-token system prompt)", "shared prefix long enough to matter"),
    "KV007.max_gpu_memory_utilization": _T(0.95, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)' (0.92 as the usual target); above ~0.95 the "
                                           "CUDA context, NCCL buffers and graphs have no room left",
                                           "the highest memory share a fix may propose"),
    "KV006.min_gpu_memory_utilization": _T(0.85, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)', 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Memory Layer' (0.92)", "gpu_memory_utilization below which it fires when KV-limited"),
    "SCHED001.tpot_spike_ratio": _T(3.0, "x", "an explainer of inference as a memory-bound problem, 'chunked prefill' (prefill stalls decode)", "TPOT p99 over p50 that counts as a spike"),
    "SCHED001.long_prompt_tokens": _T(2048.0, "tokens", "an explainer of inference as a memory-bound problem, 'chunked prefill' (512-token chunks)", "prompt length that counts as long"),
    "SCHED002.max_kv_usage_frac": _T(0.70, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Quick Reference: If You See X, Try Y'", "KV usage below which the cache is not the limit"),
    "SCHED003.queue_share_frac": _T(0.50, "fraction", "'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit' (watch queue depth), an explainer of inference as a memory-bound problem, 'serving the model'", "queue time share of TTFT that fires"),
    "SCHED003.min_queue_ms": _T(50.0, "ms", "an explainer of inference as a memory-bound problem, 'the metrics that matter' (a 500 ms TTFT target: a tenth of it is the least worth naming)",
                                "queue time below which queueing is not what users feel"),
    "SCHED003.max_tpot_growth": _T(1.25, "x", "an explainer of inference as a memory-bound problem, 'serving the model'", "TPOT growth across the sweep that still counts as flat"),
    "SCHED003.min_ttft_growth_frac_of_linear": _T(0.75, "fraction", "an explainer of inference as a memory-bound problem, 'serving the model'",
                                                  "TTFT growth as a share of the concurrency growth that counts as linear"),
    "ENG001.min_throughput_gain_x": _T(1.6, "x", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Single-Request Serving Instead of Continuous Batching' (throughput should scale with concurrency), an explainer of inference as a memory-bound problem, 'what inference actually is' "
                                       "(decode is memory-bound: batching multiplies tokens/s)",
                                       "best throughput gain at >= 4x the lowest concurrency below which the server "
                                       "does not batch (40% of linear at 4x; one-at-a-time serving gives ~1x)"),
    "SCHED004.min_scaling_x": _T(2.0, "x", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Single-Request Serving Instead of Continuous Batching' and the 'Quick Reference: If You See X, Try Y' table", "throughput gain from c=1 to c=16 below which it fires"),
    "SCHED004.high_concurrency": _T(16.0, "requests", "catalog (1 -> 16)", "the concurrency compared with c=1"),
    "SCHED006.min_context_tokens": _T(8192.0, "tokens", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Unoptimized Attention Implementation (FlashAttention)' (beyond 8K at batch 1)", "prompt length from which growth is judged"),
    "SCHED006.excess_exponent": _T(0.15, "exponent", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Unoptimized Attention Implementation (FlashAttention)'; attention is O(N^2) FLOPs even with FlashAttention",
                                   "TTFT ~ len^k exponent above what a FlashAttention prefill shows at those lengths"),
    "SCHED006.assumed_hidden_size": _T(896.0, "hidden units", "smallest common chat model (Qwen2.5-0.5B): the most "
                                       "quadratic share, so the fewest false alarms",
                                       "model width that sets where attention FLOPs overtake the linear layers (12 x width)"),
    # --- precision, engine, capacity -------------------------------------------------------------
    "ENG002.min_roofline_frac": _T(0.50, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong Inference Engine for Your Workload', the roofline model: decode is bandwidth-bound", "decode share of roofline below which it fires"),
    "ENG003.min_acceptance_frac": _T(0.50, "fraction", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Step 5: Speculative Decoding' (75-85% accepted is good)", "draft acceptance below which it fires"),
    "ENG004.kv_headroom_ratio": _T(1.2, "x", "an explainer of inference as a memory-bound problem, 'when one GPU isn't enough' and 'the deployment playbook' (smallest TP that fits)", "KV headroom the smaller TP must keep over peak demand"),
    "ENG004.overhead_bytes_per_gpu": _T(float(2 * 2**30), "bytes", "vLLM profile run: activations and CUDA graphs",
                                        "non-weight, non-KV memory per GPU"),
    "TOPO001.min_queue": _T(4.0, "requests", "triage: a queue a rank does not drain within a step or two",
                            "most requests waiting on the hot rank during the window"),
    "TOPO001.min_ttft_ratio": _T(2.0, "x", "FLEET001's ratio, per rank", "hot rank's TTFT mean over the others' median"),
    "TOPO001.min_ttft_gap_ms": _T(100.0, "ms", "below this a ratio is noise", "smallest TTFT mean gap that counts"),
    "TOPO001.min_requests": _T(5.0, "requests", "a mean of fewer is noise", "requests a rank must finish for its TTFT to count"),
    "TOPO002.min_balancedness": _T(0.6, "fraction", "triage: mean/max expert load below which the busiest GPU "
                                   "does at least 1.7x the mean's work each step", "expert balancedness that fires"),
    "TOPO003.min_share_of_ttft": _T(0.5, "fraction", "triage: the transfer is most of the first token's wait",
                                    "KV transfer time per request over TTFT mean"),
    "TOPO003.min_transfer_ms": _T(50.0, "ms", "triage: below this the transfer is not what a user notices",
                                  "smallest mean transfer time that counts"),
    "TOPO003.slow_ttft_ms": _T(200.0, "ms", "an explainer of inference as a memory-bound problem, 'the metrics that matter' (interactive TTFT budgets of a few hundred ms)",
                               "mean TTFT below which a transfer-bound first token is an opportunity (LOW), not a problem"),
    "TOPO004.min_queue": _T(4.0, "requests", "TOPO001", "requests waiting on the saturated side"),
    "TOPO004.kv_full_frac": _T(0.9, "fraction", "KV001", "KV usage of the saturated side"),
    "TOPO004.kv_roomy_frac": _T(0.5, "fraction", "triage", "KV usage the idle side stays under"),
    "TOPO005.min_queries": _T(10000.0, "tokens", "triage: enough lookups for a rate", "tokens looked up in the tier in the window"),
    "TOPO005.min_hit_rate_frac": _T(0.10, "fraction", "KV005's hit rate", "hit rate below which the tier is not paying off"),
    "TOPO005.link_busy_frac": _T(0.5, "fraction", "triage: half the measured host link leaves the rest little room",
                                 "offload traffic over the measured pinned PCIe rate that counts as saturating"),
    "FLEET001.min_ttft_ratio": _T(2.0, "x", "vllm-doctor replica imbalance; triage", "slow replica's TTFT p99 over the others' median"),
    "FLEET001.min_ttft_gap_ms": _T(50.0, "ms", "below this a ratio is noise", "smallest TTFT p99 gap that counts"),
    "FLEET001.min_queue_gap": _T(2.0, "requests", "triage", "more waiting requests than any other replica"),
    "FLEET001.kv_full_frac": _T(0.9, "fraction", "KV001", "KV usage of the full replica"),
    "FLEET001.min_failed_frac": _T(0.5, "fraction", "triage", "share of one replica's requests failing while the others' do not (a tenth of it)"),
    "FLEET001.kv_roomy_frac": _T(0.6, "fraction", "triage", "KV usage the others stay under"),
    "HIST001.min_latency_rise_x": _T(1.25, "x", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide' (7-day offset alerts); triage watch's TTFT alert uses the same",
                                     "latency now over the same window --against earlier that counts as a jump"),
    "HIST001.min_latency_rise_ms": _T(20.0, "ms", "below this absolute rise a ratio is noise",
                                      "smallest absolute latency rise that counts"),
    "HIST001.traffic_rise_x": _T(1.2, "x", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide' (long-prompt spikes inflate TTFT)",
                                 "requests/s or prompt tokens per request growth that explains a jump"),
    "HIST001.moved_x": _T(1.2, "x", "triage", "change of another signal that is listed as moved"),
    "ENG009.min_warmup_s": _T(10.0, "s", "vLLM start-up logs (claim:vllm.log-compile): compile and CUDA-graph capture of a vLLM start",
                              "compile + CUDA-graph seconds of one start below which there is nothing to gain"),
    "ENG009.max_share_frac": _T(0.10, "fraction", "triage design choice",
                                "compile + capture share of a replica's life above which eager mode is worth weighing"),
    "ENG009.problem_share_frac": _T(0.25, "fraction", "triage design choice",
                                    "the share above which the warm-up costs enough capacity to be a problem"),
    "ENG011.min_capture_s": _T(30.0, "s", "vLLM GitHub issue #20264 (an 8B model: 7.5 s compile + 17 s capture of a 34 s "
                               "start, with the cache reused)", "compile + capture seconds of one start from which "
                               "it is judged"),
    "ENG011.min_share_frac": _T(0.5, "fraction", "more than half of the start", "their share of the start that fires"),
    "ENG011.problem_capture_s": _T(120.0, "s", "vLLM issues 16961 (11412 s of capture) and 34399 (2222 s of compile); "
                                   "16716's 65 s was called expected", "compile + capture seconds from which it is a "
                                   "problem, not an opportunity"),
    "NET006.max_bytes_per_s": _T(2e8, "bytes/s", "a SATA SSD reads ~500 MB/s, NVMe 2-7 GB/s; vLLM issues 2233 and 2253 "
                                 "loaded at ~20 MB/s off bad storage", "weight-load rate below which it fires"),
    "NET006.min_load_s": _T(60.0, "s", "vLLM issues 2233 and 2253 (loads of 120 and 15 minutes)",
                            "weight-load seconds from which a slow rate matters"),
    "ENG008.min_compile_s": _T(20.0, "s", "vLLM start-up logs (claim:vllm.log-compile): a vLLM compile takes tens of seconds; a cache hit a few",
                               "compile time below which a repeated compile is not worth a finding"),
    "ENG008.kept_frac": _T(0.7, "fraction", "triage design choice", "a later start's compile at this share of the first counts "
                           "as not cached"),
    "NET005.max_frac": _T(0.25, "fraction", "'Why Your LLM Inference Is Slow (And How to Fix It)', 'Network Bottleneck': load time is bytes over read speed",
                          "weight-load bandwidth over the storage read rate below which it fires"),
    "NET005.min_load_s": _T(10.0, "s", "triage design choice", "weight loads shorter than this are not worth a finding"),
    "ENG006.min_drop_frac": _T(0.15, "fraction", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Lessons Learned and Common Pitfalls' (15% drop after 48 h), 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 2: KV-Cache Fragmentation'", "throughput drop against the earlier report that fires"),
    "ENG006.long_uptime_s": _T(24 * 3600.0, "s", "the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Lessons Learned and Common Pitfalls' (48 h), 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Case 2: KV-Cache Fragmentation' (5 days)", "uptime that counts as long"),
    "ENG006.idle_kv_usage_frac": _T(0.05, "fraction", "vllm #15085, #27073 (KV usage stuck after failed requests)",
                                    "KV usage with no request running or waiting that counts as held (leaked)"),
    "ENG006.rss_growth_frac": _T(0.25, "fraction", "vllm #50150 (host RAM growth over days)",
                                 "server RSS growth against the earlier report that counts as a leak"),
    # --- the measurement itself ------------------------------------------------------------------
    "BENCH001.min_achieved_frac": _T(0.90, "fraction", "anchors' known pitfalls", "achieved/requested concurrency below which the client is the limit"),
    "BENCH001.max_loop_lag_ms": _T(10.0, "ms", "anchors' known pitfalls", "event-loop lag p99 above which the client is the limit"),
    "BENCH001.max_client_cpu_pct": _T(90.0, "%", "anchors' known pitfalls", "client CPU at or above which it is the limit"),
    "BENCH002.error_rate_frac": _T(0.01, "fraction", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide'", "error rate above which it fires (medium)"),
    "BENCH002.error_rate_frac_high": _T(0.05, "fraction", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide'", "error rate above which it is high"),
    "BENCH002.error_rate_frac_critical": _T(0.20, "fraction", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide'", "error rate above which it is critical"),
    "BENCH003.ttft_p99_ms": _T(500.0, "ms", "an explainer of inference as a memory-bound problem, 'the metrics that matter' (TTFT < 500 ms P99 for chat)", "default chat TTFT SLO"),
    "BENCH003.tpot_p99_ms": _T(50.0, "ms", "an explainer of inference as a memory-bound problem, 'the metrics that matter' (TPOT < 50 ms feels smooth)", "default chat TPOT SLO"),
}
