"""The rule catalog: one file per rule, named by its code (`gpu001_vram_spillover.py`), holding its
declaration (code, name, severity, inputs), its doc, the thresholds it reads (values in
rules/thresholds.py) and its check. Its fixtures are tests/fixtures/rules/<CODE>/. Helpers that several
rules of a family share live in `_<family>_shared.py`.

The rule registry (rules/registry.py, a triage.core.registry.Registry) imports every module in it on first use,
which registers each rule. A new rule is a new file here plus its fixtures (docs/ARCHITECTURE.md)."""
