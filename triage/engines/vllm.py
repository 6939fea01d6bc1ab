"""vLLM: its knobs per version, its defaults and its log markers. Flags are checked against the truth tables
(triage/engines/truth/vllm-*.json, every minor from 0.6); each behaviour sentence cites the ledger."""
from __future__ import annotations

import triage.engines.truth as truth
from triage.engines import promql as pq
from triage.engines.base import Engine, Identity, Knob, Launch, Milestone, NoEquivalent, Since, Version
from triage.engines.metrics import MetricMap, mean, mx, s
from triage.engines.registry import register
from triage.engines.topology_map import Offload, TopologyMap, Transfer
from triage.engines.vllm_log import LOG_CONFIG_KEYS, LOG_FACTS

_V1_ONLY = ("vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total",
            "vllm:inter_token_latency_seconds_count", "vllm:spec_decode_num_drafts_total",
            "vllm:request_prefill_kv_computed_tokens_count")


def _variant(names: set[str], labels: set[str]) -> str:
    """V1 exports an `engine` label and names V0 never had."""
    return "vllm" if "engine" in labels or any(n in names for n in _V1_ONLY) else "vllm-v0"


v = "vllm:"
METRICS = MetricMap(
    prefix=v, model_label=True, cache_config=v + "cache_config_info", variant_fn=_variant,
    signals={
        "kv_cache_usage_frac": mx(v + "kv_cache_usage_perc", v + "gpu_cache_usage_perc"),
        "num_requests_running": s(v + "num_requests_running"),
        "num_requests_waiting": s(v + "num_requests_waiting"),
        "num_requests_swapped": s(v + "num_requests_swapped"),
        "num_preemptions_total": s(v + "num_preemptions_total"),
        "prefix_cache_queries_total": s(v + "prefix_cache_queries_total", v + "gpu_prefix_cache_queries_total"),
        "prefix_cache_hits_total": s(v + "prefix_cache_hits_total", v + "gpu_prefix_cache_hits_total"),
        "prefix_cache_hit_rate_gauge": mean(v + "gpu_prefix_cache_hit_rate"),
        "prompt_tokens_total": s(v + "prompt_tokens_total"),
        "generation_tokens_total": s(v + "generation_tokens_total"),
        "num_requests_finished_total": s(v + "request_success_total"),
        "spec_decode_accepted_tokens_total": s(v + "spec_decode_num_accepted_tokens_total"),
        "spec_decode_draft_tokens_total": s(v + "spec_decode_num_draft_tokens_total"),
        "spec_decode_num_drafts_total": s(v + "spec_decode_num_drafts_total"),
        "spec_decode_acceptance_rate_gauge": mean(v + "spec_decode_draft_acceptance_rate"),
    },
    histograms={
        "ttft_s": (v + "time_to_first_token_seconds",),
        "itl_s": (v + "inter_token_latency_seconds", v + "time_per_output_token_seconds"),
        "e2e_s": (v + "e2e_request_latency_seconds",),
        "queue_time_s": (v + "request_queue_time_seconds",),
        "prefill_time_s": (v + "request_prefill_time_seconds",),
        "decode_time_s": (v + "request_decode_time_seconds",),
    })


# How vLLM's own balancer scores a rank (the lowest score gets the request), per release: claims vllm.dp-lb-score
# (0.10.1-0.26.0) and vllm.dp-lb-score-0.33 (0.27.0 on). The 0.9 releases were not read.
_DP_SCORE = (("0.10.1", "the lowest waiting x 4 + running requests"),
             ("0.27.0", "the lowest of its in-flight requests (times the API servers) or its waiting + running "
                        "requests, plus a penalty for waiting ones that grows once its KV cache is over half full"))


