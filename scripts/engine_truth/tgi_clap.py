"""TGI's launcher flags, read from its clap `struct Args` (launcher/src/main.rs) with regular expressions."""
from __future__ import annotations

import re
from typing import Any

_CLAP_FIELD = re.compile(r"#\[clap\(([^\]]*)\)\]\s*(?:///[^\n]*\n\s*)*(?:pub\s+)?(\w+)\s*:\s*([^,\n]+),", re.S)
_ENUM = re.compile(r"enum\s+(\w+)\s*\{(.*?)\n\}", re.S)
_RUST_INTS = ("usize", "u32", "u64", "i32", "i64", "u16")


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _clap_enums(src: str) -> dict[str, list[str]]:
    out = {}
    for m in _ENUM.finditer(src):
        values, pending = [], None
        for line in m.group(2).splitlines():
            line = line.strip()
            named = re.match(r'#\[clap\(name\s*=\s*"([^"]+)"', line)
            if named:
                pending = named.group(1)
                continue
            var = re.match(r"([A-Z]\w*)\s*[,({]?", line)
            if var and not line.startswith(("//", "#")):
                values.append(pending or _kebab(var.group(1)))
                pending = None
        out[m.group(1)] = values
    return out


def tgi_flags(src: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The launcher's `struct Args` clap fields -> flags."""
    body = re.search(r"struct Args\s*\{(.*?)\n\}", src, re.S)
    enums = _clap_enums(src)
    flags: dict[str, dict[str, Any]] = {}
    unresolved: list[str] = []
    if body is None:
        return flags, ["struct Args not found"]
    text = re.sub(r"^\s*///.*$", "", body.group(1), flags=re.M)
    for m in _CLAP_FIELD.finditer(text):
        attrs, field, rtype = m.group(1), m.group(2), m.group(3).strip()
        if "long" not in attrs:
            continue
        long_m = re.search(r'long\s*=\s*"([^"]+)"', attrs)
        name = "--" + (long_m.group(1) if long_m else field.replace("_", "-"))
        spec: dict[str, Any] = {"field": field}
        _apply_env_and_short(spec, attrs, field)
        if not _apply_type(spec, attrs, rtype, enums):
            unresolved.append(f"{name}: type {rtype}")
        _apply_default(spec, attrs)
        flags[name] = spec
    return dict(sorted(flags.items())), unresolved


def _apply_env_and_short(spec: dict[str, Any], attrs: str, field: str) -> None:
    env_m = re.search(r'env\s*=\s*"([^"]+)"', attrs)
    if env_m:
        spec["env"] = [env_m.group(1)]
    elif re.search(r"\benv\b", attrs):
        spec["env"] = [field.upper()]
    short_m = re.search(r"short(?:\s*=\s*'(\w)')?", attrs)
    if short_m and re.search(r"\bshort\b", attrs):
        spec["aliases"] = ["-" + (short_m.group(1) or field[0])]


def _apply_type(spec: dict[str, Any], attrs: str, rtype: str, enums: dict[str, list[str]]) -> bool:
    """The flag type of a Rust field type (Option<> and Vec<> unwrapped); False when it is a guess."""
    inner = re.sub(r"^Option<(.*)>$", r"\1", rtype)
    vec = inner.startswith("Vec<")
    inner = re.sub(r"^Vec<(.*)>$", r"\1", inner)
    resolved = True
    if inner == "bool":
        spec["type"] = "bool"
        spec["action"] = "store_true" if "value_enum" not in attrs else "bool_value"
    elif inner in _RUST_INTS:
        spec["type"] = "int"
    elif inner in ("f32", "f64"):
        spec["type"] = "float"
    elif inner in enums:
        spec["type"] = "choice"
        spec["choices"] = enums[inner]
    else:
        spec["type"] = "str"
        resolved = inner in ("String", "PathBuf")
    if vec:
        spec["nargs"] = "list"
    return resolved


def _apply_default(spec: dict[str, Any], attrs: str) -> None:
    dv = re.search(r'default_value\s*=\s*"([^"]*)"', attrs)
    if dv:
        spec["default"] = {"int": int, "float": float}.get(spec["type"], lambda s: s)(dv.group(1))
    elif spec["type"] == "bool" and "default_value_t" not in attrs:
        spec["default"] = False
