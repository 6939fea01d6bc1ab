"""The complexity ratchet: no function over McCabe complexity 10 (ruff's C901) except those listed here, and
the list only shrinks. A new hit fails: split the function (extract helpers; no noqa). A listed function that
no longer hits fails too: remove it from the list, so that it cannot grow back."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PATHS = ("triage", "probes", "rules", "reference_engine", "scripts", "benchmarks")
MAX_COMPLEXITY = 10

# file -> the functions in it still over the limit. May only shrink.
ALLOWED: dict[str, set[str]] = {}


def _ruff() -> list[str]:
    exe = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    if exe is None:
        # Not a skip: CI installs ruff (the dev extra), and a skipped ratchet would let any function grow.
        pytest.fail("ruff is not installed, so the complexity limit cannot be checked: pip install -e '.[dev]'")
    return [exe]


def hits() -> dict[str, set[str]]:
    """{file: {function, ...}} of every C901 hit, files relative to the repository root."""
    cmd = [*_ruff(), "check", "--select", "C901", "--config", f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
           "--output-format", "json", "--no-cache", "--exit-zero", *PATHS]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True).stdout
    found: dict[str, set[str]] = defaultdict(set)
    for hit in json.loads(out):
        name = re.search(r"`([^`]+)`", hit["message"])
        path = os.path.relpath(os.path.realpath(hit["filename"]), REPO)
        found[path].add(name.group(1) if name else hit["message"])
    return dict(found)


@pytest.fixture(scope="module")
def found() -> dict[str, set[str]]:
    return hits()


def test_no_new_function_over_the_complexity_limit(found):
    new = sorted(f"{path}: {name}" for path, names in found.items() for name in names - ALLOWED.get(path, set()))
    assert not new, (f"over McCabe complexity {MAX_COMPLEXITY}: {new}. Split them into helpers "
                     "(no noqa); the allowlist in tests/test_complexity.py only shrinks")


def test_the_allowlist_only_shrinks(found):
    fixed = sorted(f"{path}: {name}" for path, names in ALLOWED.items() for name in names - found.get(path, set()))
    assert not fixed, f"no longer over the limit, well done: remove them from ALLOWED in tests/test_complexity.py: {fixed}"
