"""`triage baseline`: seed 000's before/after table measured on this host with the reference engine.

Reading order: config.py (sizes) → runner.py (the row registry) → serving_rows.py / model_rows.py
(one function per ablation) → workloads.py (driving the engine) → section.py (report tables).
The package import is light: runner.py (torch) is imported by whoever runs the rows.
"""
