"""Attention backends behind one call signature (see base.py). ``get_backend('auto', device)`` picks
the fastest one available: on a CUDA device that is the Triton paged-attention kernel when triton
imports and a GPU is present (registered on first use), else SDPA. Other modules can
``register_backend``."""
from __future__ import annotations

import logging
from collections.abc import Callable

from triage.core.errors import EngineError
from triage.reference_engine.layers.attention.base import AttentionBackend, AttentionMetadata
from triage.reference_engine.layers.attention.naive import NaiveAttention
from triage.reference_engine.layers.attention.sdpa import SdpaAttention
from triage.reference_engine.layers.attention.tiled import TiledAttention

log = logging.getLogger("triage.reference_engine")

_FACTORIES: dict[str, Callable[[], AttentionBackend]] = {
    "naive": NaiveAttention,
    "tiled": TiledAttention,
    "sdpa": SdpaAttention,
}
# Preference order for "auto", fastest first; a registered GPU backend goes in front on CUDA.
_AUTO_ORDER: dict[str, list[str]] = {"cpu": ["sdpa", "tiled", "naive"], "cuda": ["sdpa", "tiled", "naive"]}


def register_backend(name: str, factory: Callable[[], AttentionBackend], prefer_on: str | None = None) -> None:
    _FACTORIES[name] = factory
    if prefer_on is not None:
        order = _AUTO_ORDER.setdefault(prefer_on, [])
        if name not in order:
            order.insert(0, name)


def available_backends() -> list[str]:
    return list(_FACTORIES)


def _register_gpu_backends(device: str) -> None:
    """On a CUDA device, add the Triton backend (first for ``auto``) if Triton can run there. Import-
    guarded: without triton or a GPU this registers nothing, and ``triton`` is never imported on CPU."""
    if "triton" in _FACTORIES:
        return
    from triage.reference_engine.layers.attention.triton_backend import register_triton_backend

    reason = register_triton_backend(device)
    if reason is not None:
        log.debug("attention backend 'triton' not available: %s", reason)


def get_backend(name: str, device: str = "cpu") -> AttentionBackend:
    if device.startswith("cuda") and name in ("auto", "triton"):
        _register_gpu_backends(device)
    if name == "auto":
        kind = "cuda" if device.startswith("cuda") else "cpu"
        name = _AUTO_ORDER[kind][0]
    if name == "sdpa" and not device.startswith("cuda"):
        from triage.reference_engine.layers.kernels.decode_attention import kernel

        kernel()        # built (once, cached on disk) at start-up, not at a user's first decode step
    if name not in _FACTORIES:
        raise EngineError(f"attention backend '{name}' is not available here; "
                          f"choose one of: auto, {', '.join(_FACTORIES)}")
    return _FACTORIES[name]()


__all__ = ["AttentionBackend", "AttentionMetadata", "available_backends", "get_backend", "register_backend"]
