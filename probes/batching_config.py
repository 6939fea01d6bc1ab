"""How many requests a non-vLLM engine may batch, read from its command line and environment.
Flags and defaults from each engine's source (the engine modules in triage/engines/ cite them):
- llama.cpp `llama-server`: `-np/--parallel N` (env LLAMA_ARG_N_PARALLEL; -1 = auto), `-c/--ctx-size`
  split over the slots, `-cb/--cont-batching` on by default, `-nocb/--no-cont-batching` turns it off
  (common/arg.cpp);
- Ollama: OLLAMA_NUM_PARALLEL (1 since 0.10; 0 = auto before) and OLLAMA_MAX_QUEUE (default 512) (envconfig/config.go);
- `transformers serve`: `--continuous-batching`, off by default (src/transformers/cli/serve.py).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from triage.engines import get


@dataclass(frozen=True, slots=True)
class BatchingSettings:
    slots: int | None = None               # requests served at once; None = not set (engine default)
    continuous: bool | None = None          # continuous batching on/off; None = engine default
    ctx_tokens: int | None = None           # llama.cpp -c (total, before the split over slots)
    max_queue: int | None = None            # Ollama OLLAMA_MAX_QUEUE
    evidence: tuple[str, ...] = ()


def read_batching(engine: str | None, argv: Sequence[str], env: Mapping[str, str]) -> BatchingSettings:
    """The engine's own reading of its argv and environment (triage/engines/), or nothing set."""
    module = get(engine)
    if module is None or module.read_batching_fn is None:
        return BatchingSettings()
    return BatchingSettings(**module.read_batching_fn([str(a) for a in argv], env))
