"""SGLang: its knobs per version (every 0.5.N and the last 0.4 are tabled), defaults and memory semantics."""
from __future__ import annotations

import math

from triage.engines import promql as pq
from triage.engines.base import Engine, Identity, Knob, Launch, NoEquivalent, Since, Version
from triage.engines.metrics import Given, MetricMap, mean, mx, s
from triage.engines.registry import register
from triage.engines.sglang_log import LOG_CONFIG_KEYS, LOG_FACTS
from triage.engines.topology_map import Offload, TopologyMap, Transfer

p = "sglang:"
METRICS = MetricMap(
    prefix=p, model_label=True,
    signals={
        "kv_cache_usage_frac": mx(p + "token_usage"),
        "num_requests_running": s(p + "num_running_reqs"),
        "num_requests_waiting": s(p + "num_queue_reqs"),
        # Preemption is "retraction" in SGLang: counted by num_retracted_requests_total from 0.5.7 and by the gauge
        # total_retracted_reqs up to 0.5.2; 0.5.3-0.5.6 export only num_retracted_reqs, the last batch's, not a
        # count, so preemptions are invisible there (claims sglang.metric-retracted-requests-total,
        # sglang.metric-total-retracted-reqs, sglang.metric-num-retracted-reqs).
        "num_preemptions_total": s(p + "num_retracted_requests_total", p + "total_retracted_reqs"),
        "prefix_cache_hits_total": s(p + "cached_tokens_total"),
        "prefix_cache_queries_total": Given(s(p + "prompt_tokens_total"), "prefix_cache_hits_total"),
        "prefix_cache_hit_rate_gauge": mean(p + "cache_hit_rate"),
        "prompt_tokens_total": s(p + "prompt_tokens_total"),
        "generation_tokens_total": s(p + "generation_tokens_total"),
        "num_requests_finished_total": s(p + "num_requests_total"),
        "spec_decode_mean_accept_length": mean(p + "spec_accept_length"),
        "spec_decode_acceptance_rate_gauge": mean(p + "spec_accept_rate"),   # metrics/collector.py
        "kv_cache_capacity_tokens": s(p + "max_total_num_tokens"),
    },
    histograms={
        "ttft_s": (p + "time_to_first_token_seconds",),
        "itl_s": (p + "inter_token_latency_seconds",),       # claim sglang.metric-inter-token-latency
        "e2e_s": (p + "e2e_request_latency_seconds",),
        "queue_time_s": (p + "queue_time_seconds",),
    })

GIB = 1024 ** 3

# Data parallelism, disaggregation, HiCache and EPLB (rules TOPO001-TOPO005, docs/TOPOLOGIES.md). The scheduler's
# series carry engine_type (prefill | decode | unified), tp_rank, pp_rank and, under data parallelism, dp_rank
# (claims sglang.metrics-dp-rank-label, sglang.metrics-engine-type-label). The KV transfer latency is timed on the
# prefill side, from the request entering the transfer queue to its completion (claim sglang.kv-transfer-timed-on-
# prefill; from 0.5.12 a latency the transfer backend reports comes first); it is a gauge up to 0.5.9 and a
# histogram from 0.5.10 (the tables).
def _dp_balance_fix(mode: str | None, hot: str, version: str | None) -> tuple[str, dict[str, object]]:
    """Rule TOPO001's fix: a method that balances on the ranks' load (the knob dp_load_balance says which, per
    version; claims sglang.lb-auto-round-robin, sglang.lb-total-tokens, sglang.lb-minimum-tokens,
    sglang.lb-minimum-tokens-deprecated, sglang.lb-shortest-queue-requests)."""
    now = f"--load-balance-method {mode}" if mode else "the default method"
    return (f"Balance the ranks on their load instead of in turn (now {now}; the default `auto` of 0.5.8 and later "
            "is round robin except on a prefill instance, and round_robin before).", {"dp_load_balance": None})


