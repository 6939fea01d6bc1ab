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


@dataclass(frozen=True, slots=True)
class BatchingSettings:
    slots: int | None = None               # requests served at once; None = not set (engine default)
    continuous: bool | None = None          # continuous batching on/off; None = engine default
    ctx_tokens: int | None = None           # llama.cpp -c (total, before the split over slots)
    max_queue: int | None = None            # Ollama OLLAMA_MAX_QUEUE
    evidence: tuple[str, ...] = ()


def _flag_value(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    value = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def _int(text: str | None) -> int | None:
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if -1 <= value <= 1_000_000_000 else None


def read_batching(engine: str | None, argv: Sequence[str], env: Mapping[str, str]) -> BatchingSettings:
    args = [str(a) for a in argv]
    if engine == "llama.cpp":
        raw = _flag_value(args, ("-np", "--parallel"))
        slots = _int(raw) if raw is not None else _int(env.get("LLAMA_ARG_N_PARALLEL"))
        cont: bool | None = None
        if "-nocb" in args or "--no-cont-batching" in args:
            cont = False
        elif "-cb" in args or "--cont-batching" in args:
            cont = True
        ctx = _int(_flag_value(args, ("-c", "--ctx-size")) or env.get("LLAMA_ARG_CTX_SIZE"))
        ev = tuple(e for e in (f"--parallel {slots}" if slots is not None else None,
                               f"-c {ctx}" if ctx is not None else None,
                               "--no-cont-batching" if cont is False else None) if e)
        return BatchingSettings(slots=slots if slots and slots > 0 else None, continuous=cont,
                                ctx_tokens=ctx, evidence=ev)
    if engine == "ollama":
        slots = _int(env.get("OLLAMA_NUM_PARALLEL"))
        queue = _int(env.get("OLLAMA_MAX_QUEUE"))
        ev = tuple(f"{k}={env[k]}" for k in ("OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_QUEUE") if k in env)
        return BatchingSettings(slots=slots if slots and slots > 0 else None, max_queue=queue, evidence=ev)
    if engine == "transformers":
        on = "--continuous-batching" in args
        off = "--no-continuous-batching" in args
        return BatchingSettings(continuous=True if on and not off else False,
                                evidence=("--continuous-batching",) if on and not off else ())
    return BatchingSettings()
