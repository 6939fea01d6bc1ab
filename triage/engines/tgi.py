"""Text Generation Inference: its knobs per version (every minor from 2.0 is tabled) with TGI's real meanings.

What bounds a TGI batch is its token budget, not a sequence count: with prefill chunking on (the 3.x default)
the v3 scheduler ignores --max-batch-size, so no TGI fix ever raises it there.
"""
from __future__ import annotations

from triage.engines import promql as pq
from triage.engines.base import (
    EndpointSignal,
    Engine,
    Identity,
    Knob,
    Launch,
    Milestone,
    NoEquivalent,
    Since,
    Version,
)
from triage.engines.metrics import HistSum, MetricMap, Ratio, mx, s
from triage.engines.registry import register
from triage.engines.tgi_log import LOG_FACTS

METRICS = MetricMap(
    prefix="tgi_",
    signals={
        # TGI's KV signal: the running batch's tokens over its token budget, which is what bounds a TGI batch
        # (claims tgi.batch-current-max-tokens, tgi.batch-max-total-tokens).
        "kv_cache_usage_frac": Ratio(mx("tgi_batch_current_max_tokens"), mx("tgi_batch_max_total_tokens")),
        "kv_cache_capacity_tokens": mx("tgi_batch_max_total_tokens"),
        "num_requests_running": s("tgi_batch_current_size"),
        "num_requests_waiting": s("tgi_queue_size"),
        # TGI counts tokens only inside per-request histograms: their sums are the token totals.
        "prompt_tokens_total": HistSum("tgi_request_input_length"),
        "generation_tokens_total": HistSum("tgi_request_generated_tokens"),
        # prometheus-client's parser appends `_total` to a counter sample that lacks it.
        "num_requests_finished_total": s("tgi_request_success_total", "tgi_request_success"),
    },
    histograms={
        # TGI has no TTFT histogram; its per-request mean time per token stands in for ITL.
        "itl_s": ("tgi_request_mean_time_per_token_duration",),
        "e2e_s": ("tgi_request_duration",),
        "queue_time_s": ("tgi_request_queue_duration",),   # claim tgi.request-queue-duration
    })

_CHUNKING_IGNORES_SIZE = NoEquivalent(
    "TGI 3.x ignores --max-batch-size while prefill chunking is on (its default): the batch is bounded by "
    "--max-batch-total-tokens, which TGI sizes from free memory when it is not set. Models TGI does not chunk "
    "still obey --max-batch-size: every vision-language model up to 3.2; Gemma3, Qwen2-VL, Qwen2.5-VL and Mllama "
    "from 3.3",
    ("tgi.chunking-ignores-max-batch-size", "tgi.prefill-chunking-default-on", "tgi.max-batch-total-tokens-meaning",
     "tgi.no-chunking-all-vlms", "tgi.no-chunking-gemma3", "tgi.no-chunking-qwen2-vl", "tgi.no-chunking-qwen2.5-vl",
     "tgi.no-chunking-mllama", "tgi.no-chunking-max-batch-size"))


def _whole_gpu(current: float | None) -> tuple[float | None, str]:
    """TGI's --cuda-memory-fraction defaults to the whole GPU: only a lower setting can be raised (to 1.0)."""
    if current is not None and current >= 1.0:
        return None, "--cuda-memory-fraction is already 1.0, the whole GPU"
    return 1.0, "give TGI the whole GPU: --cuda-memory-fraction 1.0" + (f" (now {current})" if current is not None else "")


def _default_on(feature: str, version: Version | None, v0: bool, v1_metrics: bool) -> bool | None:
    if version is None:
        return None
    if feature == "prefix_caching":       # the launcher's default from 2.3 (USE_PREFIX_CACHING, then PREFIX_CACHING)
        return version >= (2, 3, 0)
    if feature == "chunked_prefill":      # PREFILL_CHUNKING: added off in 2.4, on from 3.0
        return version >= (3, 0, 0)
    return None


HISTORY = {   # no TTFT histogram in TGI: queue time and end-to-end duration stand in
    "queue_time_p99_s": pq.quantile(0.99, "tgi_request_queue_duration"),
    "e2e_p99_s": pq.quantile(0.99, "tgi_request_duration"),
    "tpot_p50_s": pq.quantile(0.5, "tgi_request_mean_time_per_token_duration"),
    "tpot_p99_s": pq.quantile(0.99, "tgi_request_mean_time_per_token_duration"),
    "requests_per_s": pq.rate("tgi_request_success"),
    "prompt_tokens_per_s": pq.rate("tgi_request_input_length_sum"),
    "generation_tokens_per_s": pq.rate("tgi_request_generated_tokens_sum"),
    "requests_waiting_mean": pq.avg("tgi_queue_size"),
    "requests_waiting_max": pq.peak("tgi_queue_size"),
    "requests_running_mean": pq.avg("tgi_batch_current_size"),
    "requests_running_max": pq.peak("tgi_batch_current_size"),
}


