"""`transformers serve` and a bare generate() wrapper: neither batches with its defaults."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from triage.engines.base import BatchingKnob, Engine, Identity, Launch
from triage.engines.registry import register


def _transformers_batching(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """`transformers serve --continuous-batching`, off by default (src/transformers/cli/serve.py)."""
    on = "--continuous-batching" in argv and "--no-continuous-batching" not in argv
    return {"continuous": on, "evidence": ("--continuous-batching",) if on else ()}


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

HF_GENERATE = register(Engine(name="hf-generate", display="transformers generate()", batches=False,
                              one_at_a_time_fn=_generate_single))
