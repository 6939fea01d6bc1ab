"""Which optional dependency groups ("extras") are installed, and the pip line that installs one from this
project. pyproject.toml's [project.optional-dependencies] is the one list: an installed triage reads it from
its own metadata, a checkout without an install from pyproject.toml itself.

The pip line never names a bare `triage`: that name on PyPI belongs to an unrelated project. It installs from
where this triage came from (the checkout, or the wheel file, read from pip's direct_url.json), or else it
lists the extra's own requirements, which install anywhere."""
from __future__ import annotations

import json
import re
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "triage-llm"          # the distribution's name; the command and the import name stay `triage`
_CHECKOUT = Path(__file__).resolve().parents[2]
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([\w-]+)["']""")


def _distribution() -> metadata.Distribution | None:
    try:
        return metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def _declared() -> dict[str, list[str]]:
    """{extra: [requirement, ...]} as declared, nested extras (`all`) expanded."""
    dist = _distribution()
    groups: dict[str, list[str]] = {}
    if dist is not None:
        for line in dist.requires or []:
            spec, _, marker = line.partition(";")
            found = _EXTRA_MARKER.search(marker)
            if found:
                groups.setdefault(found.group(1), []).append(spec.strip())
    else:
        groups = {name: list(reqs) for name, reqs in _pyproject().get("optional-dependencies", {}).items()}
    return {name: _expand(reqs, groups) for name, reqs in groups.items()}


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    path = _CHECKOUT / "pyproject.toml"
    return tomllib.loads(path.read_text())["project"] if path.is_file() else {}


def _expand(reqs: list[str], groups: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    for req in reqs:
        nested = re.fullmatch(rf"{re.escape(DISTRIBUTION)}\[([\w,\s-]+)\]", req.split(";")[0].strip())
        if nested:
            for name in nested.group(1).split(","):
                out += _expand(groups.get(name.strip(), []), groups)
        elif req not in out:
            out.append(req)
    return out


def requirements(extra: str) -> list[str]:
    """The requirement strings an extra declares ("torch>=2.4", ...)."""
    declared = _declared()
    if extra not in declared:
        raise KeyError(f"no extra named {extra!r}; declared: {', '.join(sorted(declared))}")
    return declared[extra]


def _requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~\[;(]", req.strip(), maxsplit=1)[0]


def missing(extra: str) -> list[str]:
    """The extra's distributions that are not installed (names as declared)."""
    absent = []
    for req in requirements(extra):
        name = _requirement_name(req)
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def _installed_from() -> tuple[str, bool] | None:
    """(local path, editable) this triage was installed from, when pip recorded one that still exists."""
    for dist in metadata.distributions(name=DISTRIBUTION):   # a checkout's own *.egg-info has no record
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "null")
        except (OSError, ValueError):
            continue
        if isinstance(direct, dict) and str(direct.get("url", "")).startswith("file:"):
            path = Path(unquote(urlparse(direct["url"]).path))
            return (str(path), bool((direct.get("dir_info") or {}).get("editable"))) if path.exists() else None
    return (str(_CHECKOUT), False) if (_CHECKOUT / "pyproject.toml").is_file() else None


def install_line(extra: str) -> str:
    """The exact pip command that installs `extra` for this triage."""
    source = _installed_from()
    if source is not None:
        path, editable = source
        return f"pip install {'-e ' if editable else ''}'{path}[{extra}]'"
    return "pip install " + " ".join(f"'{req}'" for req in requirements(extra))
