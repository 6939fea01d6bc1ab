"""The engines registry: each engine module registers one Engine, as each rule registers itself with @rule.

    from triage.engines import get, normalise
    get("tgi").knob("max_num_seqs", "3.3.7")     # NoEquivalent: ignored while prefill chunking is on
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from triage.core.registry import Registry
from triage.engines.base import Engine

# Each engine module of this package registers its Engine by being imported (triage.core.registry).
ENGINES: Registry[Engine] = Registry("engine", lambda engine: engine.name, packages=("triage.engines",))

# A server that answers the OpenAI API but that no engine module recognises.
GENERIC = "openai-compatible"
# The engine triage assumes where nothing identifies one (a command line without a known launcher, `triage plan`):
# vLLM, the most common launcher, whose flags the reference engine also takes. Every such assumption asks
# `assumed()`, so the policy lives here alone.
_ASSUMED = "vllm"


def register(engine: Engine) -> Engine:
    return ENGINES.add(engine)


def get(name: str | None) -> Engine | None:
    """The engine called `name` (any spelling `normalise` knows), or None."""
    key = normalise(name)
    return ENGINES.get(key) if key else None


def engines() -> tuple[Engine, ...]:
    return tuple(sorted(ENGINES, key=lambda e: (e.rank, e.name)))


def names() -> tuple[str, ...]:
    return tuple(e.name for e in engines())


def assumed() -> Engine:
    """The engine triage assumes when nothing names one (see _ASSUMED)."""
    return ENGINES[_ASSUMED]


def known_names() -> tuple[str, ...]:
    """Every name a user may give for an engine (triage.toml's `[target] engine`): each registered engine's name
    and aliases, and GENERIC."""
    return tuple(dict.fromkeys([n for e in engines() for n in (e.name, *e.aliases)] + [GENERIC]))


def with_flag_tables() -> tuple[Engine, ...]:
    """The engines whose fixes are checked against per-version flag tables (they have a launcher)."""
    return tuple(e for e in engines() if e.launcher is not None)


def normalise(name: str | None) -> str | None:
    """triage's id for an engine name as a probe, a report or a user spells it; unknown names pass through
    lower-cased (a report may name an engine triage has no module for)."""
    if not name:
        return None
    n = str(name).strip().lower()
    for engine in ENGINES:
        if n == engine.name or n in engine.aliases:
            return engine.name
    for engine in ENGINES:
        if any(n.startswith(a) for a in (engine.name, *engine.aliases) if len(a) >= 4):
            return engine.name
    return n


def launched_by(argv: Sequence[str]) -> Engine | None:
    """The engine a command line launches, from each engine's launch forms: the words, not file names in paths
    (`/usr/bin/vllm serve M`, `python -m sglang.launch_server`)."""
    args = [str(a) for a in argv]
    bases = [os.path.basename(a).lower() for a in args]
    for i, (arg, base) in enumerate(zip(args, bases, strict=True)):
        following = bases[i + 1] if i + 1 < len(bases) else ""
        for engine in engines():
            if any(launch.matches(arg, base, following) for launch in engine.identity.launches):
                return engine
    return None