ENGINE = register(Engine(
    name="tgi", display="TGI", aliases=("text-generation-inference", "text-generation-launcher"),
    log_facts=LOG_FACTS, startup_order=("download", "weight_load", "warmup", "api_server"),
    rank=2, history_queries=HISTORY, history_marker="tgi_queue_size",
    launcher="text-generation-launcher",
    identity=Identity(metric_prefixes=("tgi_",), images=("ghcr.io/huggingface/text-generation-inference",),
                      launches=(Launch("text-generation-launcher"), Launch("text-generation-router")),
                      worker_marks=("text-generation-server",),
                      endpoints=(EndpointSignal("/info", ("model_id",), any_keys=("router", "max_batch_total_tokens"),
                                                version_key="version", what="/info has TGI's router fields"),),
                      source="huggingface/text-generation-inference router/src/server.rs (/info, tgi_* metrics)"),
    knobs={
        "compile_cache_dir": (Since(None, NoEquivalent("TGI does not torch.compile the model at start")),),
        "download_dir": (Since(None, NoEquivalent("TGI downloads into its hub cache, the image's /data: mount a "
                                                  "persistent volume there (-v $volume:/data)")),),
        # More room for KV on TGI means the whole GPU: --cuda-memory-fraction 1.0 is the default; only a lower
        # setting costs KV room (the KV cache is then sized with TGI_WIGGLE_ROOM of what is free).
        "gpu_memory_utilization": (Since(None, Knob(
            "--cuda-memory-fraction", "1.0", "TGI's default is 1.0; only a lower setting costs KV room",
            claims=("tgi.cuda-memory-fraction-default", "tgi.kv-sized-with-wiggle-room"))),),
        "max_model_len": (Since(None, Knob("--max-total-tokens", claims=("tgi.max-total-tokens-meaning",))),),
        "max_num_seqs": (Since(None, Knob("--max-batch-size", claims=("tgi.max-batch-size-meaning",))),
                         Since("3.0.0", _CHUNKING_IGNORES_SIZE)),
        "max_num_batched_tokens": (Since(None, Knob("--max-batch-prefill-tokens",
                                                    claims=("tgi.max-batch-prefill-tokens-meaning",))),),
        "max_batch_total_tokens": (Since(None, Knob("--max-batch-total-tokens",
                                                    claims=("tgi.max-batch-total-tokens-meaning",
                                                            "tgi.chunking-ignores-max-batch-size"))),),
        "kv_cache_dtype_fp8": (Since(None, NoEquivalent("this TGI has no --kv-cache-dtype (added in 2.4)")),
                               Since("2.4.0", Knob("--kv-cache-dtype", "fp8_e4m3fn", claims=("tgi.kv-cache-dtype-fp8",)))),
        "quantization_fp8": (Since(None, Knob("--quantize", "fp8", claims=("tgi.quantize-fp8",))),),
        "quantization_int4": (Since(None, NoEquivalent(
            "INT4 needs a pre-quantized AWQ or GPTQ checkpoint (the engine reads the method from its config); "
            "the flag alone fails on a 16-bit model", ("tgi.quantize-read-from-config",))),),
        "tensor_parallel_size": (Since(None, Knob("--num-shard", claims=("tgi.num-shard",))),),
        "eager_mode": (Since(None, Knob("--cuda-graphs", "0", claims=("tgi.cuda-graphs-0",))),),
        "enable_chunked_prefill": (
            Since(None, NoEquivalent("this TGI has no prefill chunking (the PREFILL_CHUNKING switch came in 2.4)",
                                     ("tgi.prefill-chunking-default-off-2.4",))),
            Since("2.4.0", Knob("PREFILL_CHUNKING=1", None, "an environment variable of the launcher",
                                claims=("tgi.prefill-chunking-default-off-2.4",), is_env=True)),
            Since("3.0.0", NoEquivalent("TGI 3.x chunks prefills by default (PREFILL_CHUNKING=0 turns it off)",
                                        ("tgi.prefill-chunking-default-on",)))),
        "enable_prefix_caching": (
            Since(None, NoEquivalent("this TGI has no prefix caching (it came in 2.3)",
                                     ("tgi.prefix-caching-2.3-server", "tgi.prefix-caching-default-on-2.3"))),
            Since("2.3.0", NoEquivalent("TGI turns prefix caching on by default; PREFIX_CACHING=0 (USE_PREFIX_CACHING "
                                        "in 2.3) or the model turns it off", ("tgi.prefix-caching-default-on",
                                                                              "tgi.prefix-caching-default-on-2.3")))),
    },
    config_flags={
        "--model-id": ("model", "str"), "--max-total-tokens": ("max_model_len", "int"),
        "--max-batch-size": ("max_num_seqs", "int"), "--cuda-memory-fraction": ("gpu_memory_utilization", "float"),
        "--max-batch-total-tokens": ("max_batch_total_tokens", "int"),
        "--max-batch-prefill-tokens": ("max_num_batched_tokens", "int"), "--quantize": ("quantization", "str"),
        "--max-concurrent-requests": ("max_concurrent_requests", "int"),
        "--num-shard": ("tensor_parallel_size", "int"), "--dtype": ("dtype", "str"),
        "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--speculate": ("speculative_config", "str"),
    },
    config_defaults={"tensor_parallel_size": 1}, versioned_defaults=("gpu_memory_utilization",), env_twins=True,
    # 2.3 reads USE_PREFIX_CACHING, 2.4 on PREFIX_CACHING (claims tgi.prefix-caching-2.3-server,
    # tgi.prefix-caching-env-server, tgi.prefix-caching-env-launcher).
    env_off_switches={"enable_prefix_caching": ("PREFIX_CACHING", "USE_PREFIX_CACHING")},
    # /info's max_concurrent_requests is TGI's refusal limit (claim tgi.max-concurrent-requests-refuses), not its
    # batch size: /info has none, and TGI 3.x bounds its batch by tokens.
    config_endpoints={"/info": {"version": "engine_version", "model_id": "model", "max_total_tokens": "max_model_len",
                                "max_concurrent_requests": "max_concurrent_requests"}},
    disabling={"cuda_graphs": "--cuda-graphs 0"},
    disabling_other={"prefix_caching": "PREFIX_CACHING=0 (environment)",
                     "chunked_prefill": "PREFILL_CHUNKING=0 (environment)"},
    upgrade="docker pull ghcr.io/huggingface/text-generation-inference:{v}",
    milestones=(
        Milestone("2.3", "prefix caching on by default",
                  claims=("tgi.prefix-caching-default-on-2.3",)),
        Milestone("3.0", "prefill chunking on by default",
                  claims=("tgi.prefill-chunking-default-off-2.4", "tgi.prefill-chunking-default-on")),
    ),
    metrics=METRICS,
    default_on_fn=_default_on, memory_share="total", memory_target_fn=lambda current, vram, usual: _whole_gpu(current),
    log_markers={
        # Cold-start phases (triage/engines/startup.py): the launcher's and router's tracing lines.
        "startup.download.begin": ((None, "Starting download process."),
                                   ("2.1.0", "Starting check and download process for {model_id}")),
        "startup.download.end": ((None, "Successfully downloaded weights."),
                                 ("2.1.0", "Successfully downloaded weights for {model_id}")),
        "startup.weight_load.begin": ((None, "Starting shard"),),
        "startup.weight_load.end": ((None, "Shard ready in {:?}"),),
        "startup.warmup.begin": ((None, "Warming up model"),),
        "startup.warmup.end": ((None, "Setting max batch total tokens to {max_batch_total_tokens}"),),
        "startup.api_server.begin": ((None, "Starting Webserver"),),
        "startup.api_server.end": ((None, "Connected"),),
    },
    notes={
        "startup_phases": ("TGI's launcher logs the download, each shard's start and ready time, the warm-up and "
                           "the web server's start.",
                           ("tgi.log-download-2.0", "tgi.log-downloaded-2.0", "tgi.log-download",
                            "tgi.log-downloaded", "tgi.log-shard", "tgi.log-shard-ready", "tgi.log-warmup",
                            "tgi.log-max-batch", "tgi.log-webserver", "tgi.log-connected")),
        "max_concurrent_requests": ("--max-concurrent-requests is TGI's refusal limit (an 'overloaded' error), "
                                    "not its batch size.", ("tgi.max-concurrent-requests-refuses",)),
        "kv_usage": ("TGI's batch fill is tgi_batch_current_max_tokens over tgi_batch_max_total_tokens.",
                     ("tgi.batch-current-max-tokens", "tgi.batch-max-total-tokens")),
        "kv_reservation": ("TGI reserves KV blocks for a request's prompt plus its max_new_tokens when it admits it "
                           "(without max_new_tokens a request gets --max-total-tokens minus its prompt). From 3.0 a "
                           "request without max_new_tokens reserves at most 1024 new tokens at a time and is "
                           "re-queued for more; from 3.1.1 so is one that sets it (3.0 and 3.1.0 reserve all of an "
                           "explicit max_new_tokens).",
                           ("tgi.reserves-prompt-plus-new-tokens", "tgi.max-new-tokens-default-2.4",
                            "tgi.generation-chunk-1024", "tgi.generation-chunk-1024-3.0",
                            "tgi.generation-reserve-explicit-max-new-tokens",
                            "tgi.default-generation-length")),
        "cuda_graphs": ("TGI captures CUDA graphs for the batch sizes --cuda-graphs lists (1,2,4,8,16,32 by "
                        "default); --cuda-graphs 0 turns them off.", ("tgi.cuda-graphs-0",)),
        "queue_time": ("TGI records each request's queue time in tgi_request_queue_duration.",
                       ("tgi.request-queue-duration",)),
    },
))
