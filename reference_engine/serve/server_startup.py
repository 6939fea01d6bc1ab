"""`triage serve` start-up: the listening socket, vLLM-shaped log lines (the compute dtype and why
included), and the cache-config labels of /metrics."""
from __future__ import annotations

import logging
import socket
import sys
from typing import Any

from triage.core.errors import UsageError

log = logging.getLogger("triage.serve")


def configure_logging(level: str) -> None:
    """vLLM-shaped lines on stderr, `INFO 11-21 15:07:28 [server.py:312] message`, for this server and
    the engine (both log under the `triage` logger)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
                                           datefmt="%m-%d %H:%M:%S"))
    root = logging.getLogger("triage")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before loading the model, so a busy port fails in a second with a clear message."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket says it is TCP. Without it each SSE chunk after the headers waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}. Pick another --port "
                         "(0 picks a free one) or stop whatever holds it.") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def log_startup(engine: Any, model: Any, options: Any) -> None:
    stats = engine.stats()
    capacity = int(stats.kv_cache_tokens_capacity)
    log.info("model=%s served as %r, dtype=%s, attention=%s, max_model_len=%d", model.root, model.name,
             stats.dtype, stats.attention_backend, model.max_model_len)
    if getattr(stats, "dtype_note", ""):
        log.info("compute dtype %s", stats.dtype_note)
    log.info("KV cache: %d blocks of %d tokens, %s bytes, dtype %s", stats.num_kv_blocks_total,
             stats.block_size, f"{int(stats.kv_cache_bytes):,}",
             getattr(stats, "kv_cache_dtype", "") or "same as the model")
    log.info("KV cache size: %s tokens", f"{capacity:,}")
    log.info("Maximum concurrency for %s tokens per request: %.2fx", f"{model.max_model_len:,}",
             capacity / model.max_model_len if model.max_model_len else 0.0)
    log.info("API key required: %s", "yes" if options.api_key else "no")


def safe_argv() -> list[str]:
    from triage.core.redact import redact_argv
    return redact_argv(["triage", *sys.argv[1:]])


def cache_config_info(engine: Any, config: Any) -> dict[str, object]:
    """Labels of vllm:cache_config_info, named as vLLM's CacheConfig names them."""
    stats = engine.stats()
    return {
        "block_size": stats.block_size,
        "cache_dtype": getattr(config, "kv_cache_dtype", "auto"),
        "enable_prefix_caching": bool(getattr(config, "enable_prefix_caching", False)),
        "gpu_memory_utilization": getattr(config, "gpu_memory_utilization", None),
        "num_gpu_blocks": stats.num_kv_blocks_total,
        "num_gpu_blocks_override": getattr(config, "num_kv_blocks", None),
        "kv_cache_memory_bytes": stats.kv_cache_bytes,
        "num_cpu_blocks": 0,
        "swap_space_bytes": 0,
    }
