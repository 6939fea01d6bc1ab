"""Did the host drift during a bench? The same level's first and last repeats, compared against the noise
within a repeat.

For TTFT and E2E (means, whose noise within a repeat is known from the repeat's own spread: std / sqrt(n)),
the change from the first repeat to the last is called drift when it is both beyond DRIFT_Z standard errors
of the difference and larger than DRIFT_MIN_PCT of the first repeat's mean (a tiny shift measured on many
requests is real but harmless). Pure: bench writes the verdict into each level, compare re-derives it from
the repeats of any report, old ones included (no per-repeat spread: no verdict)."""
from __future__ import annotations

import math
from typing import Any

DRIFT_Z = 3.0
DRIFT_MIN_PCT = 5.0
FAMILIES = ("ttft_ms", "e2e_ms")


def _moments(rep: dict[str, Any], family: str) -> tuple[float, float, int] | None:
    mean, std, n = rep.get(f"{family}_mean"), rep.get(f"{family}_std"), rep.get("num_completed")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (mean, std, n)) or n < 2 or mean <= 0:
        return None
    return float(mean), float(std), int(n)


def drift_check(repeats: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """{"drifted", "metrics": {family: {first_mean, last_mean, change_pct, z, drifted}}, "first_repeat",
    "last_repeat", and the repeats' start times and host loads when recorded}; None with fewer than two
    repeats, or repeats that do not carry their mean, spread and count (reports from before this check)."""
    reps = [r for r in (repeats or []) if isinstance(r, dict)]
    if len(reps) < 2:
        return None
    if all(isinstance(r.get("started_epoch_s"), (int, float)) for r in reps):
        reps = sorted(reps, key=lambda r: r["started_epoch_s"])
    first, last = reps[0], reps[-1]
    metrics: dict[str, Any] = {}
    for family in FAMILIES:
        a, b = _moments(first, family), _moments(last, family)
        if a is None or b is None:
            continue
        (m1, s1, n1), (m2, s2, n2) = a, b
        se = math.sqrt(s1 * s1 / n1 + s2 * s2 / n2)
        diff = m2 - m1
        z = diff / se if se > 0 else (math.inf if diff else 0.0) * (1 if diff >= 0 else -1)
        pct = 100.0 * diff / m1
        metrics[family] = {"first_mean": m1, "last_mean": m2, "change_pct": pct,
                           "z": z if math.isfinite(z) else None,
                           "drifted": abs(z) > DRIFT_Z and abs(pct) > DRIFT_MIN_PCT}
    if not metrics:
        return None
    out: dict[str, Any] = {"drifted": any(m["drifted"] for m in metrics.values()), "metrics": metrics,
                           "first_repeat": first.get("repeat", 0), "last_repeat": last.get("repeat", len(reps) - 1),
                           "z_limit": DRIFT_Z, "min_change_pct": DRIFT_MIN_PCT}
    for key in ("started_epoch_s", "host_load_1m"):
        if first.get(key) is not None and last.get(key) is not None:
            out[f"first_{key}"], out[f"last_{key}"] = first[key], last[key]
    return out


def describe(where: str, check: dict[str, Any]) -> str:
    """One line for a level that drifted (`where`: "at c=4", "in the candidate at c=4"): which metric moved,
    by how much, and the host load around it."""
    moved = [f"{fam} mean {m['change_pct']:+.1f}%" + (f" (z={m['z']:.1f})" if m["z"] is not None else "")
             for fam, m in check["metrics"].items() if m["drifted"]]
    load = ""
    if check.get("first_host_load_1m") is not None:
        load = f"; host load {check['first_host_load_1m']:.2f} -> {check['last_host_load_1m']:.2f}"
    return (f"drift {where}: from its first repeat to its last, {', '.join(moved)}, beyond the noise within "
            f"a repeat{load}")
