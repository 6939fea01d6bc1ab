"""`triage watch`: the diagnose probes and rules on a loop, exported as Prometheus metrics (docs/WATCH.md).

signals.py turns one cycle's report and snapshot into metric samples (pure); exporter.py serves the
latest cycle with prometheus-client; loop.py runs the cycles; alert_rules.py writes the Prometheus rules
file (`--print-alert-rules`).
"""
