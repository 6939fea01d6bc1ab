"""`triage serve`: the reference engine as an OpenAI-compatible server with vLLM-named /metrics."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer

from triage.cli_support import OptionSpec, funnel, option_groups
from triage.core.errors import UsageError, require_extra

# engine_config is torch-free (the CLI loads it at start-up anyway): the choices and defaults are the engine's own.
from triage.reference_engine.engine.engine_config import (
    COMPILE_MODES,
    DTYPES,
    KV_CACHE_DTYPES,
    KV_LAYOUTS,
    QUANTIZATIONS,
    SCHEDULERS,
    EngineConfig,
)

_ATTENTION = ("auto", "naive", "tiled", "sdpa", "triton")   # the engine checks its backend registry at load
_E = EngineConfig()


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"{name} {value!r} is not one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class ServeRequest:
    """The command line's options, as given (in --help's order)."""
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = _E.model
    served_model_name: str | None = None
    dtype: str = _E.dtype
    device: str = _E.device
    max_model_len: int | None = _E.max_model_len
    max_num_seqs: int = _E.max_num_seqs
    max_num_batched_tokens: int = _E.max_num_batched_tokens
    block_size: int = _E.block_size
    kv_cache_bytes: int | None = _E.kv_cache_bytes
    num_kv_blocks: int | None = _E.num_kv_blocks
    gpu_memory_utilization: float = _E.gpu_memory_utilization
    kv_cache_dtype: str = _E.kv_cache_dtype
    quantization: str = _E.quantization
    scheduler: str = _E.scheduler
    kv_layout: str = _E.kv_layout
    attention: str = _E.attention
    enable_prefix_caching: bool = _E.enable_prefix_caching
    enable_chunked_prefill: bool = _E.enable_chunked_prefill
    seed: int = _E.seed
    compile: str = _E.compile
    compile_cache_dir: str | None = _E.compile_cache_dir
    api_key: str | None = None
    max_request_body_bytes: int = 8 * 1024 * 1024
    access_log: bool = False
    log_level: str = "info"
    inject_delay_ms: float = 0.0


SERVE_OPTIONS: OptionSpec = {
    "host": (str, typer.Option(None, "--host", envvar="TRIAGE_SERVE_HOST",
        help="Address to listen on. Loopback unless you ask for more.")),
    "port": (int, typer.Option(None, "--port", envvar="TRIAGE_SERVE_PORT", help="Port; 0 picks a free one.")),
    "model": (str, typer.Option(None, "--model", help="A preset (tiny, small, ...) or a local model directory; nothing is downloaded.")),
    "served_model_name": (str, typer.Option(None, "--served-model-name",
        help="Name clients use in `model`; defaults to --model.")),
    "dtype": (str, typer.Option(None, "--dtype", help="auto, float32, bfloat16 or float16.")),
    "device": (str, typer.Option(None, "--device", help="cpu, cuda or cuda:N.")),
    "max_model_len": (int, typer.Option(_E.max_model_len, "--max-model-len", help="Context limit; defaults to the model's.")),
    "max_num_seqs": (int, typer.Option(None, "--max-num-seqs", help="Most requests in one batch.")),
    "max_num_batched_tokens": (int, typer.Option(None, "--max-num-batched-tokens",
        help="Most tokens one engine step may process.")),
    "block_size": (int, typer.Option(None, "--block-size", help="Tokens per KV cache block.")),
    "kv_cache_bytes": (int, typer.Option(_E.kv_cache_bytes, "--kv-cache-bytes",
        help="KV cache budget in bytes (instead of --gpu-memory-utilization).")),
    "num_kv_blocks": (int, typer.Option(_E.num_kv_blocks, "--num-kv-blocks", "--num-gpu-blocks-override",
        help="Exact number of KV blocks; overrides the byte budget.")),
    "gpu_memory_utilization": (float, typer.Option(None, "--gpu-memory-utilization",
        help="Share of GPU memory for weights + KV cache.")),
    "kv_cache_dtype": (str, typer.Option(None, "--kv-cache-dtype",
        help="auto (the model dtype), float32, bfloat16, float16, or fp8 / fp8_e4m3 "
        "(e4m3 values with a per-token scale: about half of bf16's bytes).")),
    "quantization": (str, typer.Option(None, "--quantization",
        help="Weight-only quantization at load: none, fp8 (e4m3, per-channel scale) or "
        "int4 (group 128). On a CPU, packed-weight kernels where they measure faster.")),
    "scheduler": (str, typer.Option(None, "--scheduler", help="continuous or static batching.")),
    "kv_layout": (str, typer.Option(None, "--kv-layout", help="paged or contiguous KV cache.")),
    "attention": (str, typer.Option(None, "--attention", help="auto, naive, tiled, sdpa or triton (CUDA + triton only; auto picks it there).")),
    "enable_prefix_caching": (bool, typer.Option(None, "--enable-prefix-caching/--no-enable-prefix-caching",
        help="Reuse KV blocks of shared prompt prefixes.")),
    "enable_chunked_prefill": (bool, typer.Option(None, "--enable-chunked-prefill/--no-enable-chunked-prefill",
        help="Split long prefills across steps.")),
    "seed": (int, typer.Option(None, "--seed", help="Seed for weights of presets and for sampling.")),
    "compile": (str, typer.Option(None, "--compile",
        help="The decode step: off (eager), auto (torch.compile where a short probe measures it faster; "
        "else eager, with the reason in the log) or on (compiled, or an error). Compiling adds start-up "
        "seconds, fewer on a second start with the same cache.")),
    "compile_cache_dir": (str, typer.Option(_E.compile_cache_dir, "--compile-cache-dir",
        envvar="TORCHINDUCTOR_CACHE_DIR", show_envvar=True,
        help="Where compiled code is kept between starts; put it on a persistent volume. "
        "Defaults to torch's own.")),
    "api_key": (str, typer.Option(None, "--api-key", envvar=["TRIAGE_API_KEY", "VLLM_API_KEY"],
        show_envvar=True, show_default=False,
        help="Require `Authorization: Bearer KEY` on /v1/*. Prefer the env var: "
        "a flag is visible in the process list.")),
    "max_request_body_bytes": (int, typer.Option(None, "--max-request-body-bytes",
        help="Larger bodies get HTTP 413.")),
    "access_log": (bool, typer.Option(None, "--access-log/--no-access-log", help="Log every HTTP request.")),
    "log_level": (str, typer.Option(None, "--log-level", help="debug, info, warning or error.")),
    "inject_delay_ms": (float, typer.Option(None, "--inject-delay-ms", min=0.0,
        help="Test hook: sleep this long before each generation (a known slowdown).")),
}


@funnel
@option_groups(req=(ServeRequest, SERVE_OPTIONS))
def serve(req: ServeRequest) -> int:
    """Serve the reference engine with an OpenAI-compatible API and vLLM-named /metrics.

    Endpoints: /v1/completions, /v1/chat/completions (stream and non-stream), /v1/models, /health,
    /version, /metrics. Stops cleanly on Ctrl-C or SIGTERM.
    """
    require_extra("engine", "triage serve")
    from triage.reference_engine.serve.server import run_server

    return run_server(*_engine_and_server(req))


def _engine_and_server(req: ServeRequest) -> tuple[Any, Any]:
    """(the EngineConfig, the ServerOptions), every option checked."""
    from triage.reference_engine.serve.server import ServerOptions

    if req.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise UsageError(f"--log-level {req.log_level!r} is not one of debug, info, warning, error")
    if not 0 <= req.port <= 65535:
        raise UsageError(f"--port {req.port} is not a port number (0-65535)")
    try:
        config = EngineConfig(
            model=req.model, dtype=_choice("--dtype", req.dtype, DTYPES), device=req.device,
            max_model_len=req.max_model_len, max_num_seqs=req.max_num_seqs,
            max_num_batched_tokens=req.max_num_batched_tokens, block_size=req.block_size,
            kv_cache_bytes=req.kv_cache_bytes, num_kv_blocks=req.num_kv_blocks,
            gpu_memory_utilization=req.gpu_memory_utilization,
            kv_cache_dtype=_choice("--kv-cache-dtype", req.kv_cache_dtype, KV_CACHE_DTYPES),
            quantization=_choice("--quantization", req.quantization, QUANTIZATIONS),
            scheduler=_choice("--scheduler", req.scheduler, SCHEDULERS),
            kv_layout=_choice("--kv-layout", req.kv_layout, KV_LAYOUTS),
            attention=_choice("--attention", req.attention, _ATTENTION),
            enable_prefix_caching=req.enable_prefix_caching, enable_chunked_prefill=req.enable_chunked_prefill,
            seed=req.seed, compile=_choice("--compile", req.compile, COMPILE_MODES),
            compile_cache_dir=req.compile_cache_dir)
    except (ValueError, TypeError) as e:
        raise UsageError(f"invalid engine settings: {e}") from None
    options = ServerOptions(host=req.host, port=req.port, served_model_name=req.served_model_name,
                            api_key=req.api_key or None, max_request_body_bytes=req.max_request_body_bytes,
                            access_log=req.access_log, log_level=req.log_level.lower(),
                            inject_delay_ms=req.inject_delay_ms)
    return config, options
