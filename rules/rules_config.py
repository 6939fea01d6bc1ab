"""RulesConfig: which rules run, threshold overrides, the target engine and the model's weight bytes. Read
from triage.toml by rules/triage_toml.py."""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from triage.core.errors import UsageError
from triage.engines import known_names
from triage.rules.thresholds import THRESHOLDS


@dataclass(frozen=True, slots=True)
class RulesConfig:
    disabled: frozenset[str] = frozenset()
    enabled_only: frozenset[str] | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    target_engine: str | None = None
    target_engine_version: str | None = None
    model_weight_bytes: float | None = None

    def with_disabled(self, codes: Iterable[str]) -> RulesConfig:
        """A copy with more codes turned off (the CLI's --disable CODE)."""
        return replace(self, disabled=self.disabled | {c.strip().upper() for c in codes if c.strip()})

    def is_enabled(self, code: str) -> bool:
        if code in self.disabled:
            return False
        return self.enabled_only is None or code in self.enabled_only

    def threshold(self, key: str) -> float:
        if key in self.thresholds:
            return float(self.thresholds[key])
        return THRESHOLDS[key].value

    def validate(self, known_codes: Iterable[str]) -> None:
        """Raise UsageError naming every unknown code or threshold, with close matches."""
        codes = sorted(known_codes)
        problems: list[str] = []
        for code in sorted(self.disabled | (self.enabled_only or frozenset())):
            if code not in codes:
                problems.append(_unknown("rule code", code, codes))
        for key, value in self.thresholds.items():
            if key not in THRESHOLDS:
                problems.append(_unknown("threshold", key, list(THRESHOLDS)))
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"threshold {key} must be a number, got {value!r}")
        if self.target_engine is not None and self.target_engine.lower() not in known_names():
            problems.append(_unknown("engine", self.target_engine, list(known_names())))
        if problems:
            raise UsageError("; ".join(problems) + ". `triage rules list` shows the codes and thresholds.")


def _unknown(kind: str, value: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(value, choices, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown {kind} {value!r}{hint}"
