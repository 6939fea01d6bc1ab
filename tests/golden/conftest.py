"""`pytest tests/golden --regen-golden` (or TRIAGE_REGEN_GOLDEN=1) rewrites the golden reports."""
from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="Rewrite tests/golden/*.json|md|txt from the current code instead of comparing.")
