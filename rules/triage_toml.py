"""triage.toml, read into a RulesConfig. Each table is a typed dataclass: a key the file has and the table does
not declare is an error naming the known ones.

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

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from triage.core.errors import UsageError
from triage.rules.rules_config import RulesConfig


@dataclasses.dataclass(frozen=True)
class RulesTable:
    disable: Any = ()
    enable_only: Any = None


@dataclasses.dataclass(frozen=True)
class TargetTable:
    engine: Any = None
    engine_version: Any = None


@dataclasses.dataclass(frozen=True)
class ModelTable:
    weight_bytes: Any = None


@dataclasses.dataclass(frozen=True)
class TriageToml:
    rules: RulesTable = RulesTable()
    target: TargetTable = TargetTable()
    model: ModelTable = ModelTable()
    thresholds: Any = dataclasses.field(default_factory=dict)


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
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a list of rule codes, e.g. [\"GPU007\"]")
    return frozenset(v.strip().upper() for v in value)


def _known(cls: type) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(cls))


def _table(cls: type, name: str, value: Any, source: str, problems: list[str]) -> Any:
    """One [table] as its dataclass; its problems (not a table, unknown keys) added to `problems`."""
    if value is None:
        return cls()
    if not isinstance(value, Mapping):
        problems.append(f"{source}: [{name}] must be a table")
        return cls()
    known = _known(cls)
    problems += [f"{source}: unknown key {k!r} in [{name}] (known: {', '.join(known)})"
                 for k in sorted(set(value) - set(known))]
    return cls(**{k: v for k, v in value.items() if k in known})


def parse(data: Mapping[str, Any], source: str = "triage.toml") -> TriageToml:
    """The file's tables, typed; UsageError naming every unknown table and key."""
    tables = {f.name: f for f in dataclasses.fields(TriageToml)}
    problems = [f"{source}: unknown table [{t}] (known: {', '.join(sorted(tables))})" for t in sorted(set(data) - set(tables))]
    values: dict[str, Any] = {}
    for name, f in tables.items():
        if isinstance(f.default, (RulesTable, TargetTable, ModelTable)):
            values[name] = _table(type(f.default), name, data.get(name), source, problems)
        else:                                   # [thresholds]: free keys, checked against the threshold table
            values[name] = data.get(name) or {}
    if problems:
        raise UsageError("; ".join(problems))
    toml = TriageToml(**values)
    if not isinstance(toml.thresholds, Mapping):
        raise UsageError(f"{source}: [thresholds] must be a table")
    return toml


def config_from_mapping(data: Mapping[str, Any], source: str = "triage.toml") -> RulesConfig:
    """Build and validate a RulesConfig from parsed TOML."""
    from triage.rules.registry import REGISTRY

    toml = parse(data, source)
    weight = toml.model.weight_bytes
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0):
        raise UsageError(f"{source}: [model] weight_bytes must be a positive number of bytes")
    version = toml.target.engine_version
    config = RulesConfig(
        disabled=_codes(toml.rules.disable, f"{source}: [rules] disable"),
        enabled_only=_codes(toml.rules.enable_only, f"{source}: [rules] enable_only")
        if toml.rules.enable_only is not None else None,
        thresholds=_flatten(toml.thresholds), target_engine=toml.target.engine,
        target_engine_version=str(version) if version is not None else None,
        model_weight_bytes=float(weight) if weight is not None else None)
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