def _dp_balance_fix(mode: str | None, hot: str, version: str | None) -> tuple[str, dict[str, object]]:
    """Rule TOPO001's fix. The API server balances the ranks itself unless --data-parallel-external-lb or
    -hybrid-lb hands that to a router (claims vllm.dp-lb-score, vllm.dp-lb-score-0.33, vllm.dp-rank-header)."""
    if mode in ("external", "hybrid"):
        return (f"The ranks are balanced outside vLLM ({mode} mode): your router sends rank {hot} more than it "
                "drains. Route on each rank's queue (vllm:num_requests_waiting per `engine`) or outstanding "
                "requests, not in turn or by session.", {})
    want = truth.version_key(version)
    scores = [text for since, text in _DP_SCORE if want is None or truth.version_key(since) <= want]
    score = scores[-1] if scores else "its queue (this release's score was not read)"
    header = want is None or want >= (0, 11, 1)
    pin = (f"unless the request names a rank (the X-data-parallel-rank header, which a router may add): look for a "
           f"router or client that pins requests to rank {hot}, and stop it. " if header else
           f"(this vLLM has no X-data-parallel-rank header, which came in 0.11.1): look for a client that sends rank "
           f"{hot} the long prompts. ")
    return (f"vLLM's own balancer gives each request to the rank with {score} {pin}"
            f"It counts requests, not tokens: if rank {hot} got the long prompts, balance outside vLLM on tokens.",
            {"dp_external_lb": None})


# Data parallelism, disaggregation and offload (rules TOPO001-TOPO005, docs/TOPOLOGIES.md). Every series carries
# the labels (model_name, engine), `engine` the data-parallel rank, the KV connector's metrics too (claims
# vllm.metrics-engine-label, vllm.kv-connector-metrics-labels).
TOPOLOGY = TopologyMap(
    rank_label="engine", running=v + "num_requests_running", waiting=v + "num_requests_waiting",
    kv_usage=(v + "kv_cache_usage_perc", v + "gpu_cache_usage_perc"), ttft_hist=v + "time_to_first_token_seconds",
    queue_hist=v + "request_queue_time_seconds", prefill_hist=v + "request_prefill_time_seconds",
    transfers=(Transfer("NixlConnector", v + "nixl_xfer_time_seconds", 1.0, v + "nixl_bytes_transferred", 1.0,
                        (v + "nixl_num_failed_transfers_total",), side="decode",
                        claims=("vllm.nixl-xfer-metrics", "vllm.nixl-bytes-metric", "vllm.nixl-failed-transfers",
                                "vllm.nixl-records-on-receive", "vllm.nixl-record-transfer")),),
    offloads=(Offload("the KV connector's cache (an offload tier, or another instance)", hits=v + "external_prefix_cache_hits_total",
                      queries=v + "external_prefix_cache_queries_total", bytes_total=v + "kv_offload_total_bytes_total",
                      time_total_s=v + "kv_offload_total_time_total",
                      claims=("vllm.external-prefix-cache-metrics", "vllm.kv-offload-bytes-time")),),
    claims=("vllm.metrics-engine-label", "vllm.kv-connector-metrics-labels"),
    default_dp_balance="internal", dp_balance_fix=_dp_balance_fix)


def _kv_role(out: dict) -> None:
    """--kv-transfer-config names the connector and this instance's side (kv_producer: prefill, kv_consumer:
    decode, kv_both); --kv-offloading-backend (0.12+) turns on an offload connector (claim vllm.kv-transfer-config)."""
    cfg = out.get("kv_transfer_config")
    if isinstance(cfg, dict):
        if isinstance(cfg.get("kv_connector"), str):
            out["kv_connector"] = cfg["kv_connector"]
        role = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": "both"}.get(str(cfg.get("kv_role")))
        if role and "Offload" not in str(cfg.get("kv_connector")) and "LMCache" not in str(cfg.get("kv_connector")):
            out["disaggregation_role"] = role
        elif cfg.get("kv_connector"):
            out.setdefault("kv_offload", cfg["kv_connector"])
    out.pop("kv_transfer_config", None)
    if out.get("kv_offload_size_gib") and not out.get("kv_offload"):
        out["kv_offload"] = "native"   # the default backend of --kv-offloading-backend
    if out.get("dp_external_lb"):
        out["dp_load_balance"] = "external"
    elif out.get("dp_hybrid_lb"):
        out["dp_load_balance"] = "hybrid"
    out.pop("dp_external_lb", None)
    out.pop("dp_hybrid_lb", None)


