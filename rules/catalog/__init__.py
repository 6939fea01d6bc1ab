"""The rule catalog: one file per rule, named by its code (`gpu001_vram_spillover.py`), holding its
declaration (code, name, severity, inputs), its doc, the thresholds it reads (values in
rules/thresholds.py) and its check. Its fixtures are tests/fixtures/rules/<CODE>/. Helpers that several
rules of a family share live in `_<family>_shared.py`.

Importing this package imports every module in it, which registers each rule (rules/registry.py).
A new rule is a new file here plus its fixtures (docs/ARCHITECTURE.md)."""
from __future__ import annotations

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
