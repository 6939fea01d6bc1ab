"""`triage baseline`: the before/after gain of each serving optimization (the table of "Why Your LLM Inference Is Slow (And How to Fix It)") measured on this host with the reference engine.

Reading order: config.py (sizes) → runner.py (the row registry) → serving_rows.py / model_rows.py
(one function per ablation) → workloads.py (driving the engine) → section.py (report tables).
The package import is light: runner.py (torch) is imported by whoever runs the rows.
"""
