"""docs/SNAPSHOT.md and the current report JSON Schema are generated from the payload types: fail when
the committed copies are stale (run `python scripts/gen_probe_docs.py`)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("gen_probe_docs", ROOT / "scripts" / "gen_probe_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_probe_docs_and_schema_are_current():
    for path, text in _generator().outputs().items():
        assert path.exists(), f"{path.name} is missing: run python scripts/gen_probe_docs.py"
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.relative_to(ROOT)} is stale: run python scripts/gen_probe_docs.py and commit the result"


def test_every_schema_version_keeps_its_file():
    from triage.core.report import SCHEMA_VERSION
    names = {p.name for p in (ROOT / "triage" / "core" / "schema").glob("report-*.schema.json")}
    assert {"report-1.0.schema.json", f"report-{SCHEMA_VERSION}.schema.json"} <= names