def _default_history(key: str) -> str:
    """'0.9 up to 0.19 and 0.92 from 0.20': the default's changes as the tables give them (a change first seen in
    a table is dated to that table's minor, and the value before it runs up to the minor of the table before)."""
    steps = [(v, d) for v, d in truth.default_steps("vllm", key) if d is not None]
    parts = []
    for i, (v, d) in enumerate(steps):
        nxt = steps[i + 1][0] if i + 1 < len(steps) else None
        last = truth.before("vllm", nxt) if nxt else None
        parts.append(f"{d} up to {truth.minor(last)}" if last else f"{d} from {truth.minor(v)}")
    return " and ".join(parts)


def _minor(key: str) -> str:
    """The first minor whose table has `key` on (tables hold each minor's last patch): '0.17.1' -> '0.17'."""
    first = truth.first_with("vllm", key) or "0"
    return ".".join(first.split(".")[:2])


def _legacy(version: Version | None, metrics_engine: str) -> bool:
    """The V0 engine: its /metrics say so, or the version predates 0.8 (where V1 became the default)."""
    return metrics_engine.lower() == "vllm-v0" or (version is not None and version < (0, 8, 0))


def _default_on(feature: str, version: Version | None, v0: bool, v1_metrics: bool) -> bool | None:
    # 0.8.0 made the V1 engine the default (claim vllm.v1-default-0.8); V1 always schedules with chunked prefill
    # and turns automatic prefix caching on (claims vllm.v1-chunked-prefill-0.8, vllm.v1-prefix-caching-0.8); from
    # 0.12 the engine argument stays None until the model is known (claims vllm.defaults-from-model-0.12,
    # vllm.prefix-caching-per-model).
    if feature not in ("chunked_prefill", "prefix_caching"):
        return None
    if v0:
        return False
    if version is None:
        return True if v1_metrics else None
    return version >= (0, 8, 0)


