"""triage's own reference engine (`triage serve`): it takes vLLM's flag names and exports vLLM's metric names,
and says what it is on /version."""
from __future__ import annotations

from triage.engines.base import EndpointSignal, Engine, Identity, Knob, Launch, Since, Version
from triage.engines.reference_log import LOG_FACTS
from triage.engines.registry import register


def _reference_default_on(feature: str, version: Version | None, v0: bool, v1_metrics: bool) -> bool | None:
    return True if feature in ("chunked_prefill", "prefix_caching") else None


REFERENCE = register(Engine(
    name="reference", display="triage reference engine", aliases=("triage-reference",),
    log_facts=LOG_FACTS, startup_order=("weight_load", "kv_alloc", "warmup", "compile", "api_server"),
    identity=Identity(version_path="/version", exports_metrics_of="vllm", launches=(Launch("triage", ("serve",)),),
                      endpoints=(EndpointSignal("/version", equals=(("engine", "triage-reference"),),
                                                version_key="version", what="/version says engine=triage-reference"),),
                      source="reference_engine/serve/server.py (this repository: /version carries engine=ENGINE_NAME)"),
    default_on_fn=_reference_default_on, flags_like="vllm",
    knobs={
        # Cold start (rules ENG008, ENG009, ENG011): the compiled decode step and where its compiled code is kept.
        "compile_cache_dir": (Since(None, Knob("--compile-cache-dir", claims=("reference.compile-cache-dir",))),),
        "eager_mode": (Since(None, Knob("--compile", "off", claims=("reference.compile-off",))),),
    },
    log_markers={
        # reference_engine/engine/llm_engine.py and serve/server.py (this repository) log each phase with its seconds.
        "startup.weight_load.begin": ((None, "Loading weights (load format %s)"),),
        "startup.weight_load.end": ((None, "Loading weights took %.3f seconds, %d bytes"),),
        "startup.kv_alloc.end": ((None, "KV cache allocation took %.3f seconds, %d bytes"),),
        "startup.warmup.end": ((None, "Warm-up forward pass took %.3f seconds"),),
        # reference_engine/engine/compiled_step.py, with --compile auto|on.
        "startup.compile.begin": ((None, "Compiling the decode step for batch sizes %s (Inductor cache %s)"),),
        "startup.compile.end": ((None, "Compiling the decode step took %.3f seconds"),),
        "startup.api_server.begin": ((None, "Starting %s API server on"),),
        "startup.api_server.end": ((None, "Started server process"),),     # uvicorn's, which it serves with
    },
))
