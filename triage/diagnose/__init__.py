"""`triage diagnose`: find the target, run the probes, run the rules, assemble the report."""
import importlib
from typing import Any

# Loaded on first use, so that importing the command's option types (diagnose/request.py) does not load
# the probes and rules.
_PIPELINE = ("DiagnoseOptions", "DiagnoseResult", "collect", "diagnose", "discover", "layer_summary",
             "load_snapshot", "replay", "unreachable_target")
__all__ = list(_PIPELINE)


def __getattr__(name: str) -> Any:
    if name not in _PIPELINE:
        raise AttributeError(f"module 'triage.diagnose' has no attribute {name!r}")
    return getattr(importlib.import_module("triage.diagnose.pipeline"), name)
