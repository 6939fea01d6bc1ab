"""The rule fixtures' cases, one module per rule code (gpu001.py ... topo005.py), each with `CODE` and
`cases()`: the healthy snapshot and bench of _healthy.py changed by the typed edits of _build.py.
tests/rules_fixtures.py writes them to tests/fixtures/rules/<CODE>/<name>.json."""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any


def rule_modules() -> list[Any]:
    """Every rule's case module, by name (the modules whose names start with _ are shared builders)."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def all_cases() -> list[tuple[str, str, dict[str, Any]]]:
    """(code, case name, fixture body) of every case."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    for module in rule_modules():
        code = module.CODE
        if module.__name__.rsplit(".", 1)[1] != code.lower():
            raise ValueError(f"{module.__name__} holds {code}: one module per rule code, named after it")
        for c in module.cases():
            if (code, c.name) in seen:
                raise ValueError(f"{code} has two cases named {c.name}")
            seen.add((code, c.name))
            out.append((code, c.name, c.body()))
    return out
