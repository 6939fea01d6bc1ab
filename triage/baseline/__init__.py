"""`triage baseline`: seed 000's before/after table measured on this host with the reference engine.

Reading order: config.py (sizes) → runner.py (the row registry) → serving_rows.py / model_rows.py
(one function per ablation) → workloads.py (driving the engine) → section.py (report tables).
"""
from triage.baseline.config import ROW_KEYS, BaselineConfig
from triage.baseline.runner import run_baseline

__all__ = ["ROW_KEYS", "BaselineConfig", "run_baseline"]
