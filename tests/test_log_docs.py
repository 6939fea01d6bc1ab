"""docs/LOGS.md is generated from the engine modules' log facts: fail when it is stale."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_logs_md_is_current():
    spec = importlib.util.spec_from_file_location("gen_log_docs", ROOT / "scripts" / "gen_log_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "LOGS.md").read_text(encoding="utf-8") == module.render(), \
        "regenerate: python scripts/gen_log_docs.py"