TOPOLOGY = TopologyMap(
    rank_label="dp_rank", dp_balance_fix=_dp_balance_fix, role_label="engine_type", role_values={"prefill": "prefill", "decode": "decode"},
    running=p + "num_running_reqs", waiting=p + "num_queue_reqs", kv_usage=(p + "token_usage",),
    ttft_hist=p + "time_to_first_token_seconds", queue_hist=p + "queue_time_seconds",
    transfers=(Transfer("mooncake, nixl or another --disaggregation-transfer-backend", p + "kv_transfer_latency_ms",
                        0.001, p + "kv_transfer_total_mb", 1024 ** 2, (p + "num_transfer_failed_reqs_total",),
                        side="prefill", claims=("sglang.kv-transfer-timed-on-prefill", "sglang.kv-transfer-total-mb-mib",
                                                "sglang.kv-transfer-total-mb-histogram")),),
    offloads=(Offload("SGLang HiCache (host memory tier)", used=p + "hicache_host_used_tokens",
                      capacity=p + "hicache_host_total_tokens", claims=("sglang.hicache-host-gauges",)),),
    expert_balance=p + "eplb_balancedness",
    claims=("sglang.metrics-dp-rank-label", "sglang.metrics-engine-type-label", "sglang.eplb-balancedness",
            "sglang.tokenizer-metrics-labels"))


def _sglang_fixup(out: dict) -> None:
    _chunking_from_size(out)
    mode = out.get("disaggregation_role")
    if mode in (None, "null"):
        out.pop("disaggregation_role", None)
        out.pop("kv_connector", None)       # the transfer backend matters only in a disaggregation mode
    elif "kv_connector" not in out:
        out["kv_connector"] = "mooncake"    # --disaggregation-transfer-backend's default (the tables)
    if out.get("kv_offload") is True:
        out["kv_offload"] = "hicache"
    elif out.get("kv_offload") is False:
        out.pop("kv_offload")


def _chunking_from_size(out: dict) -> None:
    """--chunked-prefill-size -1 turns chunking off; it is then no token budget at all."""
    if "max_num_batched_tokens" in out:
        out["enable_chunked_prefill"] = out["max_num_batched_tokens"] > 0
        if not out["enable_chunked_prefill"]:
            del out["max_num_batched_tokens"]


def _default_on(feature: str, version: Version | None, v0: bool, v1_metrics: bool) -> bool | None:
    # RadixAttention prefix caching is on unless --disable-radix-cache; chunked prefill is on (SGLang picks a
    # chunk size from GPU memory; -1 turns it off) in every tabled version (claims sglang.disable-radix-cache,
    # sglang.chunked-prefill-size, sglang.chunked-prefill-default-0.4, sglang.chunked-prefill-default-h100).
    return True if feature in ("chunked_prefill", "prefix_caching") else None


HISTORY = {
    "ttft_p50_s": pq.quantile(0.5, "sglang:time_to_first_token_seconds"),
    "ttft_p90_s": pq.quantile(0.9, "sglang:time_to_first_token_seconds"),
    "ttft_p99_s": pq.quantile(0.99, "sglang:time_to_first_token_seconds"),
    "tpot_p50_s": pq.quantile(0.5, "sglang:inter_token_latency_seconds", "sglang:request_time_per_output_token_seconds"),
    "tpot_p99_s": pq.quantile(0.99, "sglang:inter_token_latency_seconds", "sglang:request_time_per_output_token_seconds"),
    "queue_time_p99_s": pq.quantile(0.99, "sglang:queue_time_seconds"),
    "requests_per_s": pq.rate("sglang:num_requests_total"),
    "prompt_tokens_per_s": pq.rate("sglang:prompt_tokens_total"),
    "generation_tokens_per_s": pq.rate("sglang:generation_tokens_total"),
    "preemptions_per_s": pq.rate("sglang:num_retracted_requests_total", "sglang:total_retracted_reqs"),
    "requests_waiting_mean": pq.avg("sglang:num_queue_reqs"),
    "requests_waiting_max": pq.peak("sglang:num_queue_reqs"),
    "requests_running_mean": pq.avg("sglang:num_running_reqs"),
    "requests_running_max": pq.peak("sglang:num_running_reqs"),
    "kv_cache_usage_mean": pq.mean_of("sglang:token_usage"),
    "kv_cache_usage_max": pq.peak("sglang:token_usage"),
}


