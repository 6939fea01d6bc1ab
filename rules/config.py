"""RulesConfig: which rules run, threshold overrides, and the target engine; read from triage.toml.

    [rules]
    disable = ["GPU007", "CPU002"]
    # enable_only = ["KV001"]          # run just these (fixture tests, focused checks)

    [thresholds]
    KV001.kv_usage_frac = 0.95         # or "KV001.kv_usage_frac" = 0.95, or [thresholds.KV001]

    [target]
    engine = "vllm"                    # when the probes cannot see it
    engine_version = "0.18.1"

    [model]
    weight_bytes = 16_000_000_000      # for the roofline rules (ENG002, ENG004)
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from triage.core.errors import UsageError
from triage.rules.thresholds import THRESHOLDS

ENGINES = ("vllm", "sglang", "tgi", "reference", "ollama", "llama.cpp", "hf-generate", "openai-compatible")


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
        if self.target_engine is not None and self.target_engine not in ENGINES:
            problems.append(_unknown("engine", self.target_engine, list(ENGINES)))
        if problems:
            raise UsageError("; ".join(problems) + ". `triage rules list` shows the codes and thresholds.")


def _unknown(kind: str, value: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(value, choices, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown {kind} {value!r}{hint}"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(_flatten(value, full))
        else:
            out[full] = value
    return out


def _codes(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a list of rule codes, e.g. [\"GPU007\"]")
    return frozenset(v.strip().upper() for v in value)


def config_from_mapping(data: Mapping[str, Any], source: str = "triage.toml") -> RulesConfig:
    """Build and validate a RulesConfig from parsed TOML."""
    from triage.rules.registry import REGISTRY

    allowed = {"rules", "thresholds", "target", "model"}
    extra = sorted(set(data) - allowed)
    problems = [f"{source}: unknown table [{t}] (known: {', '.join(sorted(allowed))})" for t in extra]
    rules_t = data.get("rules", {}) or {}
    target_t = data.get("target", {}) or {}
    model_t = data.get("model", {}) or {}
    for name, table, keys in (("rules", rules_t, {"disable", "enable_only"}),
                              ("target", target_t, {"engine", "engine_version"}),
                              ("model", model_t, {"weight_bytes"})):
        if not isinstance(table, Mapping):
            problems.append(f"{source}: [{name}] must be a table")
            continue
        problems += [f"{source}: unknown key {k!r} in [{name}] (known: {', '.join(sorted(keys))})"
                     for k in sorted(set(table) - keys)]
    if problems:
        raise UsageError("; ".join(problems))
    weight = model_t.get("weight_bytes")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0):
        raise UsageError(f"{source}: [model] weight_bytes must be a positive number of bytes")
    thresholds_t = data.get("thresholds", {}) or {}
    if not isinstance(thresholds_t, Mapping):
        raise UsageError(f"{source}: [thresholds] must be a table")
    config = RulesConfig(
        disabled=_codes(rules_t.get("disable", []), f"{source}: [rules] disable"),
        enabled_only=_codes(rules_t["enable_only"], f"{source}: [rules] enable_only") if "enable_only" in rules_t else None,
        thresholds=_flatten(thresholds_t),
        target_engine=target_t.get("engine"),
        target_engine_version=str(target_t["engine_version"]) if target_t.get("engine_version") is not None else None,
        model_weight_bytes=float(weight) if weight is not None else None,
    )
    try:
        config.validate(REGISTRY.codes())
    except UsageError as e:
        raise UsageError(f"{source}: {e}") from None
    return config


def load_rules_config(path: Path | None) -> RulesConfig:
    """Read triage.toml; None gives the defaults. Bad files and keys raise UsageError (exit 2)."""
    if path is None:
        return RulesConfig()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UsageError("reading triage.toml needs Python 3.11+ (or `pip install tomli`)") from None
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{p}: no such config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: cannot read it ({e})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{p}: not valid TOML ({e})") from None
    return config_from_mapping(data, str(p))
