"""PromQL templates for `diagnose --prometheus`: pure string building. Templates take `{sel}` (the label matcher,
e.g. `{instance="10.0.0.5:8000"}` or empty) and `{w}` (the window, e.g. `1h`); each returns one number."""
from __future__ import annotations


def quantile(q: float, *histograms: str) -> str:
    rates = " or ".join(f"rate({h}_bucket{{sel}}[{{w}}])" for h in histograms)
    return f"histogram_quantile({q}, sum by (le) ({rates}))"


def rate(*counters: str) -> str:
    return "sum(" + " or ".join(f"rate({c}{{sel}}[{{w}}])" for c in counters) + ")"


def avg(*gauges: str) -> str:
    return "sum(" + " or ".join(f"avg_over_time({g}{{sel}}[{{w}}])" for g in gauges) + ")"


def peak(*gauges: str) -> str:
    return "max(" + " or ".join(f"max_over_time({g}{{sel}}[{{w}}])" for g in gauges) + ")"


def mean_of(*gauges: str) -> str:
    return "avg(" + " or ".join(f"avg_over_time({g}{{sel}}[{{w}}])" for g in gauges) + ")"
