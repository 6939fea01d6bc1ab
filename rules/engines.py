"""Engine knowledge: each tuning knob's flag per engine, and what each version turns on by default.

Facts (checked against the engines' source; see triage/core/engine_truth for the per-version tables):
- vLLM 0.8.0 made the V1 engine the default (PR #13726). V1 always schedules with chunked prefill and
  enables automatic prefix caching by default; `--no-enable-prefix-caching` turns it off.
  `VLLM_USE_V1=0` kept V0 (where both are off by default) until V0 was removed.
- vLLM picks FlashAttention 3 on Hopper (SM90) since 0.8 (PR #14244; `get_flash_attn_version` in
  fa_utils.py, every tabled version from 0.8.5) and FlashAttention 4 on SM100 only in newer releases
  (PR #32974; `flash_attn_4_on_sm100` in the truth tables). Seed 000's "0.17 picks FA3/4" is only partly
  right; triage follows the source.
- SGLang: RadixAttention prefix caching is on unless `--disable-radix-cache`; chunked prefill is on
  (`--chunked-prefill-size`, -1 disables it); CUDA graphs are on unless `--disable-cuda-graph`.
- TGI 3.0 turned on prefix caching and chunked prefill by default (flash/paged backends).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from triage.rules.engine_flags import DISABLING_FLAGS, KNOBS, LAUNCHERS, Knob, engine_flags, render

__all__ = ["DISABLING_FLAGS", "FLAGS", "LAUNCHERS", "EngineInfo",
           "engine_flags", "flag", "normalise_engine", "parse_version"]

# Flag knowledge lives in triage.rules.engine_flags (checked against triage/core/engine_truth).
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
    if not name:
        return None
    n = str(name).strip().lower()
    if n.startswith("vllm"):
        return "vllm"
    if n in ("text-generation-inference", "tgi"):
        return "tgi"
    if n in ("llamacpp", "llama-cpp", "llama.cpp", "llama-server"):
        return "llama.cpp"
    return n


@dataclass(frozen=True, slots=True)
class EngineInfo:
    name: str | None            # vllm | sglang | tgi | reference | ollama | llama.cpp | hf-generate | None
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

    def default_on(self, feature: str) -> bool | None:
        """Is `feature` ('chunked_prefill' | 'prefix_caching') on by default here? None: unknown."""
        v = self.version_tuple
        if self.name == "vllm":
            if self.v0:
                return False
            if v is None:
                return True if self.v1_metrics else None
            return v >= (0, 8, 0)
        if self.name == "sglang":
            return True
        if self.name == "tgi":
            return None if v is None else v >= (3, 0, 0)
        if self.name == "reference":
            return True
        return None


def flag(knob: str, engine: str | None, value: object = None, version: str | None = None) -> str | None:
    """The flag for `knob` on `engine`, checked against that version's table; None when there is none."""
    if engine not in LAUNCHERS:
        return None
    return render(knob, engine, value, version).text
