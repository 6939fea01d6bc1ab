"""One Ollama release's table, from its git tag (a local clone: --git ollama/ollama=DIR): the environment variables
`ollama serve` reads (envconfig/config.go's AsMap) and their defaults (`Uint("OLLAMA_NUM_PARALLEL", 1)`, ...).
Ollama has no flags of its own for serving and no Prometheus endpoint; its knobs are these variables."""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path
from typing import Any

CONFIG = "envconfig/config.go"
# `NumParallel = Uint("OLLAMA_NUM_PARALLEL", 1)`, `Debug = Bool("OLLAMA_DEBUG")`, `Host = String("OLLAMA_HOST")`.
_TYPED = re.compile(r'=\s*(Uint64|Uint|Bool|String|Int)\("(OLLAMA_[A-Z0-9_]+)"(?:,\s*([^)]+))?\)')
# AsMap(): `"OLLAMA_NUM_PARALLEL": {"OLLAMA_NUM_PARALLEL", NumParallel(), "Maximum number of parallel requests"},`
_LISTED = re.compile(r'^\s*"((?:OLLAMA|HTTPS?|NO)_?[A-Z0-9_]*)":\s*\{', re.M)
_KIND = {"Uint": "int", "Uint64": "int", "Int": "int", "Bool": "bool", "String": "str"}
# Before 0.3 (v0.1.x, v0.2.x): AsMap names a package variable (`{"OLLAMA_NUM_PARALLEL", NumParallel, ...}`) that
# LoadConfig's defaults set (`NumParallel = 0 // Autoselect`).
_MAPPED = re.compile(r'"(OLLAMA_[A-Z0-9_]+)":\s*\{"OLLAMA_[A-Z0-9_]+",\s*([A-Z]\w*)\s*,')
_ASSIGNED = r"^\s*{var}\s*=\s*(\d+)\b"


def _show(clone: Path, tag: str, path: str) -> str | None:
    done = subprocess.run(["git", "-C", str(clone), "show", f"{tag}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _commit(clone: Path, tag: str) -> str:
    return subprocess.run(["git", "-C", str(clone), "rev-list", "-n", "1", tag], capture_output=True, text=True,
                          check=True).stdout.strip()


def ollama_env(config_go: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """({variable: {type, default}} for every typed variable, every variable AsMap lists)."""
    typed: dict[str, dict[str, Any]] = {}
    for kind, name, default in _TYPED.findall(config_go):
        value: Any = None
        if kind in ("Uint", "Uint64", "Int") and default.strip().isdigit():
            value = int(default.strip())
        elif kind == "Bool":
            value = False
        typed[name] = {"type": _KIND[kind], "default": value}
    for name, var in _MAPPED.findall(config_go):
        m = re.search(_ASSIGNED.format(var=re.escape(var)), config_go, re.M)
        if name not in typed and m:
            typed[name] = {"type": "int", "default": int(m.group(1))}
    listed = sorted(set(_LISTED.findall(config_go)) | set(typed))
    return dict(sorted(typed.items())), listed


def ollama_table(tag: str, clone: Path) -> dict[str, Any]:
    text = _show(clone, tag, CONFIG)
    if text is None:
        raise SystemExit(f"extract_engine_truth: Ollama {tag} has no {CONFIG}")
    typed, listed = ollama_env(text)
    return {
        "engine": "ollama", "version": tag.lstrip("v"),
        "provenance": {"repository": "ollama/ollama", "tag": tag, "commit": _commit(clone, tag),
                       "files": {CONFIG: hashlib.sha256(text.encode()).hexdigest()}},
        "flags": {}, "metrics": {}, "env": listed,
        "defaults": {name: spec["default"] for name, spec in typed.items()},
        "env_types": {name: spec["type"] for name, spec in typed.items()},
        "unresolved": [],
    }
