"""How each serving engine shows itself on the wire and in `ps`, and the knob that sets how many
requests it batches. Pure data, each fact with the engine source it was read from.

The identity probe (triage/probes/engine_identity.py) reads these signals; the rules read the
batching knobs to print the engine's own fix.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchingKnob:
    """The setting that bounds how many requests an engine runs at once."""

    flag: str                     # as typed on the command line, or an environment variable
    is_env: bool                  # True: an environment variable of the server process
    default: str                  # the engine's default, as its source states it
    meaning: str
    source: str                   # repository / file (and commit where it was read)


@dataclass(frozen=True, slots=True)
class EngineSignals:
    name: str                     # triage's engine id
    display: str
    metric_prefixes: tuple[str, ...] = ()
    server_header: str | None = None          # the exact `Server:` response header value
    version_path: str | None = None           # GET path answering {"version": ...}
    openapi_paths: tuple[str, ...] = ()       # routes in /openapi.json only this engine serves
    owned_by: str | None = None               # `owned_by` of its /v1/models entries
    batches: bool = True                      # batches concurrent requests with its defaults
    knob: BatchingKnob | None = None
    source: str = ""


LLAMACPP_PARALLEL = BatchingKnob(
    flag="--parallel", is_env=False, default="-1 (auto: 4 slots in current builds; 1 in older builds)",
    meaning="number of server slots: requests decoded together in one batch; -c is split over the slots",
    source="ggml-org/llama.cpp common/arg.cpp (-np, --parallel; env LLAMA_ARG_N_PARALLEL), tools/server/README.md")
OLLAMA_NUM_PARALLEL = BatchingKnob(
    flag="OLLAMA_NUM_PARALLEL", is_env=True, default="0 (auto-select)",
    meaning="maximum number of parallel requests per loaded model",
    source="ollama/ollama envconfig/config.go @000ce020 (NumParallel; OLLAMA_MAX_QUEUE default 512)")
TRANSFORMERS_CB = BatchingKnob(
    flag="--continuous-batching", is_env=False, default="off",
    meaning="continuous batching with paged attention (configure with --cb-* flags)",
    source="huggingface/transformers src/transformers/cli/serve.py (transformers 5.x `serve`)")

ENGINES: dict[str, EngineSignals] = {s.name: s for s in (
    EngineSignals("vllm", "vLLM", metric_prefixes=("vllm:",), version_path="/version",
                  source="vllm-project/vllm vllm/entrypoints/openai/api_server.py (/version), vllm/v1/metrics/loggers.py"),
    EngineSignals("sglang", "SGLang", metric_prefixes=("sglang:",),
                  openapi_paths=("/get_server_info", "/server_info", "/flush_cache"),
                  source="sgl-project/sglang python/sglang/srt/entrypoints/http_server.py"),
    EngineSignals("tgi", "TGI", metric_prefixes=("tgi_",),
                  source="huggingface/text-generation-inference router/src/server.rs (/info, tgi_* metrics)"),
    EngineSignals("llama.cpp", "llama.cpp llama-server", metric_prefixes=("llamacpp:",),
                  server_header="llama.cpp", owned_by="llamacpp", knob=LLAMACPP_PARALLEL,
                  source="ggml-org/llama.cpp tools/server/server.cpp (Server header, /props, /slots, llamacpp:*)"),
    EngineSignals("ollama", "Ollama", version_path="/api/version", knob=OLLAMA_NUM_PARALLEL,
                  source="ollama/ollama server/routes.go (GET /api/version -> {\"version\": ...})"),
    EngineSignals("transformers", "transformers serve", openapi_paths=("/v1/systemone", "/load_model"),
                  batches=False, knob=TRANSFORMERS_CB,
                  source="huggingface/transformers src/transformers/cli/serving/server.py (routes)"),
    EngineSignals("lmdeploy", "LMDeploy", metric_prefixes=("lmdeploy:",),
                  source="InternLM/lmdeploy lmdeploy/metrics/loggers.py (lmdeploy:num_requests_running, ...)"),
    EngineSignals("trtllm", "TensorRT-LLM trtllm-serve", metric_prefixes=("tensorrt_llm:", "trtllm_"),
                  version_path="/version",
                  source="NVIDIA/TensorRT-LLM docs/source/commands/trtllm-serve.rst (/health, /metrics, /version); "
                         "tensorrt_llm/serve/metrics/metrics.py (tensorrt_llm:* names)"),
    EngineSignals("reference", "triage reference engine", version_path="/version",
                  source="reference_engine/server.py (this repository: /version carries engine=ENGINE_NAME)"),
)}


def signals(engine: str | None) -> EngineSignals | None:
    return ENGINES.get(engine) if engine else None