ENGINE = register(Engine(
    name="sglang", display="SGLang", launcher="python -m sglang.launch_server",
    abbreviated_flags="sglang.argparse-abbreviations",
    rank=1, history_queries=HISTORY, history_marker="sglang:num_running_reqs",
    identity=Identity(metric_prefixes=("sglang:",), openapi_paths=("/get_server_info", "/server_info", "/flush_cache"),
                      launches=(Launch(prefix="sglang.launch_server"), Launch("sglang", ("serve", "launch_server"))),
                      worker_marks=("sglang::",), source="sgl-project/sglang python/sglang/srt/entrypoints/http_server.py"),
    knobs={
        # Data parallelism and MoE (rules TOPO001, TOPO002): a method that balances the DP ranks on their load, and
        # EPLB. minimum_tokens balances on tokens up to 0.5.2; 0.5.3-0.5.7 deprecate it to round robin and offer
        # shortest_queue, on request counts; 0.5.8 has total_tokens (the choices are the tables').
        "dp_load_balance": (Since(None, Knob("--load-balance-method", "minimum_tokens", claims=("sglang.lb-minimum-tokens",))),
                            Since("0.5.3", Knob("--load-balance-method", "shortest_queue",
                                                note="it balances on each rank's request count: this SGLang has no "
                                                     "method that balances on tokens (minimum_tokens falls back to "
                                                     "round robin)",
                                                claims=("sglang.lb-shortest-queue-requests",
                                                        "sglang.lb-minimum-tokens-deprecated"))),
                            Since("0.5.8", Knob("--load-balance-method", "total_tokens",
                                                claims=("sglang.lb-total-tokens", "sglang.lb-auto-round-robin")))),
        # TOPO002 reads sglang:eplb_balancedness, which SGLang exports only when asked (0.5.7 on).
        "expert_balance_metric": (
            Since(None, NoEquivalent("this SGLang exports no expert balance (sglang:eplb_balancedness came in 0.5.7)",
                                     ("sglang.eplb-balancedness",))),
            Since("0.5.7", Knob("SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC", "1", is_env=True,
                                note="with --enable-expert-distribution-metrics; both are off by default",
                                claims=("sglang.eplb-balancedness-env-gate", "sglang.eplb-balancedness-env-default",
                                        "sglang.eplb-balancedness-needs-distribution-metrics"))),
            Since("0.5.18", Knob("--expert-balancedness-report-mode", "prometheus",
                                 note="off by default; `both` also writes it to the log",
                                 claims=("sglang.eplb-report-mode-default-off", "sglang.eplb-report-mode-prometheus",
                                         "sglang.eplb-env-rejected")))),
        "enable_eplb": (Since(None, Knob("--enable-eplb", None)),),
        # Faster weight readers (rule NET005): fastsafetensors from 0.5.7, runai_streamer from 0.5.10.
        "fast_load_format": (Since(None, NoEquivalent("this SGLang has no faster weight reader (--load-format "
                                                      "fastsafetensors came in 0.5.7)", ("sglang.load-format-fastsafetensors",))),
                             Since("0.5.7", Knob("--load-format", "fastsafetensors",
                                                 claims=("sglang.load-format-fastsafetensors",))),
                             Since("0.5.10", Knob("--load-format", "fastsafetensors",
                                                  note="or runai_streamer, which streams tensors concurrently",
                                                  claims=("sglang.load-format-fastsafetensors",
                                                          "sglang.load-format-runai-streamer")))),
        "compile_cache_dir": (Since(None, NoEquivalent(
            "SGLang runs torch.compile only with --enable-torch-compile; its inductor cache follows "
            "TORCHINDUCTOR_CACHE_DIR")),),
        "download_dir": (Since(None, Knob("--download-dir")),),
        # --mem-fraction-static counts weights + KV only (activations and CUDA graphs are reserved apart), so
        # rules size it with `static_memory_share` below, never with vLLM's 0.92.
        "gpu_memory_utilization": (Since(None, Knob("--mem-fraction-static",
                                                    claims=("sglang.mem-fraction-static-meaning",))),),
        "max_model_len": (Since(None, Knob("--context-length", claims=("sglang.context-length",))),),
        "max_num_seqs": (Since(None, Knob("--max-running-requests", claims=("sglang.max-running-requests",))),),
        "max_num_batched_tokens": (Since(None, Knob("--chunked-prefill-size", claims=("sglang.chunked-prefill-size",))),),
        "max_batch_total_tokens": (Since(None, NoEquivalent(
            "SGLang sizes the KV pool from --mem-fraction-static", ("sglang.mem-fraction-static-meaning",))),),
        "kv_cache_dtype_fp8": (Since(None, Knob("--kv-cache-dtype", "fp8_e4m3", claims=("sglang.kv-cache-dtype-fp8-e4m3",))),),
        "quantization_fp8": (Since(None, Knob("--quantization", "fp8", claims=("sglang.quantization-fp8",))),),
        "quantization_int4": (Since(None, NoEquivalent(
            "INT4 needs a pre-quantized AWQ or GPTQ checkpoint (the engine reads the method from its config); "
            "the flag alone fails on a 16-bit model", ("sglang.quantization-not-all-online",))),),
        "tensor_parallel_size": (Since(None, Knob("--tp-size")),),
        "enable_chunked_prefill": (Since(None, Knob("--chunked-prefill-size", "8192", claims=(
            "sglang.chunked-prefill-size", "sglang.chunked-prefill-default-h100"))),),
        "enable_prefix_caching": (Since(None, NoEquivalent(
            "SGLang caches prefixes unless --disable-radix-cache is set", ("sglang.disable-radix-cache",))),),
        "tokenizer_mode_auto": (Since(None, Knob("--tokenizer-mode", "auto", claims=("sglang.tokenizer-mode-auto",))),),
        "eager_mode": (Since(None, Knob("--disable-cuda-graph", None, claims=("sglang.disable-cuda-graph-deprecated",))),),
        # One NUMA node per GPU process, in GPU order (numa_node[gpu_id]): rules pass one value per GPU. From
        # 0.5.10 SGLang also binds by itself when --numa-node is not given (0.5.18 added SGLANG_AUTO_NUMA_BIND=0 to
        # turn that off); the flag still pins it exactly.
        "numa_bind": (Since(None, NoEquivalent("this SGLang has no --numa-node (added in 0.5.2)",
                                               ("sglang.numa-node-0.5.2",))),
                      Since("0.5.2", Knob("--numa-node", claims=("sglang.numa-node-0.5.2", "sglang.numa-node-per-gpu")))),
        "speculative_num_draft_tokens": (Since(None, Knob("--speculative-num-draft-tokens",
                                                          claims=("sglang.speculative-num-draft-tokens",))),),
    },
    config_flags={
        "--model-path": ("model", "str"), "--model": ("model", "str"),
        "--context-length": ("max_model_len", "int"), "--mem-fraction-static": ("gpu_memory_utilization", "float"),
        "--max-running-requests": ("max_num_seqs", "int"), "--chunked-prefill-size": ("max_num_batched_tokens", "int"),
        "--disable-radix-cache": ("enable_prefix_caching", "nobool"), "--kv-cache-dtype": ("kv_cache_dtype", "str"),
        "--dtype": ("dtype", "str"), "--quantization": ("quantization", "str"),
        "--tp-size": ("tensor_parallel_size", "int"), "--tensor-parallel-size": ("tensor_parallel_size", "int"),
        "--pp-size": ("pipeline_parallel_size", "int"), "--dp-size": ("data_parallel_size", "int"),
        "--disable-cuda-graph": ("enforce_eager", "bool"), "--speculative-algorithm": ("speculative_config", "str"),
        "--page-size": ("block_size", "int"),
        # Newer ServerArgs (sglang/srt/arg_groups/fields/exec_.py) turn decode CUDA graphs off with these.
        "--disable-decode-cuda-graph": ("enforce_eager", "bool"),
        "--cuda-graph-backend-decode": ("enforce_eager", "eager_if_disabled"),
        "--load-balance-method": ("dp_load_balance", "str"), "--enable-dp-attention": ("dp_attention", "bool"),
        "--ep-size": ("expert_parallel_size", "int"), "--expert-parallel-size": ("expert_parallel_size", "int"),
        "--enable-eplb": ("enable_eplb", "bool"), "--disaggregation-mode": ("disaggregation_role", "str"),
        "--disaggregation-transfer-backend": ("kv_connector", "str"), "--enable-hierarchical-cache": ("kv_offload", "bool"),
    },
    config_defaults={"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 1,
                     "enforce_eager": False, "kv_cache_dtype": "auto", "dtype": "auto", "enable_prefix_caching": True},
    config_fixup_fn=_sglang_fixup, topology=TOPOLOGY,
    disabling={"prefix_caching": "--disable-radix-cache", "cuda_graphs": "--disable-cuda-graph"},
    disabling_other={"cuda_graphs": "--disable-decode-cuda-graph / --cuda-graph-backend-decode disabled (newer SGLang)"},
    default_on_fn=_default_on, memory_share="static", metrics=METRICS,
    memory_target_fn=lambda current, vram, usual: static_memory_share(current, vram),
    log_facts=LOG_FACTS, log_config_keys=LOG_CONFIG_KEYS,
    startup_order=("weight_load", "kv_alloc", "cuda_graph", "warmup", "api_server"),
    log_markers={
        # Cold-start phases (triage/engines/startup.py): SGLang's f-strings, the placeholders as in its source.
        "startup.weight_load.begin": ((None, "Load weight begin."),),
        "startup.weight_load.end": ((None, "Load weight end. "),),
        "startup.cuda_graph.begin": ((None, "Capture cuda graph begin"),
                                     ("0.5.9", "Capture {graph_backend[self.device]} begin")),
        "startup.cuda_graph.end": ((None, "Capture cuda graph end"),
                                   ("0.5.9", "Capture {graph_backend[self.device]} end")),
        "startup.kv_alloc.end": ((None, "Memory pool end. "),),
        "startup.api_server.end": ((None, "The server is fired up and ready to roll!"),),
    },
    notes={
        "startup_phases": ("SGLang logs its weight load (with elapsed seconds), CUDA-graph capture, memory pool and "
                           "readiness on their own lines.",
                           ("sglang.log-load-begin", "sglang.log-load-end", "sglang.log-graph-0.4",
                            "sglang.log-graph-end-0.4", "sglang.log-graph", "sglang.log-graph-end",
                            "sglang.log-mem-pool", "sglang.log-ready")),
        "auto_numa_bind": ("From 0.5.10 SGLang binds each GPU's process to that GPU's NUMA node by itself when "
                           "--numa-node is not given; from 0.5.18 SGLANG_AUTO_NUMA_BIND=0 turns that off.", ("sglang.auto-numa-bind-off-0.5.17",
                                                        "sglang.auto-numa-bind-0.5.18", "sglang.auto-numa-bind")),
        "chunked_prefill_default": ("SGLang picks --chunked-prefill-size from GPU memory when it is not given "
                                    "(8192 on H100-class GPUs), so chunked prefill is on by default.",
                                    ("sglang.chunked-prefill-default-0.4", "sglang.chunked-prefill-default-h100",
                                     "sglang.chunked-prefill-size")),
        "cuda_graphs_off": ("SGLang 0.5.23 still takes --disable-cuda-graph, deprecated for "
                            "--cuda-graph-backend-{decode,prefill}=disabled; --disable-decode-cuda-graph turns off "
                            "the decode phase's.", ("sglang.disable-cuda-graph-deprecated",
                                                    "sglang.cuda-graph-backend-decode",
                                                    "sglang.disable-decode-cuda-graph")),
        "mem_fraction_static": ("SGLang's --mem-fraction-static covers weights and the KV pool only; when SGLang "
                                "picks it, from 0.5.3 it keeps >= 10 GiB outside it on GPUs over 60 GiB.",
                                ("sglang.mem-fraction-static-meaning", "sglang.mem-fraction-static-reserve")),
    },
))


def static_memory_share(current: float | None, vram_bytes: float | None, step: float = 0.04) -> tuple[float | None, str]:
    """A raised --mem-fraction-static that keeps a reserve outside it like the one SGLang keeps when it picks the
    value itself (>= 10 GiB on GPUs over 60 GiB, from 0.5.3: claim sglang.mem-fraction-static-reserve; elsewhere
    the reserve the current value leaves, at most 0.04 less), or None with the reason."""
    if current is None:
        return None, ("SGLang chose --mem-fraction-static itself and triage did not read the value; raise it a few "
                      "hundredths at a time, keeping the activations' and CUDA graphs' reserve free")
    ceiling = 1.0 - (10 * GIB / vram_bytes) if vram_bytes and vram_bytes > 60 * GIB else 0.90
    target = math.floor(min(current + step, ceiling) * 100 + 1e-9) / 100   # never above the ceiling
    if target <= current:
        return None, (f"--mem-fraction-static is already {current}, the most that keeps SGLang's reserve for "
                      "activations and CUDA graphs free; lower --chunked-prefill-size or --cuda-graph-max-bs to "
                      "free more, or shorten the context")
    return target, f"raise --mem-fraction-static to {target} (now {current}), keeping SGLang's activation reserve free"
