"""The reference engine is laid out by job (engine/, layers/, models/, host/, serve/), nano-vllm's
shape, and no two of its modules share a base name: a name says which job a file does."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "reference_engine"
SUBPACKAGES = {"engine", "layers", "models", "host", "serve"}


def test_no_two_modules_share_a_base_name():
    seen: dict[str, list[str]] = defaultdict(list)
    for path in ENGINE.rglob("*.py"):
        if path.name != "__init__.py":
            seen[path.stem].append(path.relative_to(ENGINE).as_posix())
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, f"rename to say the difference: {shared}"


def test_modules_live_in_a_subpackage_by_job():
    top = sorted(p.name for p in ENGINE.glob("*.py") if p.name != "__init__.py")
    assert top == [], f"put these in one of {sorted(SUBPACKAGES)}: {top}"
    packages = {p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == SUBPACKAGES


def test_no_module_is_named_like_a_subpackage():
    stems = {p.stem for p in ENGINE.rglob("*.py")}
    assert not stems & SUBPACKAGES, "e.g. engine/engine.py: name the module for what it holds"
