"""Ollama: how triage recognises it and the variable that bounds how many requests it runs at once."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import triage.engines.truth as truth
from triage.engines.argv import bounded_int
from triage.engines.base import BatchingKnob, EndpointSignal, Engine, Identity, Launch
from triage.engines.ollama_log import LOG_FACTS
from triage.engines.registry import register


def _ollama_batching(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """OLLAMA_NUM_PARALLEL and OLLAMA_MAX_QUEUE (envconfig/config.go)."""
    slots = bounded_int(env.get("OLLAMA_NUM_PARALLEL"))
    queue = bounded_int(env.get("OLLAMA_MAX_QUEUE"))
    ev = tuple(f"{k}={env[k]}" for k in ("OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_QUEUE") if k in env)
    return {"slots": slots if slots and slots > 0 else None, "max_queue": queue, "evidence": ev}


def _ollama_single(ident: Any) -> tuple[str, dict[str, Any]] | None:
    if ident.batching is not None and ident.batching.slots == 1:
        return "Ollama runs with OLLAMA_NUM_PARALLEL=1", {"engine_identity.batching.slots": 1}
    return None


def _default_history(variable: str, meaning: dict[object, str] | None = None) -> str:
    """'1 since 0.10; 0, auto-select, from 0.2': the variable's default and its last change, from the tables
    (envconfig/config.go at each minor's last tag)."""
    steps = truth.default_steps("ollama", variable)
    now = steps[-1][1]
    if len(steps) == 1:
        return f"{now}"
    (was, old), (since, _) = steps[-2], steps[-1]
    said = f", {meaning[old]}," if meaning and old in meaning else ""
    earlier = f"from {truth.minor(was)}" if len(steps) > 2 else "before"
    return f"{now} since {truth.minor(since)}; {old}{said} {earlier}"


NUM_PARALLEL_DEFAULT = _default_history("OLLAMA_NUM_PARALLEL", {0: "auto-select"})
MAX_QUEUE_DEFAULT = _default_history("OLLAMA_MAX_QUEUE")


def _ollama_fix(ident: Any, slots: int, model: str) -> tuple[str, tuple[str, ...]]:
    return (f"Let Ollama run requests in parallel per model with OLLAMA_NUM_PARALLEL (default: "
            f"{NUM_PARALLEL_DEFAULT}).", (f"OLLAMA_NUM_PARALLEL={slots} ollama serve",))


OLLAMA = register(Engine(
    name="ollama", display="Ollama",
    log_facts=LOG_FACTS,
    identity=Identity(version_path="/api/version", launches=(Launch("ollama", ("serve", "runner")),),
                      endpoints=(EndpointSignal("/api/version", ("version",), version_key="version",
                                                what="/api/version answers (Ollama's native API)"),),
                      source="ollama/ollama server/routes.go (GET /api/version -> {\"version\": ...})"),
    batching_knob=BatchingKnob(
        flag="OLLAMA_NUM_PARALLEL", is_env=True, default=NUM_PARALLEL_DEFAULT,
        meaning=f"maximum number of parallel requests per loaded model (OLLAMA_MAX_QUEUE, default {MAX_QUEUE_DEFAULT}, "
                "queue more)",
        claims=("ollama.num-parallel-default-1", "ollama.num-parallel-default-1-0.10",
                "ollama.num-parallel-default-0-0.9", "ollama.max-queue-512")),
    one_at_a_time_fn=_ollama_single, batching_fix_fn=_ollama_fix, read_batching_fn=_ollama_batching,
))
