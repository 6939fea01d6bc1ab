"""Engines without per-version flag tables: how triage recognises each, and the one knob that bounds its batch.
Each fact names the engine source it was read from (and, where the ledger has it, the claim)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from triage.engines.argv import bounded_int, flag_value
from triage.engines.base import BatchingKnob, EndpointSignal, Engine, Identity, Launch, Version
from triage.engines.metrics import First, Given, MetricMap, Plus, mean, mx, s
from triage.engines.registry import register

_L = "llamacpp:"
# llama.cpp (tools/server/server.cpp, README "/metrics"): prompt_tokens_total excludes cached tokens.
LLAMACPP_METRICS = MetricMap(prefix=_L, signals={
    "kv_cache_usage_frac": mx(_L + "kv_cache_usage_ratio"),
    "num_requests_running": s(_L + "requests_processing"),
    "num_requests_waiting": s(_L + "requests_deferred"),
    "prefix_cache_queries_total": Plus(s(_L + "prompt_tokens_total"), s(_L + "prompt_tokens_cached_total")),
    "prefix_cache_hits_total": Given(s(_L + "prompt_tokens_cached_total"), "prefix_cache_queries_total"),
    "prompt_tokens_total": First((Plus(s(_L + "prompt_tokens_total"), s(_L + "prompt_tokens_cached_total")),
                                  s(_L + "prompt_tokens_total"))),
    "generation_tokens_total": s(_L + "tokens_predicted_total"),
    "spec_decode_accepted_tokens_total": s(_L + "spec_decode_num_accepted_tokens_total"),
    "spec_decode_draft_tokens_total": s(_L + "spec_decode_num_draft_tokens_total"),
    "spec_decode_num_drafts_total": s(_L + "spec_decode_num_drafts_total"),
    "batch_occupancy_mean": mean(_L + "n_busy_slots_per_decode"),
})


def _vllm_shaped(p: str) -> MetricMap:
    """LMDeploy (lmdeploy/metrics/loggers.py) and TensorRT-LLM (tensorrt_llm/serve/metrics/metrics.py) export
    vLLM-shaped names under their own prefix."""
    return MetricMap(prefix=p, signals={
        "kv_cache_usage_frac": mx(p + "gpu_cache_usage_perc"),
        "num_requests_running": s(p + "num_requests_running"),
        "num_requests_waiting": s(p + "num_requests_waiting"),
        "num_preemptions_total": s(p + "num_preemptions_total"),
        "prompt_tokens_total": s(p + "prompt_tokens_total"),
        "generation_tokens_total": s(p + "generation_tokens_total"),
    }, histograms={
        "ttft_s": (p + "time_to_first_token_seconds",), "itl_s": (p + "time_per_output_token_seconds",),
        "e2e_s": (p + "e2e_request_latency_seconds",), "queue_time_s": (p + "request_queue_time_seconds",),
        "prefill_time_s": (p + "request_prefill_time_seconds",), "decode_time_s": (p + "request_decode_time_seconds",),
    })


def _llamacpp_batching(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """-np/--parallel N (env LLAMA_ARG_N_PARALLEL; -1 = auto), -c/--ctx-size split over the slots,
    -cb/--cont-batching on by default, -nocb/--no-cont-batching off (common/arg.cpp)."""
    raw = flag_value(argv, ("-np", "--parallel"))
    slots = bounded_int(raw) if raw is not None else bounded_int(env.get("LLAMA_ARG_N_PARALLEL"))
    cont: bool | None = None
    if "-nocb" in argv or "--no-cont-batching" in argv:
        cont = False
    elif "-cb" in argv or "--cont-batching" in argv:
        cont = True
    ctx = bounded_int(flag_value(argv, ("-c", "--ctx-size")) or env.get("LLAMA_ARG_CTX_SIZE"))
    ev = tuple(e for e in (f"--parallel {slots}" if slots is not None else None,
                           f"-c {ctx}" if ctx is not None else None,
                           "--no-cont-batching" if cont is False else None) if e)
    return {"slots": slots if slots and slots > 0 else None, "continuous": cont, "ctx_tokens": ctx, "evidence": ev}


def _ollama_batching(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """OLLAMA_NUM_PARALLEL and OLLAMA_MAX_QUEUE (envconfig/config.go)."""
    slots = bounded_int(env.get("OLLAMA_NUM_PARALLEL"))
    queue = bounded_int(env.get("OLLAMA_MAX_QUEUE"))
    ev = tuple(f"{k}={env[k]}" for k in ("OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_QUEUE") if k in env)
    return {"slots": slots if slots and slots > 0 else None, "max_queue": queue, "evidence": ev}


def _transformers_batching(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """`transformers serve --continuous-batching`, off by default (src/transformers/cli/serve.py)."""
    on = "--continuous-batching" in argv and "--no-continuous-batching" not in argv
    return {"continuous": on, "evidence": ("--continuous-batching",) if on else ()}


def _llamacpp_single(ident: Any) -> tuple[str, dict[str, Any]] | None:
    lcpp_slots = ident.llamacpp.total_slots if ident.llamacpp is not None else None
    slots = lcpp_slots or (ident.batching.slots if ident.batching is not None else None)
    if slots != 1:
        return None
    key = "engine_identity.llamacpp.total_slots" if lcpp_slots else "engine_identity.batching.slots"
    return "llama-server runs one slot (--parallel 1): it decodes one request at a time", {key: 1}


def _llamacpp_fix(ident: Any, slots: int, model: str) -> tuple[str, tuple[str, ...]]:
    lcpp = ident.llamacpp
    per_slot = lcpp.ctx_per_slot_tokens if lcpp is not None else None
    path = (lcpp.model_path if lcpp is not None else None) or model
    ctx_arg = f" -c {per_slot * slots}" if per_slot else ""
    return (f"Give llama-server {slots} slots with --parallel (-np); -c is split over the slots, so raise -c with "
            "it to keep each request's context" + (f" ({per_slot} tokens per slot now)" if per_slot else "") + ".",
            (f"llama-server -m {path} --parallel {slots}{ctx_arg}",))


def _ollama_single(ident: Any) -> tuple[str, dict[str, Any]] | None:
    if ident.batching is not None and ident.batching.slots == 1:
        return "Ollama runs with OLLAMA_NUM_PARALLEL=1", {"engine_identity.batching.slots": 1}
    return None


def _ollama_fix(ident: Any, slots: int, model: str) -> tuple[str, tuple[str, ...]]:
    return ("Let Ollama run requests in parallel per model with OLLAMA_NUM_PARALLEL (default: 1 since 0.10).",
            (f"OLLAMA_NUM_PARALLEL={slots} ollama serve",))


def _transformers_single(ident: Any) -> tuple[str, dict[str, Any]] | None:
    if ident.batching is not None and ident.batching.continuous is True:
        return None
    return "`transformers serve` runs without --continuous-batching (its default)", \
        {"engine_identity.batching.continuous": False}


def _transformers_fix(ident: Any, slots: int, model: str) -> tuple[str, tuple[str, ...]]:
    return ("Start `transformers serve` with continuous batching (paged attention; tune with --cb-* flags), or serve "
            "with vLLM or SGLang for production traffic.",
            (f"transformers serve {model} --continuous-batching", f"vllm serve {model}"))


def _generate_single(ident: Any) -> tuple[str, dict[str, Any]] | None:
    if ident.batching is not None and ident.batching.continuous is True:
        return None
    return "a Hugging Face generate() wrapper serves one request at a time", \
        {"engine_identity.batching.continuous": False}


def _reference_default_on(feature: str, version: Version | None, v0: bool, v1_metrics: bool) -> bool | None:
    return True if feature in ("chunked_prefill", "prefix_caching") else None


LLAMACPP = register(Engine(
    name="llama.cpp", display="llama.cpp llama-server", aliases=("llamacpp", "llama-cpp", "llama-server"),
    identity=Identity(metric_prefixes=("llamacpp:",), server_header="llama.cpp", owned_by="llamacpp",
                      process_names=("llama-server",), has_slots=True,
                      launches=(Launch("llama-server"), Launch("llama.cpp-server")),
                      endpoints=(EndpointSignal("/props", ("total_slots", "default_generation_settings"),
                                                version_key="build_info", what="/props has total_slots (llama-server)"),),
                      source="ggml-org/llama.cpp tools/server/server.cpp (Server header, /props, /slots, llamacpp:*)"),
    batching_knob=BatchingKnob(
        flag="--parallel", is_env=False, default="-1 (auto: 4 slots with a unified KV cache; 1 in older builds)",
        meaning="number of server slots: requests decoded together in one batch; -c is split over the slots",
        claims=("llamacpp.parallel-flag", "llamacpp.parallel-auto", "llamacpp.parallel-auto-is-4",
                "llamacpp.cont-batching-default-on")),
    one_at_a_time_fn=_llamacpp_single, batching_fix_fn=_llamacpp_fix, read_batching_fn=_llamacpp_batching,
    metrics=LLAMACPP_METRICS,
    log_markers={
        # Cold-start phases at the default verbosity (3): the weight load covers the context (KV) and the warm-up
        # run too, which llama-server only details at -lv 4; slot set-up follows.
        "startup.weight_load.begin": ((None, "loading model '%s'"),),
        "startup.weight_load.end": ((None, "initializing, n_slots = %d, n_ctx_slot = %d, kv_unified = '%s'"),),
        "startup.kv_alloc.end": ((None, "model loaded"),),
        "startup.api_server.end": ((None, "listening on %s"),),
    },
    notes={"startup_phases": ("llama-server logs the model load, slot set-up and listening address.",
                              ("llamacpp.log-loading", "llamacpp.log-slots", "llamacpp.log-loaded",
                               "llamacpp.log-listening"))},
))

OLLAMA = register(Engine(
    name="ollama", display="Ollama",
    identity=Identity(version_path="/api/version", process_names=("ollama",),
                      launches=(Launch("ollama", ("serve", "runner")),),
                      endpoints=(EndpointSignal("/api/version", ("version",), version_key="version",
                                                what="/api/version answers (Ollama's native API)"),),
                      source="ollama/ollama server/routes.go (GET /api/version -> {\"version\": ...})"),
    batching_knob=BatchingKnob(
        flag="OLLAMA_NUM_PARALLEL", is_env=True, default="1 (since 0.10; 0, auto-select, before)",
        meaning="maximum number of parallel requests per loaded model (OLLAMA_MAX_QUEUE, default 512, queue more)",
        claims=("ollama.num-parallel-default-1", "ollama.num-parallel-default-1-0.10",
                "ollama.num-parallel-default-0-0.9", "ollama.max-queue-512")),
    one_at_a_time_fn=_ollama_single, batching_fix_fn=_ollama_fix, read_batching_fn=_ollama_batching,
))

TRANSFORMERS = register(Engine(
    name="transformers", display="transformers serve", aliases=("transformers-serve",),
    identity=Identity(openapi_paths=("/v1/systemone", "/load_model"),
                      launches=(Launch("transformers", ("serve",)), Launch("transformers-cli", ("serve",))),
                      source="huggingface/transformers src/transformers/cli/serving/server.py (routes)"),
    batches=False,
    batching_knob=BatchingKnob(
        flag="--continuous-batching", is_env=False, default="off",
        meaning="continuous batching with paged attention (configure with --cb-* flags)"),
    one_at_a_time_fn=_transformers_single, batching_fix_fn=_transformers_fix,
    read_batching_fn=_transformers_batching,
))

LMDEPLOY = register(Engine(
    name="lmdeploy", display="LMDeploy", metrics=_vllm_shaped("lmdeploy:"),
    identity=Identity(metric_prefixes=("lmdeploy:",), process_names=("lmdeploy",),
                      launches=(Launch("lmdeploy", ("serve",)),),
                      source="InternLM/lmdeploy lmdeploy/metrics/loggers.py (lmdeploy:num_requests_running, ...)"),
))

TRTLLM = register(Engine(
    name="trtllm", display="TensorRT-LLM trtllm-serve", aliases=("tensorrt-llm", "tensorrt_llm", "trtllm-serve"),
    metrics=_vllm_shaped("tensorrt_llm:"),
    identity=Identity(metric_prefixes=("tensorrt_llm:", "trtllm_"), version_path="/version",
                      process_names=("trtllm-serve",), launches=(Launch("trtllm-serve"),),
                      source="NVIDIA/TensorRT-LLM docs/source/commands/trtllm-serve.rst (/health, /metrics, /version); "
                             "tensorrt_llm/serve/metrics/metrics.py (tensorrt_llm:* names)"),
))

REFERENCE = register(Engine(
    name="reference", display="triage reference engine", aliases=("triage-reference",),
    identity=Identity(version_path="/version", exports_metrics_of="vllm", launches=(Launch("triage", ("serve",)),),
                      endpoints=(EndpointSignal("/version", equals=(("engine", "triage-reference"),),
                                                version_key="version", what="/version says engine=triage-reference"),),
                      source="reference_engine/server.py (this repository: /version carries engine=ENGINE_NAME)"),
    default_on_fn=_reference_default_on, flags_like="vllm",
    log_markers={
        # reference_engine/engine.py and server.py (this repository) log each phase with its seconds.
        "startup.weight_load.begin": ((None, "Loading weights (load format %s)"),),
        "startup.weight_load.end": ((None, "Loading weights took %.3f seconds, %d bytes"),),
        "startup.kv_alloc.end": ((None, "KV cache allocation took %.3f seconds, %d bytes"),),
        "startup.warmup.end": ((None, "Warm-up forward pass took %.3f seconds"),),
        "startup.api_server.begin": ((None, "Starting %s API server on"),),
        "startup.api_server.end": ((None, "Started server process"),),     # uvicorn's, which it serves with
    },
))

HF_GENERATE = register(Engine(name="hf-generate", display="transformers generate()", batches=False,
                              one_at_a_time_fn=_generate_single))
