"""Switch an already built LLMEngine to an FP8 (e4m3) KV cache.

The FP8 KV cache is an engine feature: ``EngineConfig(kv_cache_dtype="fp8")`` (or ``"fp8_e4m3"``)
sizes and allocates it from the start (more blocks for the same byte budget); see kv_cache.py.
``enable_fp8_kv_cache(engine)`` is the thin after-the-fact variant the baseline uses to compare two
engines with the *same* number of blocks: it re-allocates the cache in the fp8 format.
"""
from __future__ import annotations

from reference_engine.kv_cache import Fp8KvFormat
from reference_engine.quant.kv_fp8 import SCALE_BYTES, pack_kv, unpack_kv
from triage.errors import EngineError

__all__ = ["SCALE_BYTES", "enable_fp8_kv_cache", "pack_kv", "unpack_kv"]


def enable_fp8_kv_cache(engine) -> int:
    """Switch a freshly built engine (no requests yet) to an e4m3 KV cache. Returns the new cache bytes."""
    if engine.has_unfinished():
        raise EngineError("enable the FP8 KV cache before adding requests: the cache is re-allocated")
    if isinstance(engine.runner.kv_format, Fp8KvFormat):
        raise EngineError("this engine already has an FP8 KV cache")
    engine.set_kv_format(Fp8KvFormat())
    return engine.runner.kv_cache_bytes
