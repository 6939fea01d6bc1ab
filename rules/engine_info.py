"""The server's engine as the rules see it: its name and version, and what that version turns on by default.
The facts themselves live in the engines registry (triage/engines/), each cited to the engine's source."""
from __future__ import annotations

import re
from dataclasses import dataclass

from triage.engines import get, normalise
from triage.rules.engine_flags import DISABLING_FLAGS, KNOBS, LAUNCHERS, Knob, engine_flags, render

__all__ = ["DISABLING_FLAGS", "FLAGS", "LAUNCHERS", "EngineInfo",
           "engine_flags", "flag", "normalise_engine", "parse_version"]

FLAGS = {knob: {e: (k.flag if k.value is None else f"{k.flag} {k.value}") for e, k in per.items()
                if isinstance(k, Knob)} for knob, per in KNOBS.items()}

_VERSION_RE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'0.8.5.post1' -> (0, 8, 5); 'v3.0.1' -> (3, 0, 1); None or garbage -> None."""
    if not text:
        return None
    m = _VERSION_RE.search(str(text))
    if not m:
        return None
    return tuple(int(g) if g is not None else 0 for g in m.groups())  # type: ignore[return-value]


def normalise_engine(name: str | None) -> str | None:
    return normalise(name)


@dataclass(frozen=True, slots=True)
class EngineInfo:
    name: str | None            # an engine id of triage/engines (vllm, sglang, tgi, llama.cpp, ...) or None
    version: str | None
    v0: bool = False            # vLLM running the V0 engine (metrics say so, or version < 0.8)
    v1_metrics: bool = False    # vLLM exporting V1 metric names (kv_cache_usage_perc): the V1 engine, >= 0.8

    @property
    def version_tuple(self) -> tuple[int, int, int] | None:
        return parse_version(self.version)

    @property
    def label(self) -> str:
        if self.name is None:
            return "unknown engine"
        text = f"{self.name} {self.version}" if self.version else self.name
        return f"{text} (V0 engine)" if self.v0 else text

    @property
    def module(self):
        """The registry's Engine for this name, or None for an engine triage has no module for."""
        return get(self.name)

    def default_on(self, feature: str) -> bool | None:
        """Is `feature` ('chunked_prefill' | 'prefix_caching') on by default here? None: unknown."""
        engine = self.module
        return None if engine is None else engine.default_on(feature, self.version, self.v0, self.v1_metrics)


def flag(knob: str, engine: str | None, value: object = None, version: str | None = None) -> str | None:
    """The flag for `knob` on `engine`, checked against that version's table; None when there is none."""
    if engine not in LAUNCHERS:
        return None
    return render(knob, engine, value, version).text