HISTORY = {
    "ttft_p50_s": pq.quantile(0.5, "vllm:time_to_first_token_seconds"),
    "ttft_p90_s": pq.quantile(0.9, "vllm:time_to_first_token_seconds"),
    "ttft_p99_s": pq.quantile(0.99, "vllm:time_to_first_token_seconds"),
    "tpot_p50_s": pq.quantile(0.5, "vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"),
    "tpot_p99_s": pq.quantile(0.99, "vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"),
    "queue_time_p99_s": pq.quantile(0.99, "vllm:request_queue_time_seconds"),
    "requests_per_s": pq.rate("vllm:request_success_total"),
    "prompt_tokens_per_s": pq.rate("vllm:prompt_tokens_total"),
    "generation_tokens_per_s": pq.rate("vllm:generation_tokens_total"),
    "preemptions_per_s": pq.rate("vllm:num_preemptions_total"),
    "requests_waiting_mean": pq.avg("vllm:num_requests_waiting"),
    "requests_waiting_max": pq.peak("vllm:num_requests_waiting"),
    "requests_running_mean": pq.avg("vllm:num_requests_running"),
    "requests_running_max": pq.peak("vllm:num_requests_running"),
    "kv_cache_usage_mean": pq.mean_of("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "kv_cache_usage_max": pq.peak("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
}


ENGINE = register(Engine(
    name="vllm", display="vLLM", aliases=("vllm-v0", "vllm-v1"), launcher="vllm serve",
    rank=0, history_queries=HISTORY, history_marker="vllm:num_requests_running",
    identity=Identity(metric_prefixes=("vllm:",), version_path="/version",
                      launches=(Launch("vllm", ("serve",)), Launch(prefix="vllm.entrypoints")),
                      images=("vllm/vllm-openai",),
                      worker_marks=("VLLM::",),
                      source="vllm-project/vllm vllm/entrypoints/openai/api_server.py (/version), "
                             "vllm/v1/metrics/loggers.py"),
    knobs={
        "gpu_memory_utilization": (Since(None, Knob("--gpu-memory-utilization", claims=(
            "vllm.gpu-memory-utilization-meaning", "vllm.gpu-memory-utilization-0.9",
            "vllm.gpu-memory-utilization-0.92"))),),
        "max_model_len": (Since(None, Knob("--max-model-len", claims=("vllm.max-model-len-meaning",))),),
        "max_num_seqs": (Since(None, Knob("--max-num-seqs", claims=("vllm.max-num-seqs-meaning",))),),
        "max_num_batched_tokens": (Since(None, Knob("--max-num-batched-tokens",
                                                    claims=("vllm.max-num-batched-tokens-meaning",))),),
        "max_batch_total_tokens": (Since(None, NoEquivalent(
            "vLLM sizes the batch's KV from gpu_memory_utilization", ("vllm.gpu-memory-utilization-meaning",))),),
        "kv_cache_dtype_fp8": (Since(None, Knob("--kv-cache-dtype", "fp8", claims=("vllm.kv-cache-dtype-fp8",))),),
        # 0.31 deprecated `fp8` for `fp8_per_tensor` but still accepts it (claim vllm.quantization-fp8-deprecated).
        "quantization_fp8": (Since(None, Knob("--quantization", "fp8", claims=("vllm.quantization-fp8-deprecated",))),),
        # Online FP8 as a fix for weights that do not fit (rule ENG010): 0.10.2 builds the whole model in 16 bits and
        # quantizes after the load; 0.33.0 quantizes each layer as it loads. The releases between were not read.
        "quantization_fp8_online": (
            Since(None, NoEquivalent("online FP8 (--quantization fp8 on a 16-bit checkpoint) loads all the 16-bit "
                                     "weights before quantizing them in this vLLM, so they must fit first",
                                     ("vllm.fp8-online-loads-full-precision-0.10",
                                      "vllm.quantize-after-full-load-0.10"))),
            Since("0.10.3", NoEquivalent("whether online FP8 quantizes while loading in this vLLM is not known to "
                                         "triage (0.10.2 loads the 16-bit weights first; 0.33.0 does not)",
                                         ("vllm.quantize-after-full-load-0.10",
                                          "vllm.fp8-online-quantizes-while-loading"))),
            Since("0.33.0", Knob("--quantization", "fp8_per_tensor",
                                 note="online FP8 applied layer by layer as the weights load, so only the 8-bit "
                                      "weights must fit",
                                 claims=("vllm.fp8-online-quantizes-while-loading", "vllm.online-quant-layerwise-process",
                                         "vllm.fp8-config-no-online")))),
        "quantization_int4": (Since(None, NoEquivalent(
            "INT4 needs a pre-quantized AWQ or GPTQ checkpoint (the engine reads the method from its config); "
            "the flag alone fails on a 16-bit model", ("vllm.quantization-needs-config",))),),
        "tensor_parallel_size": (Since(None, Knob("--tensor-parallel-size")),),
        "dtype": (Since(None, Knob("--dtype")),),
        "enable_chunked_prefill": (Since(None, Knob("--enable-chunked-prefill", None, claims=("vllm.chunked-prefill-meaning",))),),
        "enable_prefix_caching": (Since(None, Knob("--enable-prefix-caching", None, claims=("vllm.prefix-caching-unset",))),),
        # Eager mode skips torch.compile and CUDA-graph capture at start-up, and gives up their faster steps.
        "eager_mode": (Since(None, Knob("--enforce-eager", None, claims=("vllm.enforce-eager-skips-compile",))),),
        "api_server_count": (Since(None, NoEquivalent("this vLLM has one API server process (--api-server-count "
                                                      "came in 0.9.1)", ("vllm.api-server-count",))),
                             Since("0.9.1", Knob("--api-server-count", claims=("vllm.api-server-count",
                                                                               "vllm.api-server-count-0.10")))),
        "tokenizer_mode_auto": (Since(None, Knob("--tokenizer-mode", "auto", claims=("vllm.tokenizer-mode-auto",))),),
        "numa_bind": (Since(None, NoEquivalent("this vLLM has no --numa-bind (added in 0.20), which binds each "
                                               "worker to its own GPU's node", ("vllm.numa-bind",))),
                      Since("0.20.0", Knob("--numa-bind", None, claims=("vllm.numa-bind",)))),
        # Cold start (rules ENG008, NET005, NET002): where the torch.compile cache lives, the faster weight readers,
        # where hub weights are downloaded to.
        "compile_cache_dir": (Since(None, Knob("VLLM_CACHE_ROOT", is_env=True, claims=("vllm.cache-root",),
                                               note="torch.compile artifacts are kept under it")),),
        "fast_load_format": (Since(None, Knob("--load-format", "runai_streamer", claims=("vllm.load-formats",),
                                              note="it streams tensors concurrently; fastsafetensors came in 0.8.2")),
                             Since("0.8.2", Knob("--load-format", "fastsafetensors",
                                                 claims=("vllm.load-formats", "vllm.load-format-fastsafetensors"),
                                                 note="or runai_streamer, which streams tensors concurrently"))),
        "download_dir": (Since(None, Knob("--download-dir")),),
        # Data parallelism and MoE (rules TOPO001, TOPO002): a router that balances the ranks itself, and EPLB.
        "dp_external_lb": (Since(None, NoEquivalent("this vLLM has no --data-parallel-external-lb (added in 0.11.1): "
                                                    "its API server balances the ranks itself",
                                                    ("vllm.dp-lb-score", "vllm.dp-external-lb-flag"))),
                           Since("0.11.1", Knob("--data-parallel-external-lb", None,
                                                claims=("vllm.dp-external-lb-flag", "vllm.dp-rank-header"),
                                                note="then each rank is its own endpoint, balanced by your router"))),
        "enable_eplb": (Since(None, NoEquivalent("this vLLM has no --enable-eplb (added in 0.9.2)", ("vllm.enable-eplb",))),
                        Since("0.9.2", Knob("--enable-eplb", None, claims=("vllm.enable-eplb",)))),
        "speculative_config": (Since(None, NoEquivalent("this vLLM has no --speculative-config (added in 0.8.2)",
                                                        ("vllm.speculative-config-0.8",))),
                               Since("0.8.2", Knob("--speculative-config", claims=("vllm.speculative-config-0.8",)))),
    },
    config_flags={
        "--model": ("model", "str"), "--max-model-len": ("max_model_len", "int"),
        "--gpu-memory-utilization": ("gpu_memory_utilization", "float"), "--max-num-seqs": ("max_num_seqs", "int"),
        "--max-num-batched-tokens": ("max_num_batched_tokens", "int"),
        "--enable-chunked-prefill": ("enable_chunked_prefill", "bool"),
        "--no-enable-chunked-prefill": ("enable_chunked_prefill", "nobool"),
        "--enable-prefix-caching": ("enable_prefix_caching", "bool"),
        "--no-enable-prefix-caching": ("enable_prefix_caching", "nobool"),
        "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--dtype": ("dtype", "str"),
        "--quantization": ("quantization", "str"), "-q": ("quantization", "str"),
        "--tensor-parallel-size": ("tensor_parallel_size", "int"), "-tp": ("tensor_parallel_size", "int"),
        "--pipeline-parallel-size": ("pipeline_parallel_size", "int"), "-pp": ("pipeline_parallel_size", "int"),
        "--data-parallel-size": ("data_parallel_size", "int"), "-dp": ("data_parallel_size", "int"),
        "--enforce-eager": ("enforce_eager", "bool"), "--speculative-config": ("speculative_config", "json"),
        "--block-size": ("block_size", "int"), "--api-server-count": ("api_server_count", "int"),
        "--swap-space": ("swap_space_gib", "float"),
        "--enable-expert-parallel": ("expert_parallel", "bool"), "-ep": ("expert_parallel", "bool"),
        "--enable-eplb": ("enable_eplb", "bool"), "--kv-transfer-config": ("kv_transfer_config", "json"),
        "--kv-offloading-backend": ("kv_offload", "str"), "--kv-offloading-size": ("kv_offload_size_gib", "float"),
        "--data-parallel-external-lb": ("dp_external_lb", "bool"), "--data-parallel-hybrid-lb": ("dp_hybrid_lb", "bool"),
    },
    config_fixup_fn=_kv_role, topology=TOPOLOGY,
    config_defaults={"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 1,
                     "enforce_eager": False, "kv_cache_dtype": "auto", "dtype": "auto", "quantization": None,
                     "speculative_config": None},
    versioned_defaults=("gpu_memory_utilization",), model_after="serve", config_file_flag="--config",
    metrics_defaults={"vllm": {"enable_chunked_prefill": True, "enable_prefix_caching": True}},
    disabling={"prefix_caching": "--no-enable-prefix-caching", "chunked_prefill": "--no-enable-chunked-prefill",
               "cuda_graphs": "--enforce-eager"},
    default_on_fn=_default_on, memory_share="total", legacy_fn=_legacy, metrics=METRICS,
    log_markers={
        # The first line of the API server's start; up to 0.14 `vllm serve` wrote "vLLM API server version".
        # From 0.15 it logs a logo whose middle line reads "█ ▀▄▀ █  version X" under vLLM's own logging config
        # (the default), and "vLLM server version %s, serving model %s" only with VLLM_DISABLE_LOG_LOGO or
        # another logging config (claims vllm.api-server-version-log-0.14, vllm.startup-logo-0.15,
        # vllm.startup-logo, vllm.default-log-handler, vllm.server-version-log-0.15).
        "api_server_start": ((None, "vLLM API server version"),
                             ("0.15.0", "vLLM server version"), ("0.15.0", "█ ▀▄▀ █")),
        # uvicorn's line, then vLLM's own: "Starting vLLM API server" up to 0.17, "Starting vLLM server on" from 0.18
        # (claims vllm.starting-api-server-log-0.17, vllm.starting-server-log-0.18, vllm.starting-server-log).
        "ready": ((None, "Application startup complete"), (None, "Starting vLLM API server"),
                  ("0.18.0", "Application startup complete"), ("0.18.0", "Starting vLLM server on")),
        # Cold-start phases (triage/engines/startup.py), each the format string at its source line (claims in
        # notes["startup_phases"]). "Application startup complete" is uvicorn's, which vLLM serves with.
        "startup.download.end": ((None, "Time spent downloading weights for %s: %.6f seconds"),),
        "startup.weight_load.begin": ((None, "Starting to load model %s..."),),
        # The load's end, as each release words it (claims vllm.log-load-took-0.6: "Loading model weights took" up to
        # 0.7.3; vllm.log-load-took-0.10: "GiB and" 0.8.3-0.11.0, "GB and" in 0.8.0-0.8.2, "GiB memory and" in
        # 0.11.1-0.13.0; vllm.log-load-took: "%s GiB memory and" from 0.14, and Model Runner V2's "%s GiB and").
        "startup.weight_load.end": ((None, "Loading model weights took %.4f GB"),
                                    ("0.8.0", "Model loading took %.4f GB and %.6f seconds"),
                                    ("0.8.3", "Model loading took %.4f GiB and %.6f seconds"),
                                    ("0.11.1", "Model loading took %.4f GiB memory and %.6f seconds"),
                                    ("0.14.0", "Model loading took %s GiB memory and %.6f seconds"),
                                    ("0.14.0", "Model loading took %s GiB and %.6f seconds")),
        # "takes" up to 0.17, "took" from 0.18; 0.32 prefixes an optional tag, so the form is the part after it. From
        # 0.20 the 'init engine' line also carries the seconds (claims vllm.log-compile-0.10, vllm.log-compile-took,
        # vllm.log-compile-took-0.32, vllm.log-compile).
        "startup.compile.end": ((None, "torch.compile takes %.2f s in total"),
                                ("0.18.0", "torch.compile took %.2f s in total"),
                                ("0.20.0", "(compilation: %.2f s)")),
        # From 0.20 the compile seconds come on the 'init engine' line, after the fact: they were spent inside the
        # memory profile, which ends at 'Available KV cache memory', so they are taken out of that phase.
        "startup.compile.within": (("0.20.0", "kv_alloc"),),
        "startup.kv_alloc.end": ((None, "Available KV cache memory: %.2f GiB"), (None, "# GPU blocks: %d, # CPU blocks: %d"),
                                 ("0.11.0", "Available KV cache memory: %.2f GiB"),
                                 ("0.14.0", "Available KV cache memory: %s GiB")),
        "startup.cuda_graph.end": ((None, "Graph capturing finished in %.0f secs, took %.2f GiB"),),
        # 0.8.0-0.9.0 word it 'Starting vLLM API server on http%s://%s:%d' (claim vllm.log-api-0.10).
        "startup.api_server.begin": ((None, "Starting vLLM API server %d on %s"),
                                     (None, "Starting vLLM API server on http%s://%s:%d"),
                                     ("0.18.0", "Starting vLLM server on %s")),
        "startup.api_server.end": ((None, "Application startup complete"),),
    },
    log_facts=LOG_FACTS, log_config_keys=LOG_CONFIG_KEYS,
    startup_order=("download", "weight_load", "compile", "kv_alloc", "cuda_graph", "warmup", "api_server"),
    prefix_caching_per_model=True, fp8_min_capability=(8, 9), upgrade="pip install -U 'vllm>={v}'",
    milestones=(
        Milestone("0.8", "the V1 engine (V1 scheduler; chunked prefill and prefix caching on by default)",
                  major_change=True, claims=("vllm.v1-default-0.8", "vllm.v1-chunked-prefill-0.8",
                                             "vllm.v1-prefix-caching-0.8")),
        # The table's flag starts at 0.8.5 (the extractor looks for `major == 9`), but 0.7.3 already prefers FA3
        # on compute capability >= 9 (`[0] >= 9`) and 0.6.6 has no FA3: the milestone is 0.7.
        Milestone("0.7", "FlashAttention 3 on Hopper (SM90)", gpu_major=9,
                  claims=("vllm.fa3-on-sm90-0.7", "vllm.fa3-on-sm90")),
        # SM100's default backend is FlashInfer: FA4 matters only where the server chose FlashAttention.
        Milestone(_minor("flash_attn_4_on_sm100"), "FlashAttention 4 on Blackwell SM100 (with FlashAttention "
                  "chosen as the backend)", gpu_major=10, needs_choice="FLASH_ATTN",
                  claims=("vllm.sm100-defaults-to-flashinfer", "vllm.fa4-on-sm100")),
    ),
    notes={
        "attention_backend": ("vLLM logs its attention backend at startup ('Using ... attention backend'); "
                              "VLLM_ATTENTION_BACKEND (up to 0.14) or --attention-backend (from 0.13) chooses it.",
                              ("vllm.attention-backend-log", "vllm.attention-backend-env-0.14",
                               "vllm.attention-backend-flag")),
        "gpu_memory_utilization_default": (
            f"vLLM's default gpu_memory_utilization is {_default_history('gpu_memory_utilization')}.",
            ("vllm.gpu-memory-utilization-0.9", "vllm.gpu-memory-utilization-0.92")),
        "max_num_seqs_default": (
            "vLLM's default max_num_seqs is 1024 on GPUs of at least 70 GiB other than the A100, 256 elsewhere.",
            ("vllm.max-num-seqs-1024", "vllm.max-num-seqs-256")),
        "fp8": ("vLLM runs FP8 natively from compute capability 8.9 (Ada) up.", ("vllm.fp8-from-sm89",)),
        "sm100_attention": (
            "On SM100 vLLM's default attention backend is FlashInfer; FA4 applies only when FlashAttention "
            "is chosen.", ("vllm.sm100-defaults-to-flashinfer", "vllm.fa4-on-sm100")),
        "startup_phases": (
            "vLLM logs its weight download, model load (GiB and seconds), torch.compile time, available KV "
            "memory, CUDA-graph capture and API server start, each on its own line.",
            ("vllm.log-download-s", "vllm.log-load-start", "vllm.log-load-took-0.6", "vllm.log-load-took-0.10",
             "vllm.log-load-took",
             "vllm.log-compile-0.10", "vllm.log-compile-took", "vllm.log-compile-took-0.32", "vllm.log-compile", "vllm.log-kv-0.10", "vllm.log-kv", "vllm.log-gpu-blocks-0.6",
             "vllm.log-graphs",
             "vllm.log-api-0.10", "vllm.log-api")),
        "collect_env": ("vLLM's collect_env.py (which its bug template asks for) prints `Key : value` lines under "
                        "`====` headers: versions, GPUs, lscpu, `nvidia-smi topo -m` and the environment; "
                        "`triage diagnose --from` reads it (docs/TICKETS.md).",
                        ("vllm.collect-env-format", "vllm.collect-env-vllm-info")),
        "compile_cache": (
            "vLLM keeps its torch.compile cache under VLLM_CACHE_ROOT (default ~/.cache/vllm).",
            ("vllm.cache-root",)),
        "startup_log": ("Since 0.15 `vllm serve` logs its startup as a logo ('█ ▀▄▀ █  version X') by default, or "
                        "'vLLM server version X, serving model M' with VLLM_DISABLE_LOG_LOGO (before: 'vLLM API server "
                        "version X').",
                        ("vllm.api-server-version-log-0.14", "vllm.startup-logo-0.15", "vllm.startup-logo",
                         "vllm.default-log-handler", "vllm.server-version-log-0.15", "vllm.server-version-log-0.18",
                         "vllm.server-version-log")),
        "cuda_graph_sizes": ("vLLM captures CUDA graphs for batch sizes 1, 2, 4, then every 8 below 256 and every "
                             "16 above, up to twice max_num_seqs (512 at most by default).",
                             ("vllm.cuda-graph-sizes", "vllm.cuda-graph-max-512")),
        "prefix_caching_default": ("vLLM turns prefix caching on by default for decoder and hybrid generative "
                                   "models, off for attention-free and encoder-decoder ones (decided per model "
                                   "from 0.12).", ("vllm.v1-prefix-caching-0.8", "vllm.defaults-from-model-0.12",
                                                   "vllm.prefix-caching-per-model",
                                                   "vllm.prefix-caching-model-kinds")),
    },
))


def default_max_num_seqs(vram_bytes: float | None, gpu_name: str | None,
                         version: str | None = None) -> tuple[int, str]:
    """vLLM's own default max_num_seqs for `vllm serve` on this GPU at `version` (the newest when None), and why.
    1024 on GPUs of >= 70 GiB from 0.8.5 (claim vllm.max-num-seqs-1024-0.8.5), except A100s from 0.9 (claim
    vllm.max-num-seqs-1024-no-a100) and GB10 (compute capability 12.1) from 0.33 (claim vllm.max-num-seqs-1024),
    and on any GPU of >= 160 GiB from 0.28. 0.8.0-0.8.4 decided otherwise (claims vllm.max-num-seqs-1024-v1-0.8,
    vllm.max-num-seqs-1024-h100-0.8.4) and are given the 0.8.5 rule."""
    gib = 1024 ** 3
    name = (gpu_name or "").lower()
    v = truth.version_key(version) or (99, 0, 0)
    excluded = [w for w, since in (("a100", (0, 9, 0)), ("gb10", (0, 33, 0))) if v >= since and w in name]
    huge = v >= (0, 28, 0) and vram_bytes is not None and vram_bytes >= 160 * gib
    if vram_bytes is not None and (huge or (vram_bytes >= 70 * gib and not excluded)):
        others = " other than the A100" + (" and GB10" if v >= (0, 33, 0) else "") if v >= (0, 9, 0) else ""
        return 1024, f"vLLM's default on GPUs of >= 70 GiB{others}"
    return 256, "vLLM's default on this GPU"
