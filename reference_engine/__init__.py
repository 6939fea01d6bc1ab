"""The bundled reference engine: a small real PyTorch LLM engine (paged KV cache with prefix caching,
attention backends, continuous batching) with "before" versions of each piece.

One subpackage per job, as nano-vllm: ``engine/`` (LLMEngine, scheduler, block manager, runner),
``layers/`` (attention, quantization, kernels, KV cache format, sampling), ``models/`` (config, the
decoder, weights, tokenizers), ``host/`` (what this machine delivers) and ``serve/`` (`triage serve`).

This package init stays torch-free (config, block manager and scheduler import without torch);
``LLMEngine`` and friends load lazily on first access.
"""
from __future__ import annotations

if __name__ != "triage.reference_engine":  # one package, one import name: `reference_engine` from the repository root is a second copy
    raise ImportError(f"import triage.reference_engine, not {__name__}: this folder installs as triage.reference_engine, and a second "
                      "name would load a second copy (a second registry)")

from triage.reference_engine.engine.engine_config import EngineConfig
from triage.reference_engine.layers.sampling_params import SamplingParams
from triage.reference_engine.models.model_config import PRESETS, ModelConfig, load_model_config

_LAZY = {"LLMEngine": "triage.reference_engine.engine.llm_engine", "RequestOutput": "triage.reference_engine.engine.request_outputs",
         "Completion": "triage.reference_engine.engine.request_outputs", "EngineStats": "triage.reference_engine.engine.request_outputs",
         "StepStats": "triage.reference_engine.engine.request_outputs", "RequestTimes": "triage.reference_engine.engine.sequence"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'reference_engine' has no attribute {name!r}")


__all__ = ["PRESETS", "EngineConfig", "ModelConfig", "SamplingParams", "load_model_config", *_LAZY]
